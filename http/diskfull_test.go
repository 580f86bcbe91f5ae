package http_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"herald/bolt"
	heraldhttp "herald/http"
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

// TestDiskFull fills a real, small filesystem through the API: a write
// that no longer fits answers 507, not 500; reads, logins and a live
// stream go on; /healthz says writes are failing; once space is freed,
// writes succeed again without a restart; and the database checks clean.
func TestDiskFull(t *testing.T) {
	dir := smallFilesystem(t, 8<<20)
	// Room that can be given back later, as an operator deleting old logs.
	filler := filepath.Join(dir, "old.log")
	if err := os.WriteFile(filler, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(dir, "herald.db")
	e, stop := serveDB(t, openDB(t, dbPath), heraldhttp.Config{}, nil)
	ada := e.register("ada@example.com", pw)
	bob := e.register("bob@example.com", pw)
	stream := e.openStream(bob, "", "")
	first := e.post(ada, "before the disk filled")
	if ev := stream.next(); ev.Event != "message.created" {
		t.Fatalf("stream: %+v", ev)
	}

	big := strings.Repeat("a long message to fill the disk ", 300) // ~9.6 KB
	var full *response
	acked := []uint64{msgID(t, first)}
	for i := range 5000 {
		res := e.do(request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
			Body: jsonBody(t, map[string]string{"content": fmt.Sprint(i, " ", big)})})
		if res.Status == http.StatusInsufficientStorage {
			full = res
			break
		}
		if res.Status != http.StatusCreated {
			t.Fatalf("post %d: %d %s", i, res.Status, res.Body)
		}
		acked = append(acked, msgID(t, res.JSON(t)))
		stream.next()
	}
	if full == nil {
		t.Fatal("5,000 messages of 10 KB fit on an 8 MiB filesystem")
	}
	if p := full.JSON(t); !strings.Contains(p["detail"].(string), "out of storage") {
		t.Errorf("507 problem: %v", p)
	}
	health := e.do(request{Method: "GET", Path: "/healthz"})
	if got := health.JSON(t); health.Status != http.StatusOK || got["status"] != "degraded" || got["writes"] != "failing" {
		t.Errorf("/healthz while writes fail: %d %v", health.Status, got)
	}
	if res := e.do(request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d", msgID(t, first)), Token: bob}); res.Status != http.StatusOK {
		t.Errorf("a read while writes fail: %d %s", res.Status, res.Body)
	}
	if res := e.do(request{Method: "GET", Path: "/api/messages?q=filled", Token: bob}); res.Status != http.StatusOK {
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
				e.do(request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
					Body: jsonBody(t, map[string]string{"content": big})})
			}
		}()
	}
	for range 10 {
		if res := e.loginAttempt("bob@example.com", pw); res.Status != http.StatusOK {
			t.Errorf("a login while writes fail: %d %s", res.Status, res.Body)
		}
	}
	close(flood)
	flooding.Wait()
	select {
	case <-stream.done:
		t.Errorf("the stream ended while writes failed: %v", stream.err)
	default:
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	after := e.post(ada, "after space was freed")
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
		if res := e.do(request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d", id), Token: bob}); res.Status != http.StatusOK {
			t.Errorf("message %d, acknowledged before the disk filled, after: %d", id, res.Status)
		}
	}
	if got := e.do(request{Method: "GET", Path: "/healthz"}).JSON(t); got["status"] != "ok" {
		t.Errorf("/healthz once writes succeed again: %v", got)
	}
	stop()
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
