// Package mailtest runs a real mail server on loopback for tests: Debian's
// aiosmtpd (python3-aiosmtpd), driven by smtpd.py beside this file. Tests
// that need one are skipped, saying why, when it is not installed, unless
// HERALD_REQUIRE_SMTP=1 (as .ci/run sets), which fails them instead.
package mailtest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Options shape the server.
type Options struct {
	// TLS offers STARTTLS, and requires it, with a certificate for
	// 127.0.0.1 that Server.TLS trusts.
	TLS bool
	// User and Password, when set, are required with AUTH.
	User, Password string
	// Fail answers the first Fail messages 451 (try again later).
	Fail int
	// Reject answers every message 550 (refused for good).
	Reject bool
}

// Server is a running mail server.
type Server struct {
	Port int
	// TLS trusts the server's certificate (nil without Options.TLS).
	TLS *tls.Config
	dir string
}

// Received is a message the server accepted.
type Received struct {
	From string
	To   []string
	// TLS tells whether it came over TLS; User, as whom it logged in.
	TLS  bool
	User string
	// Raw is the message as sent; Message, parsed.
	Raw     []byte
	Message *mail.Message
}

// python returns a Python that has aiosmtpd, or "".
func python() string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import aiosmtpd").Run() == nil {
			return p
		}
	}
	return ""
}

// Start runs a mail server until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	py := python()
	if py == "" {
		if os.Getenv("HERALD_REQUIRE_SMTP") == "1" {
			t.Fatal("no Python with aiosmtpd (Debian: apt-get install python3-aiosmtpd), and HERALD_REQUIRE_SMTP=1")
		}
		t.Skip("no Python with aiosmtpd: apt-get install python3-aiosmtpd to run this test")
	}
	_, here, _, _ := runtime.Caller(0)
	s := &Server{dir: t.TempDir()}
	args := []string{filepath.Join(filepath.Dir(here), "smtpd.py"), "--dir", s.dir}
	if opts.TLS {
		cert, key, pool := certificate(t)
		args = append(args, "--cert", cert, "--key", key)
		s.TLS = &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	}
	if opts.User != "" {
		args = append(args, "--user", opts.User, "--password", opts.Password)
	}
	if opts.Fail > 0 {
		args = append(args, "--fail", strconv.Itoa(opts.Fail))
	}
	if opts.Reject {
		args = append(args, "--reject")
	}
	cmd := exec.Command(py, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the mail server did not start: %v", err)
	}
	if s.Port, err = strconv.Atoi(strings.TrimSpace(line)); err != nil {
		t.Fatalf("the mail server said %q, not its port", line)
	}
	return s
}

// Messages returns what the server accepted so far, in order.
func (s *Server) Messages(t testing.TB) []Received {
	t.Helper()
	var out []Received
	for n := 1; ; n++ {
		base := filepath.Join(s.dir, strconv.Itoa(n))
		raw, err := os.ReadFile(base + ".eml")
		if os.IsNotExist(err) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		meta, err := os.ReadFile(base + ".json")
		if err != nil {
			t.Fatal(err)
		}
		var r Received
		var m struct {
			From string   `json:"from"`
			To   []string `json:"to"`
			TLS  bool     `json:"tls"`
			User *string  `json:"user"`
		}
		if err := json.Unmarshal(meta, &m); err != nil {
			t.Fatal(err)
		}
		r.From, r.To, r.TLS, r.Raw = m.From, m.To, m.TLS, raw
		if m.User != nil {
			r.User = *m.User
		}
		if r.Message, err = mail.ReadMessage(strings.NewReader(string(raw))); err != nil {
			t.Fatalf("message %d does not parse: %v", n, err)
		}
		out = append(out, r)
	}
}

// Wait waits up to timeout for at least n messages and returns them all.
func (s *Server) Wait(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := s.Messages(t)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mail server received %d messages in %v, want %d", len(got), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// certificate writes a self-signed certificate for 127.0.0.1 and its key
// into a temporary directory, and returns their files and a pool that
// trusts it.
func certificate(t testing.TB) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "mail.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(certFile, "CERTIFICATE", der)
	write(keyFile, "EC PRIVATE KEY", keyDER)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// Parts returns r's plain-text and HTML bodies, decoded: r is the
// multipart/alternative message Herald sends.
func (r Received) Parts(t testing.TB) (text, html string) {
	t.Helper()
	mediaType, params, err := mime.ParseMediaType(r.Message.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/alternative" {
		t.Fatalf("Content-Type %q (%v), want multipart/alternative", r.Message.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(r.Message.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return text, html
		}
		if err != nil {
			t.Fatal(err)
		}
		// multipart's reader decodes quoted-printable itself.
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		switch ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type")); ct {
		case "text/plain":
			text = string(b)
		case "text/html":
			html = string(b)
		}
	}
}

// String describes r for a failing test.
func (r Received) String() string {
	return fmt.Sprintf("from %s to %v (tls %v, user %q):\n%s", r.From, r.To, r.TLS, r.User, r.Raw)
}
