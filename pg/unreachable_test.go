package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/model"
	"herald/pg"
)

// outageProxy passes PostgreSQL connections on between a Unix socket of
// its own and the server's, and can play the server going away: every
// connection cut, every new one refused, until it comes back.
type outageProxy struct {
	dir, target string
	mu          sync.Mutex
	down        bool
	conns       map[net.Conn]struct{}
}

func startOutageProxy(t *testing.T, target string) *outageProxy {
	t.Helper()
	p := &outageProxy{dir: t.TempDir(), target: target, conns: map[net.Conn]struct{}{}}
	listenAsPostgres(t, p.dir, p.serve)
	t.Cleanup(func() { p.setDown(true) })
	return p
}

func (p *outageProxy) serve(client net.Conn) {
	server, err := net.Dial("unix", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		client.Close()
		server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(server, client); server.Close() }()
	_, _ = io.Copy(client, server)
	client.Close()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

func (p *outageProxy) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}

// TestDatabaseUnreachableIs503: while PostgreSQL cannot be reached, every
// request that needs it is answered 503 with Retry-After and a problem
// saying so, not 500: a condition of the moment, which a client or a
// balancer may retry; once it is back, requests succeed again without a
// restart.
func TestDatabaseUnreachableIs503(t *testing.T) {
	cluster.Require(t)
	socket, at := serverSocket(t, cluster.Database(t))
	proxy := startOutageProxy(t, socket)
	db := openURL(t, at(proxy.dir), pg.Options{PoolSize: 4, PollEvery: 50 * time.Millisecond})
	hasher := auth.NewHasher(auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, 2)
	handler := heraldhttp.NewServer(db, hasher, heraldhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(handler)
	t.Cleanup(func() { handler.CloseStreams(); srv.Close() })

	send := func(method, path, token, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := send("POST", "/api/register", "", `{"email":"ada@example.com","password":"correct horse battery"}`)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d %s", res.StatusCode, body)
	}
	var reg struct{ Token string }
	if err := json.Unmarshal([]byte(body), &reg); err != nil || reg.Token == "" {
		t.Fatalf("register: %s, %v", body, err)
	}
	if res, body := send("POST", "/api/messages", reg.Token, `{"content":"hello"}`); res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d %s", res.StatusCode, body)
	}

	proxy.setDown(true)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/api/messages", ""},
		{"GET", "/api/messages?q=hello", ""},
		{"GET", "/api/messages/1", ""},
		{"GET", "/api/me", ""},
		{"POST", "/api/messages", `{"content":"while it is down"}`},
		{"PATCH", "/api/messages/1", `{"content":"edited while it is down"}`},
		{"DELETE", "/api/messages/1", ""},
		{"POST", "/api/register", `{"email":"bob@example.com","password":"correct horse battery"}`},
		{"POST", "/api/login", `{"username":"ada@example.com","password":"correct horse battery"}`},
	} {
		res, body := send(r.method, r.path, reg.Token, r.body)
		var p struct {
			Status int
			Detail string
		}
		_ = json.Unmarshal([]byte(body), &p)
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
			res.Header.Get("Content-Type") != "application/problem+json" || p.Detail != "the database cannot be reached now; try again shortly" {
			t.Errorf("%s %s with PostgreSQL out of reach = %d (Retry-After %q, %s) %s; want 503 with Retry-After saying the database cannot be reached",
				r.method, r.path, res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Content-Type"), body)
		}
	}
	if res, body := send("GET", "/healthz", "", ""); res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("/healthz with PostgreSQL out of reach = %d (Retry-After %q) %s, want 503 with Retry-After",
			res.StatusCode, res.Header.Get("Retry-After"), body)
	}

	proxy.setDown(false)
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, body := send("GET", "/api/messages/1", reg.Token, "")
		if res.StatusCode == http.StatusOK && strings.Contains(body, `"hello"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL back for 10 s, and GET /api/messages/1 = %d %s", res.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res, body := send("POST", "/api/messages", reg.Token, `{"content":"after"}`); res.StatusCode != http.StatusCreated {
		t.Errorf("create after PostgreSQL came back: %d %s", res.StatusCode, body)
	}
}

// TestConnectTimeout: a server that takes connections and never answers,
// as a machine whose packets are dropped looks once the connect timeout is
// all that is left, fails Open within the connect timeout, the default's
// included, rather than holding it for ever; and the error counts as the
// database out of reach.
func TestConnectTimeout(t *testing.T) {
	dir := t.TempDir()
	listenAsPostgres(t, dir, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c)
		c.Close()
	})
	url := "postgres:///herald?user=herald&host=" + dir
	// within is far above each bound, and for the first two far below
	// the default, which must not replace them.
	for _, tt := range []struct {
		name, url string
		opts      pg.Options
		within    time.Duration
	}{
		{"Options.ConnectTimeout", url, pg.Options{ConnectTimeout: 200 * time.Millisecond}, 5 * time.Second},
		{"the URL's connect_timeout", url + "&connect_timeout=1", pg.Options{}, 5 * time.Second},
		{"DefaultConnectTimeout", url, pg.Options{}, pg.DefaultConnectTimeout + 20*time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan error, 1)
			go func() {
				db, err := pg.Open(context.Background(), tt.url, tt.opts)
				if err == nil {
					db.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Open against a server that never answers succeeded")
				}
				if !errors.Is(pg.Classify(err), model.ErrUnavailable) {
					t.Errorf("Open's error %q is not taken for the database out of reach", err)
				}
			case <-time.After(tt.within):
				t.Fatalf("Open against a server that never answers is still waiting after %v", tt.within)
			}
		})
	}
}

// TestConnectRefusedIsUnreachable: a server that refuses the connection,
// as PostgreSQL does a wrong password once the instances' password has
// been changed, is the database out of reach too, though its refusal is
// an error of PostgreSQL's own, with a code outside those of an outage.
func TestConnectRefusedIsUnreachable(t *testing.T) {
	dir := t.TempDir()
	listenAsPostgres(t, dir, func(c net.Conn) {
		defer c.Close()
		server := pgproto3.NewBackend(c, c)
		if _, err := server.ReceiveStartupMessage(); err != nil {
			return
		}
		server.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01",
			Message: `password authentication failed for user "herald"`})
		_ = server.Flush()
	})
	db, err := pg.Open(context.Background(), "postgres:///herald?user=herald&sslmode=disable&host="+dir, pg.Options{})
	if err == nil {
		db.Close()
		t.Fatal("Open against a server that refuses the login succeeded")
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "28P01" {
		t.Fatalf("Open's error %q does not hold the server's refusal", err)
	}
	if !errors.Is(pg.Classify(err), model.ErrUnavailable) {
		t.Errorf("Open's error %q is not taken for the database out of reach", err)
	}
}
