package pg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/auth"
	heraldhttp "herald/http"
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
