package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/bolt"
	"herald/model"
)

// These tests reach inside the server to add routes that fail on purpose:
// no real endpoint panics or returns an unrecognised error on demand.

// internalLog is a log sink safe for the server's concurrent writes.
type internalLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *internalLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *internalLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// newInternalServer builds a Server over a fresh bbolt file, logging to the
// returned sink.
func newInternalServer(t testing.TB) (*Server, *internalLog) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	hasher := auth.NewHasher(auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, 1)
	logs := &internalLog{}
	s := NewServer(db, hasher, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	return s, logs
}

// internalUser creates an account on s's store directly, without the
// cost of hashing a password, and returns it with a token that works.
func internalUser(t testing.TB, s *Server, email string) (*model.User, string) {
	t.Helper()
	token, hash, err := auth.MintToken()
	if err != nil {
		t.Fatal(err)
	}
	u := &model.User{Email: email, PasswordHash: "unused"}
	if _, err := s.store.CreateUser(context.Background(), u, model.TokenHash(hash), DefaultTokenTTL, nil); err != nil {
		t.Fatal(err)
	}
	return u, token
}

// serveInternal starts s and GETs path, returning status, headers and body.
func serveInternal(t *testing.T, s *Server, path string) (int, http.Header, []byte) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, body
}

// assertBare500 checks for a 500 problem document that says only "Internal
// error" and none of secrets.
func assertBare500(t *testing.T, status int, header http.Header, body []byte, secrets ...string) {
	t.Helper()
	if got, want := status, http.StatusInternalServerError; got != want {
		t.Fatalf("status = %d, want %d: %s", got, want, body)
	}
	if got, want := header.Get("Content-Type"), problemContentType; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	var p map[string]any
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	want := map[string]any{
		"type":   "about:blank",
		"title":  "Internal Server Error",
		"status": float64(500),
		"detail": "Internal error",
	}
	if !maps.Equal(p, want) {
		t.Errorf("problem = %v, want exactly %v", p, want)
	}
	for _, s := range secrets {
		if bytes.Contains(body, []byte(s)) {
			t.Errorf("body leaks %q: %s", s, body)
		}
		for k, vs := range header {
			if slices.ContainsFunc(vs, func(v string) bool { return strings.Contains(v, s) }) {
				t.Errorf("header %s leaks %q", k, s)
			}
		}
	}
}

func TestPanicBecomesBare500(t *testing.T) {
	const secret = "s3cr3t-db-password-hunter2"
	cases := []struct {
		name        string
		panics      func()
		logsSecret  bool // the panic value itself carries the secret
		logsMessage string
	}{
		{"string", func() { panic("connecting with " + secret) }, true, "connecting with"},
		{"error", func() { panic(fmt.Errorf("open /var/lib/herald: %s", secret)) }, true, "open /var/lib/herald"},
		{"runtime error", func() {
			var p *struct{ s string }
			_ = p.s + secret // nil pointer dereference
		}, false, "nil pointer dereference"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := newInternalServer(t)
			s.router.GET("/test/panic", func(http.ResponseWriter, *http.Request, httprouter.Params) { tc.panics() })
			status, header, body := serveInternal(t, s, "/test/panic")
			assertBare500(t, status, header, body, secret, tc.logsMessage, "goroutine", ".go:")
			if got := header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
			log := logs.String()
			for _, want := range []string{"level=ERROR", "msg=panic", "/test/panic", tc.logsMessage, "stack="} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
			if got := strings.Contains(log, secret); got != tc.logsSecret {
				t.Errorf("log contains the panic value's secret: %v, want %v:\n%s", got, tc.logsSecret, log)
			}
		})
	}
}

// A panic does not take the server down: the next request is served.
func TestPanicServerKeepsServing(t *testing.T) {
	s, _ := newInternalServer(t)
	s.router.GET("/test/panic", func(http.ResponseWriter, *http.Request, httprouter.Params) { panic("boom") })
	srv := httptest.NewServer(s)
	defer srv.Close()
	for range 3 {
		res, err := http.Get(srv.URL + "/test/panic")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got, want := res.StatusCode, http.StatusInternalServerError; got != want {
			t.Errorf("panic route: status %d, want %d", got, want)
		}
	}
	res, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got, want := res.StatusCode, http.StatusOK; got != want {
		t.Errorf("healthz after panics: status %d, want %d", got, want)
	}
}

// An error a handler returns that problemFor does not recognise is a bare
// 500; its text goes to the log only.
func TestUnrecognisedErrorBecomesBare500(t *testing.T) {
	const secret = "/var/lib/herald/herald.db: page 42 checksum mismatch"
	cases := []struct {
		name string
		err  error
	}{
		{"plain", errors.New(secret)},
		{"wrapped", fmt.Errorf("search: %w", errors.New(secret))},
		{"wrapped system error", fmt.Errorf("%s: %w", secret, os.ErrPermission)},
		{"joined", errors.Join(errors.New(secret), io.ErrUnexpectedEOF)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, logs := newInternalServer(t)
			fail := func(http.ResponseWriter, *http.Request, httprouter.Params) error { return tc.err }
			s.router.Handle(http.MethodGet, "/test/fail", s.wrap(route{http.MethodGet, "/test/fail", public, fail}))
			status, header, body := serveInternal(t, s, "/test/fail")
			assertBare500(t, status, header, body, secret, "checksum", "herald.db")
			log := logs.String()
			for _, want := range []string{"level=ERROR", "internal error", "/test/fail", "checksum mismatch"} {
				if !strings.Contains(log, want) {
					t.Errorf("log lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

// The same holds on an authenticated route once the caller is through.
func TestUnrecognisedErrorAuthenticatedRoute(t *testing.T) {
	const secret = "bucket messages: internal inconsistency"
	s, logs := newInternalServer(t)
	fail := func(http.ResponseWriter, *http.Request, httprouter.Params) error {
		return fmt.Errorf("tx: %s", secret)
	}
	s.router.Handle(http.MethodGet, "/test/fail", s.wrap(route{http.MethodGet, "/test/fail", authenticated, fail}))
	_, token := internalUser(t, s, "ada@example.com")
	srv := httptest.NewServer(s)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/test/fail", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	assertBare500(t, res.StatusCode, res.Header, body, secret, token)
	if !strings.Contains(logs.String(), secret) {
		t.Errorf("log lacks the error:\n%s", logs.String())
	}
}
