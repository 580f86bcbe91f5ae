package pg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/model"
	"herald/pg"
)

// The tests here fail PostgreSQL under requests as it fails in
// production: a backend killed (kill -9, as the OOM killer does), the
// whole server paused (SIGSTOP, as a machine that hangs looks from
// outside), writes piling up behind a lock. Each waits for what it needs
// by asking PostgreSQL (pg_stat_activity), never by sleeping.

// rig is an HTTP server over a PostgreSQL store holding an account and
// its message 1, "hello".
type rig struct {
	t      *testing.T
	url    string
	db     *pg.DB
	srv    *httptest.Server
	token  string
	client *http.Client
}

func newRig(t *testing.T, url string, opts pg.Options) *rig {
	t.Helper()
	db := openURL(t, url, opts)
	hasher := auth.NewHasher(auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, 2)
	handler := heraldhttp.NewServer(db, hasher, heraldhttp.Config{Logger: slog.New(slog.DiscardHandler)})
	srv := httptest.NewServer(handler)
	t.Cleanup(func() { handler.CloseStreams(); srv.Close() })
	// Far above any deadline of Herald's: a request still waiting then
	// hangs with the database.
	r := &rig{t: t, url: url, db: db, srv: srv, client: &http.Client{Timeout: 20 * time.Second}}
	a := r.send("POST", "/api/register", `{"email":"ada@example.com","password":"correct horse battery"}`)
	var reg struct{ Token string }
	if a.status != http.StatusCreated || json.Unmarshal([]byte(a.body), &reg) != nil || reg.Token == "" {
		t.Fatalf("register: %d %s %v", a.status, a.body, a.err)
	}
	r.token = reg.Token
	if a := r.send("POST", "/api/messages", `{"content":"hello"}`); a.status != http.StatusCreated {
		t.Fatalf("create: %d %s %v", a.status, a.body, a.err)
	}
	return r
}

// answer is what a request got.
type answer struct {
	status  int
	header  http.Header
	body    string
	problem struct {
		Type, Title, Detail string
		Status              int
	}
	took time.Duration
	err  error
}

// send makes a request with the account's token; it may run on any
// goroutine.
func (r *rig) send(method, path, body string) answer {
	req, err := http.NewRequest(method, r.srv.URL+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	start := time.Now()
	res, err := r.client.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: res.Header, body: string(b), took: time.Since(start), err: err}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/problem+json") {
		_ = json.Unmarshal(b, &a.problem)
	}
	return a
}

// sendAsync is send on a goroutine of its own.
func (r *rig) sendAsync(method, path, body string) <-chan answer {
	out := make(chan answer, 1)
	go func() { out <- r.send(method, path, body) }()
	return out
}

// eventually sends a request until it is answered want, within a minute:
// after a restart, the pool's connections are found dead one by one.
func (r *rig) eventually(method, path, body string, want int) answer {
	r.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		a := r.send(method, path, body)
		if a.status == want {
			return a
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s %s = %d %s %v for a minute, want %d", method, path, a.status, a.body, a.err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lock opens a connection of its own to the rig's database and runs
// statements in a transaction it leaves open, holding their locks.
func (r *rig) lock(statements ...string) *pgx.Conn {
	r.t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	for _, sql := range append([]string{"BEGIN"}, statements...) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			r.t.Fatalf("%s: %v", sql, err)
		}
	}
	return conn
}

// watcher opens a connection of its own to the rig's database, outside
// any transaction, to look at pg_stat_activity with: in a transaction,
// PostgreSQL answers from the snapshot of the statistics it took first.
func (r *rig) watcher() *pgx.Conn {
	r.t.Helper()
	conn, err := pgx.Connect(context.Background(), r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// lockWaiters returns the process IDs of the backends of conn's database
// waiting for a lock, whose statement is like pattern (SQL's LIKE).
func lockWaiters(t *testing.T, conn *pgx.Conn, pattern string) []int {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1 ORDER BY pid`, pattern)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitForLockWaiters polls until n backends wait for a lock with a
// statement like pattern, and returns their process IDs.
func waitForLockWaiters(t *testing.T, conn *pgx.Conn, pattern string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := lockWaiters(t, conn, pattern)
		if len(pids) == n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends wait for a lock with a statement like %q after 30 s, want %d", len(pids), pattern, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill kills a PostgreSQL process as the OOM killer does: the server then
// ends every other backend and restarts them (a crash restart).
func kill(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d: %v", pid, err)
	}
}

// wantUnavailable checks a 503 saying the database is out of reach or not
// answering: a problem of type about:blank, with Retry-After.
func (a answer) wantUnavailable(t *testing.T, what string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || a.problem.Type != "about:blank" ||
		a.problem.Status != http.StatusServiceUnavailable || !strings.Contains(a.problem.Detail, "the database") {
		t.Errorf("%s = %d (Retry-After %q) %s %v; want 503 with Retry-After, a problem saying the database cannot serve",
			what, a.status, a.header.Get("Retry-After"), a.body, a.err)
	}
}

// wantOutcomeUnknown checks a 503 whose problem says the write may or may
// not have been done.
func (a answer) wantOutcomeUnknown(t *testing.T, what string) {
	t.Helper()
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" ||
		a.problem.Type != "/api/docs#outcome-unknown" || a.problem.Title != "Write Outcome Unknown" ||
		!strings.Contains(a.problem.Detail, "may or may not have been done") {
		t.Errorf("%s = %d (Retry-After %q) %s %v; want 503 with Retry-After and the problem of a write whose outcome is unknown",
			what, a.status, a.header.Get("Retry-After"), a.body, a.err)
	}
}

// TestKilledUnderAWaitingEdit: the backend serving an edit that waits for
// a row lock another transaction holds is killed. The edit's COMMIT had
// not been sent, and PostgreSQL never commits a transaction without it,
// so nothing was written: the answer is the database out of reach, 503
// with Retry-After, not 500. After the server's restart the message is
// as it was, and edits work again.
func TestKilledUnderAWaitingEdit(t *testing.T) {
	c := faultCluster(t)
	r := newRig(t, c.Database(t), pg.Options{})
	r.lock("SELECT 1 FROM messages WHERE id = 1 FOR UPDATE")
	edit := r.sendAsync("PATCH", "/api/messages/1", `{"content":"edited"}`)
	pids := waitForLockWaiters(t, r.watcher(), "%FOR UPDATE OF m%", 1)
	kill(t, pids[0])
	(<-edit).wantUnavailable(t, "PATCH whose backend was killed while it waited for a lock")

	c.WaitReady(t)
	if a := r.eventually("GET", "/api/messages/1", "", http.StatusOK); !strings.Contains(a.body, `"hello"`) {
		t.Errorf("after the restart, message 1 = %s, want it unedited", a.body)
	}
	if a := r.send("PATCH", "/api/messages/1", `{"content":"edited"}`); a.status != http.StatusOK {
		t.Errorf("PATCH after the restart = %d %s %v", a.status, a.body, a.err)
	}
}

// TestKilledUnderARead: the backend serving a read, waiting for a lock on
// the messages, is killed: 503 with Retry-After, not 500.
func TestKilledUnderARead(t *testing.T) {
	c := faultCluster(t)
	r := newRig(t, c.Database(t), pg.Options{})
	r.lock("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
	read := r.sendAsync("GET", "/api/messages/1", "")
	pids := waitForLockWaiters(t, r.watcher(), "%FROM messages%", 1)
	kill(t, pids[0])
	(<-read).wantUnavailable(t, "GET whose backend was killed")

	c.WaitReady(t)
	r.eventually("GET", "/api/messages/1", "", http.StatusOK)
}

// TestKilledUnderAWaitingCreate: the backend serving a create, whose one
// statement commits by itself and was sent, is killed while it waits for
// the change counter's lock. From the client's side the create may have
// committed with its answer lost, so the answer is the problem of a write
// whose outcome is unknown, not the 503 that invites a blind retry. (It
// did not commit here: it was killed waiting.)
func TestKilledUnderAWaitingCreate(t *testing.T) {
	c := faultCluster(t)
	r := newRig(t, c.Database(t), pg.Options{})
	r.lock("UPDATE change_counter SET seq = seq")
	create := r.sendAsync("POST", "/api/messages", `{"content":"in doubt"}`)
	pids := waitForLockWaiters(t, r.watcher(), "%INSERT INTO messages%", 1)
	kill(t, pids[0])
	(<-create).wantOutcomeUnknown(t, "POST whose backend was killed after its statement was sent")

	c.WaitReady(t)
	a := r.eventually("GET", "/api/messages", "", http.StatusOK)
	var page struct{ Items []struct{ Content string } }
	if err := json.Unmarshal([]byte(a.body), &page); err != nil || len(page.Items) != 1 || page.Items[0].Content != "hello" {
		t.Errorf("after the restart the messages are %s (%v), want hello alone", a.body, err)
	}
	if a := r.send("POST", "/api/messages", `{"content":"after"}`); a.status != http.StatusCreated {
		t.Errorf("POST after the restart = %d %s %v", a.status, a.body, a.err)
	}
}

// TestPausedDatabase: with the whole server paused (SIGSTOP), /healthz
// answers 503 within 2 seconds, saying the database is not answering;
// every request answers 503 with Retry-After by its deadline, the one
// that had sent a create's statement saying its outcome is unknown; and
// once the server goes on (SIGCONT), everything works again and nothing
// acknowledged is lost.
func TestPausedDatabase(t *testing.T) {
	c := faultCluster(t)
	const timeout = 2 * time.Second
	r := newRig(t, c.Database(t), pg.Options{Timeout: timeout, PoolSize: 8})
	// An edit and a create in flight when the server stops: one waiting
	// before its COMMIT, one after its statement went.
	lock := r.lock("SELECT 1 FROM messages WHERE id = 1 FOR UPDATE", "UPDATE change_counter SET seq = seq")
	edit := r.sendAsync("PATCH", "/api/messages/1", `{"content":"edited"}`)
	create := r.sendAsync("POST", "/api/messages", `{"content":"in doubt"}`)
	waitForLockWaiters(t, r.watcher(), "%", 2)

	resume := c.Pause(t)
	health := r.send("GET", "/healthz", "")
	if health.status != http.StatusServiceUnavailable || health.header.Get("Retry-After") == "" ||
		health.problem.Detail != "the database is not answering" {
		t.Errorf("/healthz with PostgreSQL paused = %d (Retry-After %q) %s %v; want 503 with Retry-After saying the database is not answering",
			health.status, health.header.Get("Retry-After"), health.body, health.err)
	}
	if health.took >= 2*time.Second {
		t.Errorf("/healthz with PostgreSQL paused answered after %v, want within 2 s", health.took)
	}
	read := r.sendAsync("GET", "/api/messages/1", "")
	search := r.sendAsync("GET", "/api/messages?q=hello", "")
	(<-read).wantUnavailable(t, "GET with PostgreSQL paused")
	(<-search).wantUnavailable(t, "a search with PostgreSQL paused")
	(<-edit).wantUnavailable(t, "PATCH waiting for a lock when PostgreSQL was paused")
	(<-create).wantOutcomeUnknown(t, "POST sent when PostgreSQL was paused")
	resume()

	// The transaction holding the locks ends; the create's backend may
	// then commit, or have been cancelled: its outcome is unknown.
	if err := lock.Close(context.Background()); err != nil {
		t.Error(err)
	}
	r.eventually("GET", "/healthz", "", http.StatusOK)
	if a := r.eventually("GET", "/api/messages/1", "", http.StatusOK); !strings.Contains(a.body, `"hello"`) {
		t.Errorf("after PostgreSQL went on, message 1 = %s, want it unedited", a.body)
	}
	if a := r.send("POST", "/api/messages", `{"content":"after"}`); a.status != http.StatusCreated {
		t.Errorf("POST after PostgreSQL went on = %d %s %v", a.status, a.body, a.err)
	}
	a := r.send("GET", "/api/messages", "")
	if !strings.Contains(a.body, `"hello"`) || !strings.Contains(a.body, `"after"`) {
		t.Errorf("after PostgreSQL went on, the messages are %s, want hello and after among them", a.body)
	}
}

// TestWritesLeaveRoomForReads: with every write transaction waiting for
// a lock, and more waiting for a turn, the writes hold at most their share
// of the pool: reads and /healthz still get connections and answer; once
// the lock is released every write goes through.
func TestWritesLeaveRoomForReads(t *testing.T) {
	cluster.Require(t)
	r := newRig(t, cluster.Database(t), pg.Options{PoolSize: 8})
	lock := r.lock("SELECT 1 FROM messages WHERE id = 1 FOR UPDATE")
	watch := r.watcher()
	const edits = 16
	turns := r.db.WriteTurns()
	if turns >= 8 {
		t.Fatalf("writes may take %d of a pool of 8", turns)
	}
	answers := make([]<-chan answer, edits)
	for i := range answers {
		answers[i] = r.sendAsync("PATCH", "/api/messages/1", fmt.Sprintf(`{"content":"edit %d"}`, i))
	}
	// Those with a turn wait for a lock (the message's, or the token's
	// behind the first), the others for a turn.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		waiting, queued := len(lockWaiters(t, watch, "%")), r.db.WritesWaiting()
		if waiting == turns && queued == edits-turns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, %d writes wait for a lock and %d for a turn, want %d and %d", waiting, queued, turns, edits-turns)
		}
	}
	for _, path := range []string{"/api/messages/1", "/api/messages", "/api/messages?q=hello", "/api/me", "/healthz"} {
		if a := r.send("GET", path, ""); a.status != http.StatusOK {
			t.Errorf("GET %s with %d writes waiting for a lock = %d %s %v, want 200", path, edits, a.status, a.body, a.err)
		}
	}
	if _, err := lock.Exec(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a := <-a; a.status != http.StatusOK {
			t.Errorf("edit %d after the lock was released = %d %s %v", i, a.status, a.body, a.err)
		}
	}
}

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
