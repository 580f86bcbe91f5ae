package http_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	"herald/http/internal/apitest"
	"herald/model"
)

func TestAdminBackup(t *testing.T) {
	e := apitest.New(t)
	root := e.Register("root@example.com", pw)
	e.MakeAdmin("Root@Example.com")
	ada := e.Register("ada@example.com", pw)

	t.Run("roles", func(t *testing.T) {
		roles := fmt.Sprint(e.Do(me(root)).JSON(t)["roles"])
		if roles != "[ROLE_USER ROLE_ADMIN]" {
			t.Errorf("admin's roles = %s", roles)
		}
		if roles := fmt.Sprint(e.Do(me(ada)).JSON(t)["roles"]); roles != "[ROLE_USER]" {
			t.Errorf("user's roles = %s", roles)
		}
	})
	t.Run("refused", func(t *testing.T) {
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/backup", Token: ada}), http.StatusForbidden)
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/backup"}), http.StatusUnauthorized)
	})

	if apitest.OnPostgres(t) {
		// On PostgreSQL, backups are PostgreSQL's own.
		p := apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/backup", Token: root}), http.StatusNotImplemented)
		if p["detail"] == "" {
			t.Error("the 501 says nothing")
		}
		return
	}

	// Under write load: every message acknowledged before the backup
	// began is in it, and the copy is a sound database.
	var (
		mu    sync.Mutex
		acked []uint64
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
					Body: fmt.Sprintf(`{"content":"writer %d message %d"}`, w, i)})
				if res.Status == http.StatusCreated {
					id := apitest.MsgID(t, res.JSON(t))
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		}()
	}
	// Wait, bounded, until the writers are well under way.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			t.Fatalf("only %d writes acknowledged in 30 s", n)
		}
	}
	mu.Lock()
	before := append([]uint64(nil), acked...)
	mu.Unlock()
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/backup", Token: root})
	close(stop)
	wg.Wait()
	if res.Status != http.StatusOK {
		t.Fatalf("backup: %d %s", res.Status, res.Body)
	}
	if got := res.Header.Get("Content-Disposition"); !regexp.MustCompile(`^attachment; filename="herald-backup-\d{8}T\d{6}Z\.db"$`).MatchString(got) {
		t.Errorf("Content-Disposition = %q", got)
	}
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(path, res.Body, 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := bolt.OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := snap.Check()
	snap.Close()
	if err != nil || len(problems) != 0 {
		t.Fatalf("check of the backup: %q, %v", problems, err)
	}
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range before {
		if _, _, err := db.Message(context.Background(), model.ByServer(), id); err != nil {
			t.Errorf("message %d, acknowledged before the backup began, is not in it: %v", id, err)
		}
	}
	_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Terms: model.Terms("writer")})
	if err != nil || len(page.Messages) == 0 {
		t.Errorf("search in the backup: %v, %v", page, err)
	}
}
