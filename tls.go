package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
	"golang.org/x/net/idna"

	"herald/model"
)

// HTTPS without a proxy: a certificate from an ACME CA for --tls-domain,
// kept in the database, or one from the --tls-cert and --tls-key files.
// --addr is then the HTTPS listener; --http-addr answers the CA's HTTP-01
// challenges and sends everything else to HTTPS.

// letsEncrypt is --acme-directory's default.
const letsEncrypt = "https://acme-v02.api.letsencrypt.org/directory"

// hstsMaxAge is how long a browser that has seen an answer over TLS keeps
// to HTTPS for the host: a year, as HSTS preload lists ask.
const hstsMaxAge = 365 * 24 * time.Hour

// certStore keeps named values (certificates with their keys, the ACME
// account's key) for the ACME client; both stores implement it.
type certStore interface {
	Cert(ctx context.Context, name string) ([]byte, error)
	PutCert(ctx context.Context, name string, data []byte) error
	DeleteCert(ctx context.Context, name string) error
}

// certLocker is a store shared by instances (PostgreSQL): its lock lets
// one instance order a certificate while the others wait for it.
type certLocker interface {
	LockCerts(ctx context.Context) (unlock func(), err error)
}

// serverTLS is how serve answers over TLS.
type serverTLS struct {
	config *tls.Config
	// url is where the server is reached: https://DOMAIN/ with
	// --tls-domain, else empty.
	url     string
	domains []string
	// httpHandler is what --http-addr serves (see listenPlainHTTP).
	httpHandler http.Handler
	// ready, when set, obtains the certificate right away, so the first
	// visitor does not wait for the order; start calls it as the HTTPS
	// listener answers (the CA's TLS-ALPN-01 challenge comes to it).
	ready func(ctx context.Context)
	// files, when set, are --tls-cert and --tls-key, read again on SIGHUP.
	files *certFiles
	// acme, when set, obtains certificates; start gives it the store.
	acme *autocert.Manager
}

// tlsFlags are the flags of HTTPS, part of config.
type tlsFlags struct {
	tlsDomain     string // comma-separated
	acmeDirectory string
	acmeEmail     string
	httpAddr      string
	tlsCert       string
	tlsKey        string
}

func (c *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.tlsDomain, "tls-domain", "", "serve HTTPS on --addr with a certificate for this domain (comma-separated for several), obtained and renewed from an ACME CA (Let's Encrypt unless --acme-directory says) and kept in the database; the CA must reach this server on port 443 (TLS-ALPN-01) or on --http-addr at port 80 (HTTP-01); asking is agreeing to the CA's terms (`DOMAIN`)")
	c.acmeDirectory = letsEncrypt
	fs.StringVar(&c.acmeDirectory, "acme-directory", c.acmeDirectory, "with --tls-domain, the ACME CA's directory URL (`URL`)")
	fs.StringVar(&c.acmeEmail, "acme-email", "", "with --tls-domain, the e-mail the CA may write to about the certificates, such as expiry warnings; none when empty (`EMAIL`)")
	fs.StringVar(&c.httpAddr, "http-addr", "", "with --tls-domain or --tls-cert, a plain-HTTP listener that answers the CA's HTTP-01 challenges and redirects everything else to HTTPS; with --tls-domain :80 when empty, with --tls-cert off when empty (`HOST:PORT`)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "serve HTTPS on --addr with the certificate chain in this PEM file, read again on SIGHUP; needs --tls-key (`FILE`)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "the private key of --tls-cert, a PEM file, read again on SIGHUP (`FILE`)")
}

func (c *tlsFlags) validate() error {
	switch {
	case c.tlsDomain != "" && c.tlsCert != "":
		return configError("tls-cert", "cannot go with --tls-domain: the certificate comes either from the files or from the CA")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return configError("tls-key", "and --tls-cert go together")
	case c.httpAddr != "" && !c.tlsEnabled():
		return configError("http-addr", "needs --tls-domain or --tls-cert: without them --addr already answers plain HTTP")
	}
	if c.tlsDomain != "" && len(splitList(c.tlsDomain)) == 0 {
		return configError("tls-domain", "names no domain")
	}
	for _, d := range splitList(c.tlsDomain) {
		if _, err := domainName(d); err != nil {
			return configError("tls-domain", fmt.Sprintf("has %q, %v", d, err))
		}
	}
	if c.tlsDomain != "" {
		if u, err := url.Parse(c.acmeDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
			return configError("acme-directory", "must be an https:// URL")
		}
		if c.acmeEmail != "" && !strings.Contains(c.acmeEmail, "@") {
			return configError("acme-email", "must be an e-mail address")
		}
	}
	return nil
}

// tlsEnabled reports whether HTTPS is asked for.
func (c *tlsFlags) tlsEnabled() bool { return c.tlsDomain != "" || c.tlsCert != "" }

// tlsDomains is --tls-domain's list as validate made of it: each name as
// TLS clients send it (see domainName).
func (c *tlsFlags) tlsDomains() []string {
	var out []string
	for _, d := range splitList(c.tlsDomain) {
		if name, err := domainName(d); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// domainName is d as a certificate names it and as TLS clients ask for
// it: lower case, its trailing dot (a fully qualified name's) dropped,
// and an internationalised name in its ASCII form (bücher.example is
// xn--bcher-kva.example), which is what browsers send. Errors say why d
// cannot have a certificate of its own from an ACME CA.
func domainName(d string) (string, error) {
	switch {
	case strings.HasPrefix(d, "*."):
		return "", errors.New("a wildcard: ACME CAs give wildcard certificates only through DNS-01 challenges, which Herald does not answer; name each domain instead")
	case strings.ContainsAny(d, ":/@ *"):
		return "", errors.New("which is not a domain name like herald.example.com")
	}
	// Converted as browsers look a name up, refusing what no public name
	// can be: labels longer than DNS allows, characters other than
	// letters, digits and hyphens.
	certifiable := idna.New(idna.MapForLookup(), idna.BidiRule(), idna.ValidateLabels(true),
		idna.VerifyDNSLength(true), idna.StrictDomainName(true))
	name, err := certifiable.ToASCII(strings.TrimSuffix(d, "."))
	switch {
	case err != nil || name == "":
		return "", errors.New("which is not a domain name like herald.example.com")
	case net.ParseIP(name) != nil:
		return "", errors.New("an IP address: ACME CAs certify domain names; use a name that points at this machine")
	case !strings.Contains(name, "."):
		return "", errors.New("which is not a domain name like herald.example.com: a CA certifies only names under a public suffix")
	}
	return name, nil
}

// setupTLS prepares HTTPS as cfg asks, or returns nil for plain HTTP.
// httpsPort is the port --addr listens on, for the redirects.
func setupTLS(cfg *config, httpsPort string, logger *slog.Logger) (*serverTLS, error) {
	if !cfg.tlsEnabled() {
		return nil, nil
	}
	redirect := &httpsRedirect{port: httpsPort, domains: cfg.tlsDomains()}
	if u, err := url.Parse(cfg.publicURL); err == nil && u.Scheme == "https" {
		redirect.base = strings.TrimSuffix(cfg.publicURL, "/")
	}
	// Live streams take their connection over from net/http, which HTTP/2
	// does not allow: HTTPS speaks HTTP/1.1.
	t := &serverTLS{config: &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}}
	if cfg.tlsCert != "" {
		files := &certFiles{cert: cfg.tlsCert, key: cfg.tlsKey}
		if err := files.load(); err != nil {
			return nil, err
		}
		logger.Info("TLS certificate loaded", files.attrs()...)
		t.files = files
		t.config.GetCertificate = files.get
		t.httpHandler = redirect
		return t, nil
	}
	domains := cfg.tlsDomains()
	m := &autocert.Manager{
		// Asking for a certificate with --tls-domain is agreeing to the
		// CA's terms; docs/https.md says so.
		Prompt:     autocert.AcceptTOS,
		HostPolicy: autocert.HostWhitelist(domains...),
		Email:      cfg.acmeEmail,
		Client: &acme.Client{
			DirectoryURL: cfg.acmeDirectory,
			UserAgent:    "herald/" + currentBuild().Version,
			HTTPClient:   &http.Client{Timeout: time.Minute},
		},
	}
	t.acme = m
	t.config.GetCertificate = m.GetCertificate
	t.config.NextProtos = append(t.config.NextProtos, acme.ALPNProto)
	t.url, t.domains = "https://"+domains[0]+"/", domains
	challenges := m.HTTPHandler(redirect)
	t.httpHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The CA asks for port 80, but a router may forward another port
		// to this one, and the Host header then names it: the challenge
		// is answered for the host whatever the port.
		r.Host = hostOnly(r.Host)
		challenges.ServeHTTP(w, r)
	})
	t.ready = func(ctx context.Context) {
		for _, d := range domains {
			// What a client offering ECDSA asks: the certificate most
			// clients are served.
			c, err := m.GetCertificate(&tls.ClientHelloInfo{ServerName: d,
				SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256},
				SupportedCurves:  []tls.CurveID{tls.CurveP256},
				CipherSuites:     []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
			if err != nil {
				if ctx.Err() == nil {
					logger.Warn("no TLS certificate yet; the next connection for it tries again", "domain", d, "err", err)
				}
				continue
			}
			logger.Info("TLS certificate ready", "domain", d, "expires", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return t, nil
}

// hostOnly is a Host header without its port (and an IPv6 address
// without its brackets).
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// httpsRedirect sends a plain-HTTP request to HTTPS: GET and HEAD are
// redirected; anything else is refused, since its body has already gone
// out unencrypted and a redirect would hide that from whoever sent it.
type httpsRedirect struct {
	base    string   // --public-url when it is https, else empty
	port    string   // the HTTPS listener's port
	domains []string // --tls-domain's, if any
}

func (h *httpsRedirect) target(r *http.Request) string {
	if h.base != "" {
		return h.base + r.URL.RequestURI()
	}
	host := hostOnly(r.Host)
	if len(h.domains) > 0 && !slices.Contains(h.domains, strings.ToLower(host)) {
		// Only to a name the certificate is for.
		host = h.domains[0]
	}
	if host == "" {
		return ""
	}
	switch {
	case h.port != "443":
		host = net.JoinHostPort(host, h.port)
	case strings.Contains(host, ":"):
		host = "[" + host + "]"
	}
	return "https://" + host + r.URL.RequestURI()
}

func (h *httpsRedirect) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	to := h.target(r)
	switch {
	case to == "":
		http.Error(w, "This server answers over HTTPS only.", http.StatusBadRequest)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		http.Error(w, "This server answers over HTTPS only: send the request to "+to, http.StatusBadRequest)
	default:
		http.Redirect(w, r, to, http.StatusMovedPermanently)
	}
}

// hsts has browsers reach the server over HTTPS only, once they have
// been answered over TLS.
func hsts(next http.Handler) http.Handler {
	value := fmt.Sprintf("max-age=%d", int(hstsMaxAge.Seconds()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			w.Header().Set("Strict-Transport-Security", value)
		}
		next.ServeHTTP(w, r)
	})
}

// certFiles is --tls-cert and --tls-key: the certificate served is the
// one last read from them.
type certFiles struct {
	cert, key string
	current   atomic.Pointer[tls.Certificate]
}

// load reads the files again; on an error the certificate served stays
// the one read before. Its errors name the files, never their contents.
func (f *certFiles) load() error {
	c, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return fmt.Errorf("reading --tls-cert %s and --tls-key %s: %w", f.cert, f.key, err)
	}
	f.current.Store(&c)
	return nil
}

func (f *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return f.current.Load(), nil
}

// attrs describe the certificate served, for the log: what it is for and
// until when, nothing of its key.
func (f *certFiles) attrs() []any {
	c := f.current.Load()
	if c == nil || c.Leaf == nil {
		return []any{"cert", f.cert}
	}
	names := c.Leaf.DNSNames
	if len(names) == 0 {
		names = []string{c.Leaf.Subject.CommonName}
	}
	return []any{"cert", f.cert, "names", strings.Join(names, ","), "expires", c.Leaf.NotAfter.UTC().Format(time.RFC3339)}
}

// reloadOnHangup reads the files again on each SIGHUP until ctx ends.
func (f *certFiles) reloadOnHangup(ctx context.Context, logger *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := f.load(); err != nil {
					logger.Warn("TLS certificate not reloaded; still serving the one read before", "err", err)
					continue
				}
				logger.Info("TLS certificate reloaded", f.attrs()...)
			}
		}
	}()
}

// certCache keeps the ACME client's certificates and account in the
// store: autocert.Cache over certStore.
//
// It also makes sure one instance orders a certificate while others
// sharing the store wait for it. autocert orders when its cache has no
// certificate, or one due for renewal: so reading a domain's certificate
// takes the store's lock (certLocker on PostgreSQL; in process on bbolt,
// which one process opens), and when the certificate is missing or due,
// keeps it until the certificate is stored or the order gives up (the
// context of the read, which autocert keeps for the whole order, ends).
// Another instance's read waits meanwhile, then finds the new
// certificate. The account's key is written only during an order, under
// the lock, so instances share one account too.
type certCache struct {
	store   certStore
	lock    func(ctx context.Context) (unlock func(), err error)
	domains []string
	now     func() time.Time

	mu   sync.Mutex
	held map[string]*heldLock // a certificate's name → the lock its order holds
}

// heldLock is the lock an order holds, given back once: by the store of
// its certificate or by the end of the order, whichever comes first.
type heldLock struct {
	once   sync.Once
	unlock func()
}

func (h *heldLock) release() { h.once.Do(h.unlock) }

func newCertCache(store certStore, domains []string) *certCache {
	c := &certCache{store: store, domains: domains, now: time.Now, held: make(map[string]*heldLock)}
	if l, ok := store.(certLocker); ok {
		c.lock = l.LockCerts
	} else {
		turn := make(chan struct{}, 1)
		c.lock = func(ctx context.Context) (func(), error) {
			select {
			case turn <- struct{}{}:
				return func() { <-turn }, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
	return c
}

// isCert reports whether name is one of a domain's certificates, as
// autocert names them: the domain (ECDSA), or with "+rsa".
func (c *certCache) isCert(name string) bool {
	return slices.Contains(c.domains, strings.TrimSuffix(name, "+rsa"))
}

func (c *certCache) Get(ctx context.Context, name string) ([]byte, error) {
	// autocert asks for a TLS-ALPN-01 answer before it checks the name
	// against its policy: a handshake naming a domain not served must not
	// cost a read of the store.
	if domain, ok := strings.CutSuffix(name, "+token"); ok && !slices.Contains(c.domains, domain) {
		return nil, autocert.ErrCacheMiss
	}
	if !c.isCert(name) {
		return c.get(ctx, name)
	}
	// Most reads find a certificate not due: those need no lock, which on
	// PostgreSQL is a connection held and would wait behind another
	// instance's order of some other name.
	switch data, err := c.get(ctx, name); {
	case err == nil && !c.due(data):
		return data, nil
	case err != nil && !errors.Is(err, autocert.ErrCacheMiss):
		return nil, err
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return nil, err
	}
	data, err := c.get(ctx, name)
	if err != nil && !errors.Is(err, autocert.ErrCacheMiss) {
		unlock()
		return nil, err
	}
	if err == nil && !c.due(data) {
		unlock()
		return data, nil
	}
	// An order follows: the lock is kept for it.
	h := &heldLock{unlock: unlock}
	c.mu.Lock()
	if old := c.held[name]; old != nil {
		old.release() // an earlier order's, which gave up without storing
	}
	c.held[name] = h
	c.mu.Unlock()
	context.AfterFunc(ctx, func() { c.release(name, h) })
	return data, err
}

// release gives back h, and forgets it if it is still name's.
func (c *certCache) release(name string, h *heldLock) {
	c.mu.Lock()
	if c.held[name] == h {
		delete(c.held, name)
	}
	c.mu.Unlock()
	h.release()
}

func (c *certCache) get(ctx context.Context, name string) ([]byte, error) {
	data, err := c.store.Cert(ctx, name)
	if errors.Is(err, model.ErrNotFound) {
		return nil, autocert.ErrCacheMiss
	}
	return data, err
}

// due reports whether autocert would renew the certificate in data: a
// third of its life before it ends, at most 30 days before (autocert's
// threshold, before its jitter of a tenth of it). A value it cannot read
// is due, as autocert would order one in its place.
func (c *certCache) due(data []byte) bool {
	rest := data
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return true
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		leaf, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return true
		}
		threshold := min(leaf.NotAfter.Sub(leaf.NotBefore)/3, 30*24*time.Hour)
		return !c.now().Before(leaf.NotAfter.Add(-threshold))
	}
}

func (c *certCache) Put(ctx context.Context, name string, data []byte) error {
	err := c.store.PutCert(ctx, name, data)
	if c.isCert(name) {
		c.mu.Lock()
		h := c.held[name]
		c.mu.Unlock()
		if h != nil {
			c.release(name, h)
		}
	}
	return err
}

func (c *certCache) Delete(ctx context.Context, name string) error {
	return c.store.DeleteCert(ctx, name)
}

// listenPlainHTTP opens --http-addr as it applies: with --tls-domain
// (:80 unless it says otherwise), or with --tls-cert when it is given. It
// is opened before the database, as --addr is, so a start that cannot
// listen leaves nothing behind.
func listenPlainHTTP(cfg *config) (net.Listener, error) {
	addr := cfg.httpAddr
	if addr == "" && cfg.tlsDomain != "" {
		addr = ":80"
	}
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s for plain HTTP (--http-addr): %w", addr, err)
	}
	return ln, nil
}

// start has srv answer over TLS and returns the listener to serve it on,
// made from ln; it also serves httpLn (if not nil) and, until ctx ends,
// reloads certificate files on SIGHUP. Certificates from the CA are kept
// in db. stop ends the plain-HTTP server.
func (t *serverTLS) start(ctx context.Context, srv *http.Server, ln, httpLn net.Listener, db certStore, logger *slog.Logger) (tlsLn net.Listener, stop func()) {
	if t.acme != nil {
		t.acme.Cache = newCertCache(db, t.domains)
	}
	srv.Handler = hsts(srv.Handler)
	if srv.ErrorLog != nil {
		srv.ErrorLog = log.New(handshakeNoise{warn: srv.ErrorLog.Writer(), logger: logger}, "", 0)
	}
	// An empty map, not nil: no HTTP/2 (see setupTLS).
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	attrs := []any{"addr", ln.Addr().String()}
	if t.url != "" {
		attrs = append(attrs, "url", t.url)
	}
	stop = func() {}
	if httpLn != nil {
		plain := &http.Server{
			Handler:           t.httpHandler,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       30 * time.Second,
			MaxHeaderBytes:    8 << 10,
			ErrorLog:          srv.ErrorLog,
		}
		go func() { _ = plain.Serve(httpLn) }()
		stop = func() { _ = plain.Close() }
		attrs = append(attrs, "http-addr", httpLn.Addr().String())
	}
	logger.Info("serving HTTPS", attrs...)
	if t.files != nil {
		t.files.reloadOnHangup(ctx, logger)
	}
	if t.ready != nil {
		go t.ready(ctx)
	}
	// net/http must see the *tls.Conn itself (to fill Request.TLS and
	// time the handshake), so the writes are not coalesced under TLS
	// (netquirk.CoalesceWrites): the TLS records take their place.
	return tls.NewListener(ln, t.config), stop
}

// handshakeNoise takes the handshakes that fail for want of anything to
// do on the server's side out of the warnings: on a public address,
// scanners connect all day without a name (missing server name), with a
// name this server has no certificate for, or with no TLS at all. They go
// to the debug log; a failure to obtain a certificate stays a warning.
type handshakeNoise struct {
	warn   io.Writer // net/http's error log as serve set it
	logger *slog.Logger
}

func (h handshakeNoise) Write(p []byte) (int, error) {
	line := string(p)
	if strings.HasPrefix(line, "http: TLS handshake error") &&
		(!strings.Contains(line, "acme/autocert:") || containsAny(line, "missing server name", "not configured",
			"server name component count invalid", "server name contains invalid character", "no token cert for")) {
		h.logger.Debug(strings.TrimSpace(line))
		return len(p), nil
	}
	return h.warn.Write(p)
}

// containsAny reports whether s holds any of subs.
func containsAny(s string, subs ...string) bool {
	return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
}

// portOf is the port ln listens on.
func portOf(ln net.Listener) string {
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
