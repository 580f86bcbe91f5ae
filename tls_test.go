package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/acme/autocert"

	"herald/bolt"
)

// The domain the tests obtain certificates for: the challenge test
// server answers every name with 127.0.0.1.
const testDomain = "herald.test"

// acmeTimeout bounds the wait for a certificate from the ACME test server.
const acmeTimeout = 90 * time.Second

// freePort returns a loopback port the kernel had free, for a server
// whose port must be known before it starts (pebble's challenge ports
// point at Herald's).
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue writes a certificate for names (DNS names or IP addresses) and its
// key as PEM files in dir, and returns their paths and the key's PEM.
func (ca *testCA) issue(t *testing.T, dir, prefix string, serial int64, names ...string) (certPath, keyPath string, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certPath, keyPath = filepath.Join(dir, prefix+".crt"), filepath.Join(dir, prefix+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certPath, keyPath, keyPEM
}

// pool is a certificate pool holding pemCerts.
func pool(t *testing.T, pemCerts []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemCerts) {
		t.Fatalf("no certificate in %q", pemCerts)
	}
	return p
}

// httpsClient speaks to a server at addr as to serverName, trusting roots.
func httpsClient(roots *x509.CertPool, serverName, addr string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
			DisableKeepAlives: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// pebble is Debian's ACME test server, with its challenge test server as
// the resolver that answers every name with 127.0.0.1.
type pebble struct {
	directory string
	ca        *testCA // the CA of pebble's own HTTPS
	mgmt      string  // pebble's management address
	out       *syncBuffer
}

// requirePebble skips t when pebble is not installed, or fails it under
// HERALD_REQUIRE_PEBBLE=1, as CI sets.
func requirePebble(t *testing.T) {
	t.Helper()
	for _, name := range []string{"pebble", "pebble-challtestsrv"} {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("HERALD_REQUIRE_PEBBLE") == "1" {
				t.Fatalf("%s is not installed (apt-get install pebble), and HERALD_REQUIRE_PEBBLE=1", name)
			}
			t.Skipf("%s is not installed (apt-get install pebble)", name)
		}
	}
}

// startPebble starts pebble, validating TLS-ALPN-01 challenges on tlsPort
// and HTTP-01 challenges on httpPort of 127.0.0.1.
func startPebble(t *testing.T, tlsPort, httpPort string) *pebble {
	t.Helper()
	return startPebbleValid(t, tlsPort, httpPort, 0)
}

// startPebbleValid is startPebble issuing certificates valid for validity
// (pebble's default when 0).
func startPebbleValid(t *testing.T, tlsPort, httpPort string, validity time.Duration) *pebble {
	t.Helper()
	requirePebble(t)
	dir := t.TempDir()
	p := &pebble{ca: newTestCA(t), out: &syncBuffer{}}
	certPath, keyPath, _ := p.ca.issue(t, dir, "pebble", 2, "127.0.0.1", "localhost")
	dns := "127.0.0.1:" + freePort(t)
	listen := "127.0.0.1:" + freePort(t)
	p.mgmt = "127.0.0.1:" + freePort(t)
	p.directory = "https://" + listen + "/dir"
	tp, _ := strconv.Atoi(tlsPort)
	hp, _ := strconv.Atoi(httpPort)
	settings := map[string]any{
		"listenAddress": listen, "managementListenAddress": p.mgmt,
		"certificate": certPath, "privateKey": keyPath,
		"httpPort": hp, "tlsPort": tp, "ocspResponderURL": "", "externalAccountBindingRequired": false,
	}
	if validity > 0 {
		settings["certificateValidityPeriod"] = int(validity.Seconds())
	}
	config, _ := json.Marshal(map[string]any{"pebble": settings})
	configPath := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		// No random sleeps before validations, no nonces refused at
		// random, no authorizations reused: each order validates.
		cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0")
		cmd.Stdout, cmd.Stderr = p.out, p.out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	run("pebble-challtestsrv", "-dns01", dns, "-http01", "", "-https01", "", "-tlsalpn01", "",
		"-management", "127.0.0.1:"+freePort(t), "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
	run("pebble", "-config", configPath, "-dnsserver", dns)
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(p.out.String(), "Listening on: "+listen) {
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not start; output:\n%s", p.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

// orders is how many orders pebble has taken.
func (p *pebble) orders() int { return strings.Count(p.out.String(), "Added order") }

// roots is the PEM of the root pebble issues under, which it makes anew
// on each start.
func (p *pebble) roots(t *testing.T) []byte {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, p.ca.pem)}}}
	resp, err := c.Get("https://" + p.mgmt + "/roots/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pebble's root: %d %v %s", resp.StatusCode, err, b)
	}
	return b
}

// acmeEnv is the environment of a Herald that gets its certificate from
// pebble, serving HTTPS on httpsPort and plain HTTP on httpPort.
func (p *pebble) acmeEnv(t *testing.T, httpsPort, httpPort string) []string {
	t.Helper()
	// The process trusts pebble's HTTPS by Go's own variable for the
	// system's roots, as an operator would for a private CA.
	caFile := filepath.Join(t.TempDir(), "pebble-ca.pem")
	if err := os.WriteFile(caFile, p.ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"SSL_CERT_FILE=" + caFile, "HERALD_ADDR=127.0.0.1:" + httpsPort, "HERALD_HTTP_ADDR=127.0.0.1:" + httpPort,
		"HERALD_TLS_DOMAIN=" + testDomain, "HERALD_ACME_DIRECTORY=" + p.directory, "HERALD_ACME_EMAIL=ops@example.com"}
}

// waitLogWithin is waitLog with a bound of its own.
func (p *process) waitLogWithin(t *testing.T, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.stderr.String(), s) {
		select {
		case <-p.exited:
			t.Fatalf("herald exited before logging %s: %v; output:\n%s", s, p.err, p.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the log within %v; output:\n%s", s, within, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopProcess sends SIGTERM and waits for a clean exit.
func (p *process) stopProcess(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t)
}

// checkServesHTTPS requires the server at addr to answer /healthz over
// TLS as testDomain, with a certificate roots trust and the HSTS header,
// and returns the certificate's serial number.
func checkServesHTTPS(t *testing.T, roots *x509.CertPool, serverName, addr string) *big.Int {
	t.Helper()
	resp, err := httpsClient(roots, serverName, addr).Get("https://" + serverName + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS from %s: %v", addr, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz over TLS = %d", resp.StatusCode)
	}
	if got, want := resp.Header.Get("Strict-Transport-Security"), "max-age=31536000"; got != want {
		t.Errorf("Strict-Transport-Security = %q, want %q", got, want)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber
}

// certSerialRE finds the serial pebble logs for each certificate it issues.
var certSerialRE = regexp.MustCompile(`Issued certificate serial (\S+) for order`)

// TestACMEOnBolt gets a certificate from pebble with a real TLS-ALPN-01
// validation on --addr, serves HTTPS with it and HSTS, keeps it and the
// account in the bbolt file (a restart makes no new order), redirects
// plain HTTP, and never logs the certificate's private key.
func TestACMEOnBolt(t *testing.T) {
	httpsPort, httpPort := freePort(t), freePort(t)
	// HTTP-01 validations go to a port nothing listens on: only a
	// TLS-ALPN-01 validation can succeed.
	pb := startPebble(t, httpsPort, freePort(t))
	env := pb.acmeEnv(t, httpsPort, httpPort)
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	p := startProcessEnv(t, dbPath, env...)
	p.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	roots := pool(t, pb.roots(t))
	serial := checkServesHTTPS(t, roots, testDomain, p.addr)
	if got, want := pb.orders(), 1; got != want {
		t.Errorf("pebble took %d orders, want %d", got, want)
	}
	if !strings.Contains(p.stderr.String(), "url=https://"+testDomain+"/") {
		t.Errorf("the log does not name https://%s/:\n%s", testDomain, p.stderr)
	}
	checkRedirects(t, "127.0.0.1:"+httpPort, "https://"+testDomain+":"+httpsPort)
	p.stopProcess(t)
	logs := p.stderr.String()

	// A restart serves the stored certificate without asking the CA.
	p = startProcessEnv(t, dbPath, env...)
	p.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	if got := checkServesHTTPS(t, roots, testDomain, p.addr); got.Cmp(serial) != 0 {
		t.Errorf("after a restart the certificate is %v, want the stored %v", got, serial)
	}
	if got, want := pb.orders(), 1; got != want {
		t.Errorf("after a restart pebble took %d orders, want %d", got, want)
	}
	p.stopProcess(t)
	logs += p.stderr.String()

	db, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stored, err := db.Cert(context.Background(), testDomain)
	if err != nil {
		t.Fatalf("the certificate is not in the database: %v", err)
	}
	if _, err := db.Cert(context.Background(), "acme_account+key"); err != nil {
		t.Errorf("the ACME account's key is not in the database: %v", err)
	}
	checkKeyNotLogged(t, stored, logs)
}

// checkKeyNotLogged requires that no private key of stored (PEM) shows
// in logs, whole or by any line of its encoding.
func checkKeyNotLogged(t *testing.T, stored []byte, logs string) {
	t.Helper()
	if strings.Contains(logs, "PRIVATE KEY") {
		t.Errorf("the log holds a private key:\n%s", logs)
	}
	found := false
	for rest := stored; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if !strings.Contains(b.Type, "PRIVATE KEY") {
			continue
		}
		found = true
		for _, line := range bytes.Split(pem.EncodeToMemory(b), []byte("\n")) {
			if len(line) > 16 && !bytes.HasPrefix(line, []byte("-----")) && strings.Contains(logs, string(line)) {
				t.Errorf("the log holds a line of the certificate's private key: %s", line)
			}
		}
	}
	if !found {
		t.Errorf("no private key in the stored value: the check looked at nothing")
	}
}

// checkRedirects requires the plain-HTTP listener at addr to redirect GET
// to base (the HTTPS origin) and refuse a POST, whose body went out
// unencrypted.
func checkRedirects(t *testing.T, addr, base string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/api/messages?q=a%20b", nil)
	req.Host = testDomain
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusMovedPermanently; got != want {
		t.Errorf("plain GET = %d, want %d", got, want)
	}
	if got, want := resp.Header.Get("Location"), base+"/api/messages?q=a%20b"; got != want {
		t.Errorf("plain GET redirects to %q, want %q", got, want)
	}
	if resp.Header.Get("Strict-Transport-Security") != "" {
		t.Errorf("a plain-HTTP answer carries HSTS, which browsers ignore there")
	}
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/api/login", strings.NewReader(`{}`))
	req.Host = testDomain
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusBadRequest; got != want {
		t.Errorf("plain POST = %d, want %d", got, want)
	}
}

// TestACMEHTTP01 has pebble validate by HTTP-01 only (its TLS-ALPN-01
// validations go to a port nothing listens on): the plain-HTTP listener
// answers the challenge, whatever port the Host header names.
func TestACMEHTTP01(t *testing.T) {
	httpsPort, httpPort := freePort(t), freePort(t)
	pb := startPebble(t, freePort(t), httpPort)
	p := startProcessEnv(t, filepath.Join(t.TempDir(), "herald.db"), pb.acmeEnv(t, httpsPort, httpPort)...)
	p.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	checkServesHTTPS(t, pool(t, pb.roots(t)), testDomain, p.addr)
	// autocert tries TLS-ALPN-01 first, then a new order for HTTP-01.
	if got := len(certSerialRE.FindAllString(pb.out.String(), -1)); got != 1 {
		t.Errorf("pebble issued %d certificates, want 1", got)
	}
	p.stopProcess(t)
}

// TestACMEOnPostgres starts two instances on one PostgreSQL database at
// once: one orders, the other waits and serves the same certificate, and
// a third started later orders nothing either. pebble validates on the
// first instance's ports, so when the second orders, the first answers
// its challenge from the database.
func TestACMEOnPostgres(t *testing.T) {
	url := postgresCluster(t).Database(t)
	httpsA, httpA := freePort(t), freePort(t)
	pb := startPebble(t, httpsA, httpA)
	a := startProcessEnv(t, url, pb.acmeEnv(t, httpsA, httpA)...)
	b := startProcessEnv(t, url, pb.acmeEnv(t, freePort(t), freePort(t))...)
	a.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	b.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	roots := pool(t, pb.roots(t))
	serial := checkServesHTTPS(t, roots, testDomain, a.addr)
	if got := checkServesHTTPS(t, roots, testDomain, b.addr); got.Cmp(serial) != 0 {
		t.Errorf("the instances serve certificates %v and %v, want one", serial, got)
	}
	if got, want := pb.orders(), 1; got != want {
		t.Errorf("two instances starting together made %d orders, want %d", got, want)
	}
	c := startProcessEnv(t, url, pb.acmeEnv(t, freePort(t), freePort(t))...)
	c.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	if got := checkServesHTTPS(t, roots, testDomain, c.addr); got.Cmp(serial) != 0 {
		t.Errorf("a later instance serves %v, want the stored %v", got, serial)
	}
	if got, want := pb.orders(), 1; got != want {
		t.Errorf("after a third instance pebble took %d orders, want %d", got, want)
	}
	for _, p := range []*process{a, b, c} {
		p.stopProcess(t)
	}
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var stored []byte
	if err := conn.QueryRow(context.Background(), `SELECT data FROM certs WHERE name = $1`, testDomain).Scan(&stored); err != nil {
		t.Fatalf("the certificate is not in the database: %v", err)
	}
	var accounts int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM certs WHERE name = 'acme_account+key'`).Scan(&accounts); err != nil || accounts != 1 {
		t.Errorf("ACME account keys in the database: %d, %v; want 1", accounts, err)
	}
	checkKeyNotLogged(t, stored, a.stderr.String()+b.stderr.String()+c.stderr.String())
}

// TestTLSCertFiles serves --tls-cert and --tls-key with HSTS, redirects
// --http-addr, and reads the files again on SIGHUP; a SIGHUP with broken
// files keeps the certificate served.
func TestTLSCertFiles(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	certPath, keyPath, keyPEM := ca.issue(t, dir, "herald", 10, testDomain)
	httpsPort := freePort(t)
	p := startProcessEnv(t, filepath.Join(dir, "herald.db"), "HERALD_ADDR=127.0.0.1:"+httpsPort,
		"HERALD_TLS_CERT="+certPath, "HERALD_TLS_KEY="+keyPath, "HERALD_HTTP_ADDR=127.0.0.1:0")
	roots := pool(t, ca.pem)
	if got := checkServesHTTPS(t, roots, testDomain, p.addr); got.Int64() != 10 {
		t.Errorf("serves certificate %v, want 10", got)
	}
	m := regexp.MustCompile(`http-addr=(\S+)`).FindStringSubmatch(p.stderr.String())
	if m == nil {
		t.Fatalf("no http-addr in the log:\n%s", p.stderr)
	}
	checkRedirects(t, m[1], "https://"+testDomain+":"+httpsPort)
	checkStreamOverTLS(t, roots, p.addr)

	// The renewed files, read on SIGHUP.
	_, _, keyPEM2 := ca.issue(t, dir, "herald", 11, testDomain)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, `msg="TLS certificate reloaded"`)
	if got := checkServesHTTPS(t, roots, testDomain, p.addr); got.Int64() != 11 {
		t.Errorf("after SIGHUP serves certificate %v, want 11", got)
	}

	// A key that does not match: the certificate served stays.
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, `msg="TLS certificate not reloaded`)
	if got := checkServesHTTPS(t, roots, testDomain, p.addr); got.Int64() != 11 {
		t.Errorf("after a failed reload serves certificate %v, want 11", got)
	}
	p.stopProcess(t)
	logs := p.stderr.String()
	for _, k := range [][]byte{keyPEM, keyPEM2} {
		checkKeyNotLogged(t, k, logs)
	}
}

// TestTLSFlags: the flags' refusals, each naming the flag and its
// variable; plain HTTP stays the default.
func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func TestTLSFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{nil, ""},
		{[]string{"--tls-domain", "herald.example.com"}, ""},
		{[]string{"--tls-domain", "a.example.com,b.example.com", "--acme-email", "ops@example.com"}, ""},
		{[]string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--http-addr", ":8081"}, ""},
		{[]string{"--tls-domain", "herald.example.com", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "--tls-cert (HERALD_TLS_CERT) cannot go with --tls-domain"},
		{[]string{"--tls-cert", "c.pem"}, "--tls-key (HERALD_TLS_KEY) and --tls-cert go together"},
		{[]string{"--tls-key", "k.pem"}, "--tls-key (HERALD_TLS_KEY) and --tls-cert go together"},
		{[]string{"--http-addr", ":80"}, "--http-addr (HERALD_HTTP_ADDR) needs --tls-domain or --tls-cert"},
		{[]string{"--tls-domain", "https://herald.example.com"}, "--tls-domain (HERALD_TLS_DOMAIN) has \"https://herald.example.com\""},
		{[]string{"--tls-domain", "herald.example.com:443"}, "--tls-domain (HERALD_TLS_DOMAIN) has"},
		{[]string{"--tls-domain", ","}, "--tls-domain (HERALD_TLS_DOMAIN) names no domain"},
		{[]string{"--tls-domain", "localhost"}, "--tls-domain (HERALD_TLS_DOMAIN) has \"localhost\""},
		{[]string{"--tls-domain", "192.0.2.1"}, "--tls-domain (HERALD_TLS_DOMAIN) has"},
		{[]string{"--tls-domain", "Herald.Example.com."}, ""},
		{[]string{"--tls-domain", "bücher.example"}, ""},
		{[]string{"--tls-domain", "*.example.com"}, "a wildcard: ACME CAs give wildcard certificates only through DNS-01"},
		{[]string{"--tls-domain", "herald.example.com,*.example.com"}, "wildcard"},
		{[]string{"--tls-domain", "a*b.example.com"}, "not a domain name"},
		{[]string{"--tls-domain", "[::1]"}, "not a domain name"},
		{[]string{"--tls-domain", "-bad-.example.com"}, "not a domain name"},
		{[]string{"--tls-domain", "xn--.example"}, "not a domain name"},
		{[]string{"--tls-domain", "herald.example.com", "--acme-directory", "http://ca.example.com/dir"}, "--acme-directory (HERALD_ACME_DIRECTORY) must be an https:// URL"},
		{[]string{"--tls-domain", "herald.example.com", "--acme-email", "ops"}, "--acme-email (HERALD_ACME_EMAIL) must be an e-mail address"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cfg, err := parseConfig(tc.args, environ(nil), io.Discard, io.Discard)
			if err == nil && len(tc.args) > 1 && tc.args[0] == "--tls-domain" {
				for _, d := range cfg.tlsDomains() {
					if d != strings.ToLower(d) || strings.HasSuffix(d, ".") || !isASCII(d) {
						t.Errorf("--tls-domain %s names %q, not the name TLS clients send", tc.args[1], d)
					}
				}
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.args == nil && (cfg.tlsEnabled() || cfg.addr != "127.0.0.1:8080") {
					t.Errorf("the default is not plain HTTP on 127.0.0.1:8080")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	cfg, err := parseConfig([]string{"--tls-domain", "herald.example.com"}, environ(nil), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.acmeDirectory != letsEncrypt {
		t.Errorf("--acme-directory defaults to %q, want Let's Encrypt's", cfg.acmeDirectory)
	}
}

// TestTLSCertFilesUnreadable: a start with certificate files it cannot
// read fails at once, naming them, and leaves no database behind.
func TestTLSCertFilesUnreadable(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "herald.db")
	in := start(t, []string{"--addr", "127.0.0.1:0", "--db", dbPath, "--tls-cert", filepath.Join(dir, "missing.crt"),
		"--tls-key", filepath.Join(dir, "missing.key")}, nil)
	if got, want := in.wait(t), 1; got != want {
		t.Errorf("a start with missing certificate files = %d, want %d", got, want)
	}
	if logs := in.stderr.String(); !strings.Contains(logs, filepath.Join(dir, "missing.crt")) {
		t.Errorf("the error does not name the files:\n%s", logs)
	}
	if _, err := os.Stat(dbPath); !os.IsNotExist(err) {
		t.Errorf("a failed start left %s behind (%v)", dbPath, err)
	}
}

// pemCert is a certificate (and a key before it, as autocert stores
// them) valid from notBefore to notAfter.
func pemCert(t *testing.T, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), DNSNames: []string{testDomain}, NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
}

// TestCertCacheOneOrder: reading a domain's certificate that is missing,
// or due for renewal, keeps the lock for the order that follows, so
// another reader waits until the certificate is stored, or until the
// order gives up; a certificate not due is read without the lock.
// Other values (the account, challenges) never wait.
func TestCertCacheOneOrder(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newCertCache(db, []string{testDomain})
	now := time.Now()
	c.now = func() time.Time { return now }
	bg := context.Background()
	blocked := func(name string) bool {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 100*time.Millisecond)
		defer cancel()
		_, err := c.Get(ctx, name)
		return errors.Is(err, context.DeadlineExceeded)
	}

	// Missing: the first reader orders; the second waits for its Put.
	order, cancelOrder := context.WithCancel(bg)
	if _, err := c.Get(order, testDomain); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Fatalf("Get of a missing certificate = %v, want ErrCacheMiss", err)
	}
	if !blocked(testDomain) || !blocked(testDomain+"+rsa") {
		t.Fatal("another reader went ahead while an order runs")
	}
	if blocked("acme_account+key") {
		t.Fatal("the account's key waited for the order, which reads it")
	}
	fresh := pemCert(t, now.Add(-time.Hour), now.Add(90*24*time.Hour))
	got := make(chan []byte, 1)
	go func() { data, _ := c.Get(bg, testDomain); got <- data }()
	if err := c.Put(order, testDomain, fresh); err != nil {
		t.Fatal(err)
	}
	select {
	case data := <-got:
		if !bytes.Equal(data, fresh) {
			t.Errorf("the waiting reader got %d bytes, want the stored certificate", len(data))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting reader still waits after the certificate was stored")
	}
	cancelOrder()

	// Not due: read without keeping the lock, and without waiting for
	// it while another holds it.
	if blocked(testDomain) {
		t.Fatal("a certificate not due kept the lock")
	}
	unlock, err := c.lock(bg)
	if err != nil {
		t.Fatal(err)
	}
	if blocked(testDomain) {
		t.Fatal("reading a certificate not due waited for the lock")
	}
	unlock()

	// Due (60 of 90 days gone): the reader keeps the lock until its order
	// gives up.
	now = now.Add(61 * 24 * time.Hour)
	renewal, giveUp := context.WithCancel(bg)
	if data, err := c.Get(renewal, testDomain); err != nil || !bytes.Equal(data, fresh) {
		t.Fatalf("Get of a certificate due = %d bytes, %v; want it", len(data), err)
	}
	if !blocked(testDomain) {
		t.Fatal("another reader went ahead while a renewal runs")
	}
	giveUp()
	deadline := time.Now().Add(10 * time.Second)
	for blocked(testDomain) {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held after the renewal gave up")
		}
	}
}

// TestACMERenewalOnPostgres: certificates valid for a minute, which
// autocert renews a third of their life before they end. Two instances
// on one database renew with one order between them, and both serve the
// renewed certificate.
func TestACMERenewalOnPostgres(t *testing.T) {
	url := postgresCluster(t).Database(t)
	httpsA, httpA := freePort(t), freePort(t)
	const validity = time.Minute
	pb := startPebbleValid(t, httpsA, httpA, validity)
	if !strings.Contains(pb.out.String(), "certificate validity period of 60 seconds") {
		t.Fatalf("pebble did not take the validity period; output:\n%s", pb.out)
	}
	a := startProcessEnv(t, url, pb.acmeEnv(t, httpsA, httpA)...)
	a.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	b := startProcessEnv(t, url, pb.acmeEnv(t, freePort(t), freePort(t))...)
	b.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	roots := pool(t, pb.roots(t))
	first := checkServesHTTPS(t, roots, testDomain, a.addr)
	if got := checkServesHTTPS(t, roots, testDomain, b.addr); got.Cmp(first) != 0 {
		t.Fatalf("the instances serve %v and %v, want one certificate", first, got)
	}
	// Renewed at two thirds of its life (less a jitter of up to a tenth
	// of the third): both instances serve a new certificate by then.
	deadline := time.Now().Add(validity)
	for {
		sa := checkServesHTTPS(t, roots, testDomain, a.addr)
		sb := checkServesHTTPS(t, roots, testDomain, b.addr)
		if sa.Cmp(first) != 0 && sb.Cmp(first) != 0 {
			if sa.Cmp(sb) != 0 {
				t.Errorf("after the renewal the instances serve %v and %v, want one certificate", sa, sb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within %v: the instances serve %v and %v; pebble:\n%s", validity, sa, sb, pb.out)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got, want := pb.orders(), 2; got != want {
		t.Errorf("pebble took %d orders, want %d: one, and one renewal for both instances", got, want)
	}
	a.stopProcess(t)
	b.stopProcess(t)
}

// TestHandshakeNoise: failed handshakes that only say a client had
// nothing to ask go to the debug log; a failure to obtain a certificate,
// and any other error of net/http's, stay warnings.
func TestHandshakeNoise(t *testing.T) {
	var warn, all bytes.Buffer
	h := handshakeNoise{warn: &warn, logger: slog.New(slog.NewTextHandler(&all, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, line := range []string{
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: missing server name\n",
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: host \"scan.example\" not configured in HostWhitelist\n",
		"http: TLS handshake error from 192.0.2.1:1234: tls: first record does not look like a TLS handshake\n",
		"http: TLS handshake error from 192.0.2.1:1234: EOF\n",
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: server name component count invalid\n",
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: server name contains invalid character\n",
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: no token cert for \"scan.example\"\n",
	} {
		if _, err := h.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if warn.Len() != 0 {
		t.Errorf("noise went to the warnings: %s", warn.String())
	}
	if got := strings.Count(all.String(), "level=DEBUG"); got != 7 {
		t.Errorf("%d debug lines, want 7:\n%s", got, all.String())
	}
	kept := []string{
		"http: TLS handshake error from 192.0.2.1:1234: acme/autocert: unable to satisfy \"https://ca/authz\" for domain \"herald.test\": no viable challenge type found\n",
		"http: Accept error: accept tcp: too many open files; retrying in 5ms\n",
	}
	for _, line := range kept {
		if _, err := h.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := warn.String(); got != strings.Join(kept, "") {
		t.Errorf("warnings = %q, want %q", got, strings.Join(kept, ""))
	}
}

// TestHTTPSRedirectTarget: where plain HTTP is sent, by Host header,
// --tls-domain's names, the HTTPS port and --public-url.
func TestHTTPSRedirectTarget(t *testing.T) {
	for _, tc := range []struct {
		h          httpsRedirect
		host, want string
	}{
		{httpsRedirect{port: "443"}, "herald.example.com", "https://herald.example.com/p?q=1"},
		{httpsRedirect{port: "443"}, "herald.example.com:80", "https://herald.example.com/p?q=1"},
		{httpsRedirect{port: "8443"}, "herald.example.com:8080", "https://herald.example.com:8443/p?q=1"},
		{httpsRedirect{port: "443"}, "[2001:db8::1]:80", "https://[2001:db8::1]/p?q=1"},
		{httpsRedirect{port: "443"}, "[2001:db8::1]", "https://[2001:db8::1]/p?q=1"},
		{httpsRedirect{port: "8443"}, "[2001:db8::1]", "https://[2001:db8::1]:8443/p?q=1"},
		{httpsRedirect{port: "443"}, "", ""},
		// With --tls-domain, only to a name the certificate is for.
		{httpsRedirect{port: "443", domains: []string{"herald.example.com", "www.example.com"}}, "WWW.example.com", "https://WWW.example.com/p?q=1"},
		{httpsRedirect{port: "443", domains: []string{"herald.example.com"}}, "elsewhere.example", "https://herald.example.com/p?q=1"},
		{httpsRedirect{port: "443", domains: []string{"herald.example.com"}}, "", "https://herald.example.com/p?q=1"},
		{httpsRedirect{port: "8443", base: "https://herald.example.com:4443"}, "other:80", "https://herald.example.com:4443/p?q=1"},
	} {
		r, _ := http.NewRequest(http.MethodGet, "http://x/p?q=1", nil)
		r.Host = tc.host
		if got := tc.h.target(r); got != tc.want {
			t.Errorf("%+v with Host %q redirects to %q, want %q", tc.h, tc.host, got, tc.want)
		}
	}
}

// TestACMEChallengeOnAnotherInstance: behind a balancer, the CA's
// challenge may reach an instance other than the one that ordered. Here
// pebble validates by HTTP-01 on instance a's plain-HTTP port only, and
// only b can reach pebble (a's CA is an address nothing answers): a
// answers b's challenge from the database.
func TestACMEChallengeOnAnotherInstance(t *testing.T) {
	url := postgresCluster(t).Database(t)
	httpsA, httpA := freePort(t), freePort(t)
	pb := startPebble(t, freePort(t), httpA)
	envA := pb.acmeEnv(t, httpsA, httpA)
	envA = append(envA, "HERALD_ACME_DIRECTORY=https://127.0.0.1:"+freePort(t)+"/dir")
	a := startProcessEnv(t, url, envA...)
	a.waitLogWithin(t, `msg="no TLS certificate yet;`, acmeTimeout)
	b := startProcessEnv(t, url, pb.acmeEnv(t, freePort(t), freePort(t))...)
	b.waitLogWithin(t, `msg="TLS certificate ready" domain=`+testDomain, acmeTimeout)
	// (a serves the certificate too, but only once autocert has let its
	// own failed order go, a minute later: not waited for here.)
	checkServesHTTPS(t, pool(t, pb.roots(t)), testDomain, b.addr)
	if got, want := len(certSerialRE.FindAllString(pb.out.String(), -1)), 1; got != want {
		t.Errorf("pebble issued %d certificates, want %d", got, want)
	}
	a.stopProcess(t)
	b.stopProcess(t)
}

// checkStreamOverTLS registers an account over TLS and opens its live
// stream, which takes its connection over from net/http: the stream's
// first lines and a message created meanwhile arrive through TLS.
func checkStreamOverTLS(t *testing.T, roots *x509.CertPool, addr string) {
	t.Helper()
	c := httpsClient(roots, testDomain, addr)
	c.Timeout = 0 // the stream stays open; its reads are bounded below
	base := "https://" + testDomain
	var reg tokenResponse
	resp, err := c.Post(base+"/api/register", "application/json", strings.NewReader(`{"email":"tls@example.com","password":"a long passphrase"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(resp.Body).Decode(&reg); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register over TLS = %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/messages/stream", nil)
	req.Header.Set("Authorization", "Bearer "+reg.Token)
	stream, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("stream over TLS = %d, HSTS %q", stream.StatusCode, stream.Header.Get("Strict-Transport-Security"))
	}
	req, _ = http.NewRequest(http.MethodPost, base+"/api/messages", strings.NewReader(`{"content":"over tls"}`))
	req.Header.Set("Authorization", "Bearer "+reg.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create over TLS = %d", resp.StatusCode)
	}
	var got []byte
	buf := make([]byte, 4096)
	for !bytes.Contains(got, []byte("over tls")) {
		n, err := stream.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("the stream over TLS ended before the message: %v; read %q", err, got)
		}
	}
}

// TestCertCacheTokenOfAnotherDomain: a TLS-ALPN-01 answer asked for a
// domain not served is a miss without a read of the store, whatever the
// store holds under that name; one for a served domain is read.
func TestCertCacheTokenOfAnotherDomain(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, name := range []string{"scan.example+token", testDomain + "+token"} {
		if err := db.PutCert(ctx, name, []byte("answer")); err != nil {
			t.Fatal(err)
		}
	}
	c := newCertCache(db, []string{testDomain})
	if _, err := c.Get(ctx, "scan.example+token"); !errors.Is(err, autocert.ErrCacheMiss) {
		t.Errorf("Get of another domain's token = %v, want ErrCacheMiss", err)
	}
	if got, err := c.Get(ctx, testDomain+"+token"); err != nil || string(got) != "answer" {
		t.Errorf("Get of the served domain's token = %q, %v", got, err)
	}
}
