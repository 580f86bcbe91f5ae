package http_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/pg/pgtest"
)

// smallFilesystem mounts a tmpfs of size bytes in a temp dir and returns
// its path; it is unmounted when the test ends. Mounting needs root: the
// test is skipped without it, unless HERALD_REQUIRE_MOUNT=1 (.ci/run,
// which runs as root, sets it) makes that a failure.
func smallFilesystem(t *testing.T, size int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("HERALD_REQUIRE_MOUNT") == "1" {
			t.Fatalf("mounting a %d-byte tmpfs: %v: %s", size, err, out)
		}
		t.Skipf("cannot mount a tmpfs here (%v: %s); HERALD_REQUIRE_MOUNT=1 makes this a failure", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// placeOnFilesystem makes the PostgreSQL database the tests open for
// path keep its tables and indexes in dir: a tablespace there, the
// database's default for the tables Herald creates when it opens.
func placeOnFilesystem(t *testing.T, path, dir string) {
	t.Helper()
	cluster := apitest.PostgresCluster(t)
	space := filepath.Join(dir, "pg")
	if err := os.Mkdir(space, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// The server runs as postgres and must own its tablespace.
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir, space} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		// And reach it through the test's temp dirs, which only their
		// owner may enter.
		for d := filepath.Dir(dir); d != filepath.Clean(os.TempDir()) && d != filepath.Dir(d); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o711); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx := context.Background()
	admin := cluster.URL("postgres")
	name := fmt.Sprintf("small_%d", time.Now().UnixNano())
	if err := pgtest.Exec(ctx, admin, "CREATE TABLESPACE "+name+" LOCATION '"+space+"'"); err != nil {
		t.Fatal(err)
	}
	// Registered before the database is made, so run after it is dropped.
	t.Cleanup(func() {
		if err := pgtest.Exec(context.Background(), admin, "DROP TABLESPACE "+name); err != nil {
			t.Errorf("dropping the tablespace: %v", err)
		}
	})
	url := cluster.Database(t)
	if err := pgtest.Exec(ctx, admin, "ALTER DATABASE "+pgtest.Name(url)+" SET default_tablespace = "+name); err != nil {
		t.Fatal(err)
	}
	apitest.UsePostgres(path, url)
}

// TestDiskFull fills a real, small filesystem through the API: a write
// that no longer fits answers 507, not 500; reads, logins and a live
// stream go on; /healthz says writes are failing, even after a login
// succeeded beside creates refused; once space is freed,
// writes succeed again without a restart; and the database checks clean.
func TestDiskFull(t *testing.T) {
	dir := smallFilesystem(t, 8<<20)
	// Room that can be given back later, as an operator deleting old logs.
	filler := filepath.Join(dir, "old.log")
	if err := os.WriteFile(filler, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "herald.db")
	big := strings.Repeat("a long message to fill the disk ", 300) // ~9.6 KB
	content := func(i int) string { return fmt.Sprint(i, " ", big) }
	if apitest.OnPostgres(t) {
		placeOnFilesystem(t, dbPath, dir)
		// PostgreSQL compresses what repeats; words that do not repeat
		// fill its files, and its index of terms, as fast.
		rng := rand.New(rand.NewPCG(1, 2))
		var rngMu sync.Mutex // the flood below writes from several goroutines
		content = func(int) string {
			rngMu.Lock()
			defer rngMu.Unlock()
			var sb strings.Builder
			for sb.Len() < 9600 {
				fmt.Fprintf(&sb, "%08x ", rng.Uint32())
			}
			return sb.String()
		}
	}
	db := apitest.OpenStore(t, dbPath, nil)
	e, stop := apitest.Serve(t, db, heraldhttp.Config{}, nil)
	ada := e.Register("ada@example.com", pw)
	bob := e.Register("bob@example.com", pw)
	stream := openStream(e, bob, "", "")
	first := e.Post(ada, "before the disk filled")
	if ev := stream.next(); ev.Event != "message.created" {
		t.Fatalf("stream: %+v", ev)
	}

	var full *apitest.Response
	acked := []uint64{apitest.MsgID(t, first)}
	for i := range 5000 {
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
			Body: apitest.JSONBody(t, map[string]string{"content": content(i)})})
		if res.Status == http.StatusInsufficientStorage {
			full = res
			break
		}
		if res.Status != http.StatusCreated {
			t.Fatalf("post %d: %d %s", i, res.Status, res.Body)
		}
		acked = append(acked, apitest.MsgID(t, res.JSON(t)))
		stream.next()
	}
	if full == nil {
		t.Fatal("5,000 messages of 10 KB fit on an 8 MiB filesystem")
	}
	if p := full.JSON(t); !strings.Contains(p["detail"].(string), "out of storage") {
		t.Errorf("507 problem: %v", p)
	}
	// The server's own housekeeping commits in pages the file already has
	// (a trim with nothing to trim here; merges and sweeps alike): that it
	// succeeds must not read as writes succeeding again.
	if _, err := db.TrimChanges(context.Background(), 0, 0); err != nil {
		t.Fatalf("a trim while writes fail: %v", err)
	}
	health := e.Do(apitest.Request{Method: "GET", Path: "/healthz"})
	if got := health.JSON(t); health.Status != http.StatusOK || got["status"] != "degraded" || got["writes"] != "failing" {
		t.Errorf("/healthz while writes fail: %d %v", health.Status, got)
	}
	if res := e.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d", apitest.MsgID(t, first)), Token: bob}); res.Status != http.StatusOK {
		t.Errorf("a read while writes fail: %d %s", res.Status, res.Body)
	}
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=filled", Token: bob}); res.Status != http.StatusOK {
		t.Errorf("a search while writes fail: %d %s", res.Status, res.Body)
	}
	// Logins while large writes keep failing beside them: a commit that
	// does not fit must not take the small writes it was batched with
	// down too.
	flood := make(chan struct{})
	var flooding sync.WaitGroup
	for range 8 {
		flooding.Add(1)
		go func() {
			defer flooding.Done()
			for {
				select {
				case <-flood:
					return
				default:
				}
				e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
					Body: apitest.JSONBody(t, map[string]string{"content": content(0)})})
			}
		}()
	}
	for range 10 {
		if res := e.LoginAttempt("bob@example.com", pw); res.Status != http.StatusOK {
			t.Errorf("a login while writes fail: %d %s", res.Status, res.Body)
		}
	}
	close(flood)
	flooding.Wait()
	// A login succeeding says nothing of the disk: creates are still
	// refused for lack of room, so writes are still failing.
	if res := e.LoginAttempt("bob@example.com", pw); res.Status != http.StatusOK {
		t.Errorf("a login while writes fail: %d %s", res.Status, res.Body)
	}
	if res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"content": content(0)})}); res.Status != http.StatusInsufficientStorage {
		t.Fatalf("a create after the flood: %d %s", res.Status, res.Body)
	}
	if res := e.LoginAttempt("bob@example.com", pw); res.Status != http.StatusOK {
		t.Errorf("a login while writes fail: %d %s", res.Status, res.Body)
	}
	health = e.Do(apitest.Request{Method: "GET", Path: "/healthz"})
	if got := health.JSON(t); got["status"] != "degraded" || got["writes"] != "failing" {
		t.Errorf("/healthz after a login succeeded, while creates are refused: %d %v", health.Status, got)
	}
	select {
	case <-stream.done:
		t.Errorf("the stream ended while writes failed: %v", stream.err)
	default:
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := e.Post(ada, "after space was freed")
	for {
		// The flood's writes that fitted once space came back, then this one.
		ev := stream.next()
		if ev.Event != "message.created" {
			t.Fatalf("the stream after space was freed: %+v", ev)
		}
		if strings.Contains(ev.Data, "after space was freed") {
			break
		}
	}
	for _, id := range acked {
		if res := e.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d", id), Token: bob}); res.Status != http.StatusOK {
			t.Errorf("message %d, acknowledged before the disk filled, after: %d", id, res.Status)
		}
	}
	if got := e.Do(apitest.Request{Method: "GET", Path: "/healthz"}).JSON(t); got["status"] != "ok" {
		t.Errorf("/healthz once writes succeed again: %v", got)
	}
	stop()
	if apitest.OnPostgres(t) {
		t.Logf("the disk was full after %d messages; message %v was written once space was freed", len(acked), after["id"])
		return
	}
	snap, err := bolt.OpenSnapshot(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	problems, err := snap.Check()
	if err != nil || len(problems) > 0 {
		t.Errorf("check after the disk filled and was freed: %q, %v", problems, err)
	}
	t.Logf("the disk was full after %d messages; message %v was written once space was freed", len(acked), after["id"])
}
