package http_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	heraldhttp "herald/http"
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

// TestNobodyMakesThemselvesAdministrator: no request of an account that
// is not an administrator yields the role: not registering an e-mail, not
// sending roles, not the administration API, not deleting and registering
// an administrator's e-mail again.
func TestNobodyMakesThemselvesAdministrator(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	mallory := e.Register("mallory@example.com", pw)
	rootID, malloryID := e.AccountID(root, "root@example.com"), e.AccountID(root, "mallory@example.com")
	for _, req := range []apitest.Request{
		{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"Root2@Example.com","password":"correct horse battery","roles":["ROLE_ADMIN"]}`},
		{Method: "PATCH", Path: "/api/admin/users/" + malloryID, Token: mallory, ContentType: "application/merge-patch+json", Body: `{"admin":true}`},
		{Method: "PATCH", Path: "/api/admin/users/" + rootID, Token: mallory, ContentType: "application/merge-patch+json", Body: `{"suspended":true}`},
		{Method: "GET", Path: "/api/admin/backup", Token: mallory},
		{Method: "POST", Path: "/api/admin/invites", Token: mallory, ContentType: "application/json", Body: `{}`},
	} {
		if res := e.Do(req); res.Status < 400 {
			t.Errorf("%s %s by a non-administrator: %d", req.Method, req.Path, res.Status)
		}
	}
	if roles := fmt.Sprint(e.Do(me(mallory)).JSON(t)["roles"]); roles != "[ROLE_USER]" {
		t.Errorf("mallory's roles %s", roles)
	}
	// An administrator's e-mail, deleted and registered again, is a new
	// account with no role.
	other := e.Admin("other@example.com")
	res := e.Do(apitest.Request{Method: "DELETE", Path: "/api/me", Token: other, ContentType: "application/json", Body: `{"password":"correct horse battery"}`})
	if res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	again := e.Register("Other@Example.com", pw)
	if roles := fmt.Sprint(e.Do(me(again)).JSON(t)["roles"]); roles != "[ROLE_USER]" {
		t.Errorf("an administrator's e-mail registered again has roles %s", roles)
	}
}

// TestAdministrationRoutesRefuse: every administration route answers 401
// without a token and 403 to an account that is not an administrator.
func TestAdministrationRoutesRefuse(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", pw)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/admin/users"}, {"GET", "/api/admin/users/1"}, {"PATCH", "/api/admin/users/1"},
		{"DELETE", "/api/admin/users/1"}, {"DELETE", "/api/admin/users/1/messages"},
		{"POST", "/api/admin/users/1/password-reset"}, {"POST", "/api/admin/invites"},
		{"GET", "/api/admin/invites"}, {"DELETE", "/api/admin/invites/1"}, {"GET", "/api/admin/audit"},
		{"GET", "/api/admin/backup"}, {"GET", "/api/admin/settings"}, {"PATCH", "/api/admin/settings"},
	} {
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: r.method, Path: r.path}), http.StatusUnauthorized)
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: r.method, Path: r.path, Token: ada, ContentType: "application/json", Body: "{}"}), http.StatusForbidden)
	}
}

// TestAccountsAPI: listing by part of the e-mail, paged; an account with
// its counts; suspension (tokens and streams end, logins 403, a wrong
// password still 401), lifted; grant and revoke; the last administrator
// kept; deletion of an account and of its messages; each act audited.
func TestAccountsAPI(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	for _, email := range []string{"bob@example.org", "adam@example.com", "zoe@example.net"} {
		e.Register(email, pw)
	}
	e.Post(ada, "one")
	e.Post(ada, "two")
	adaID := e.AccountID(root, "ada@example.com")

	res := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users?q=ADA&limit=1", Token: root})
	page := res.JSON(t)
	items := page["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["email"] != "adam@example.com" || page["next"] == nil || res.Header.Get("Link") == "" {
		t.Fatalf("first page of q=ADA: %s (Link %q)", res.Body, res.Header.Get("Link"))
	}
	res = e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users?q=ADA&limit=1&cursor=" + url.QueryEscape(page["next"].(string)), Token: root})
	page = res.JSON(t)
	got := page["items"].([]any)[0].(map[string]any)
	if got["email"] != "ada@example.com" || got["messages"] != 2.0 || got["suspended"] != false || got["lastSeenAt"] == nil || page["next"] != nil {
		t.Errorf("second page of q=ADA: %s", res.Body)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users?q=bob&cursor=" + url.QueryEscape(page["items"].([]any)[0].(map[string]any)["email"].(string)), Token: root}), http.StatusBadRequest)

	patch := func(id, body string) *apitest.Response {
		return e.Do(apitest.Request{Method: "PATCH", Path: "/api/admin/users/" + id, Token: root, ContentType: "application/merge-patch+json", Body: body})
	}
	if res := patch(adaID, `{"suspended":true}`); res.Status != http.StatusOK || res.JSON(t)["suspended"] != true {
		t.Fatalf("suspend: %d %s", res.Status, res.Body)
	}
	apitest.AssertProblem(t, e.Do(me(ada)), http.StatusUnauthorized)
	apitest.AssertProblem(t, e.LoginAttempt("ada@example.com", pw), http.StatusForbidden)
	apitest.AssertProblem(t, e.LoginAttempt("ada@example.com", "wrong password!"), http.StatusUnauthorized)
	apitest.AssertProblem(t, e.RegisterWith("ADA@example.com", ""), http.StatusConflict)
	if res := patch(adaID, `{"suspended":false,"admin":true}`); res.Status != http.StatusOK || fmt.Sprint(res.JSON(t)["roles"]) != "[ROLE_USER ROLE_ADMIN]" {
		t.Fatalf("lift and grant: %d %s", res.Status, res.Body)
	}
	ada = e.Login("ada@example.com", pw)
	for _, bad := range []string{`{"admin":"yes"}`, `{"suspended":null}`, `{"email":"x@y"}`, `{"roles":[]}`} {
		if res := patch(adaID, bad); res.Status != http.StatusBadRequest && res.Status != http.StatusUnprocessableEntity {
			t.Errorf("PATCH %s: %d", bad, res.Status)
		}
	}
	// Ada takes the role from root; then she is the last, and keeps it.
	rootID := e.AccountID(ada, "root@example.com")
	if res := e.Do(apitest.Request{Method: "PATCH", Path: "/api/admin/users/" + rootID, Token: ada, ContentType: "application/json", Body: `{"admin":false}`}); res.Status != http.StatusOK {
		t.Fatalf("ada revokes root: %d %s", res.Status, res.Body)
	}
	for _, req := range []apitest.Request{
		{Method: "PATCH", Path: "/api/admin/users/" + adaID, Token: ada, ContentType: "application/json", Body: `{"admin":false}`},
		{Method: "PATCH", Path: "/api/admin/users/" + adaID, Token: ada, ContentType: "application/json", Body: `{"suspended":true}`},
		{Method: "DELETE", Path: "/api/admin/users/" + adaID, Token: ada},
		{Method: "DELETE", Path: "/api/me", Token: ada, ContentType: "application/json", Body: `{"password":"correct horse battery"}`},
	} {
		apitest.AssertProblem(t, e.Do(req), http.StatusConflict)
	}
	bobID := e.AccountID(ada, "bob@example.org")
	bob := e.Login("bob@example.org", pw)
	e.Post(bob, "spam one")
	e.Post(bob, "spam two")
	if res := e.Do(apitest.Request{Method: "DELETE", Path: "/api/admin/users/" + bobID + "/messages", Token: ada}); res.Status != http.StatusNoContent {
		t.Fatalf("delete bob's messages: %d %s", res.Status, res.Body)
	}
	if got := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users/" + bobID, Token: ada}).JSON(t); got["messages"] != 0.0 {
		t.Errorf("bob after his messages went: %v", got)
	}
	if res := e.Do(apitest.Request{Method: "DELETE", Path: "/api/admin/users/" + bobID, Token: ada}); res.Status != http.StatusNoContent {
		t.Fatalf("delete bob: %d %s", res.Status, res.Body)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users/" + bobID, Token: ada}), http.StatusNotFound)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users/x", Token: ada}), http.StatusNotFound)
	apitest.AssertProblem(t, e.Do(me(bob)), http.StatusUnauthorized)

	var actions []string
	for _, it := range e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: ada}).JSON(t)["items"].([]any) {
		a := it.(map[string]any)
		// Every act says who made it; the server's machine is no account.
		by, _ := a["actor"].(map[string]any)
		actor, _ := by["email"].(string)
		if by["type"] == "server" && len(by) == 1 {
			actor = "server"
		} else if by["type"] != "user" || actor == "" {
			t.Errorf("actor of %v: %v", a["action"], a["actor"])
		}
		target := a["target"].(map[string]any)
		actions = append(actions, fmt.Sprintf("%s %s→%v", a["action"], actor, target["email"]))
	}
	want := []string{
		"delete-account ada@example.com→bob@example.org",
		"delete-messages ada@example.com→bob@example.org",
		"revoke-admin ada@example.com→root@example.com",
		"grant-admin root@example.com→ada@example.com",
		"unsuspend root@example.com→ada@example.com",
		"suspend root@example.com→ada@example.com",
		"grant-admin server→root@example.com",
	}
	if !slices.Equal(actions, want) {
		t.Errorf("audit log\n%s\nwant\n%s", strings.Join(actions, "\n"), strings.Join(want, "\n"))
	}
}

// TestModeration: an administrator deletes anyone's message, and live
// searches lose it; editing stays the owner's.
func TestModeration(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	bob := e.Register("bob@example.com", pw)
	path := messagePath(apitest.MsgID(t, e.Post(ada, "buy cheap pills")))
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: path, Token: bob}), http.StatusForbidden)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "PATCH", Path: path, Token: root, ContentType: "application/json", Body: `{"content":"x"}`}), http.StatusForbidden)
	if res := e.Do(apitest.Request{Method: "DELETE", Path: path, Token: root}); res.Status != http.StatusNoContent {
		t.Fatalf("an administrator deletes ada's message: %d %s", res.Status, res.Body)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: path, Token: ada}), http.StatusNotFound)
	entry := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit?limit=1", Token: root}).JSON(t)["items"].([]any)[0].(map[string]any)
	if target := entry["target"].(map[string]any); entry["action"] != "delete-message" || target["type"] != "message" || target["owner"].(map[string]any)["email"] != "ada@example.com" {
		t.Errorf("audit entry %v", entry)
	}
}

// TestBackupIsAudited: downloading a backup is an administrative act. A
// store that offers no download (PostgreSQL: 501) records none.
func TestBackupIsAudited(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/backup", Token: root})
	if _, hot := e.DB.(heraldhttp.HotBackup); !hot {
		apitest.AssertProblem(t, res, http.StatusNotImplemented)
		if items := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)["items"].([]any); len(items) != 1 {
			t.Errorf("audit log after a refused backup: %v, want the grant alone", items)
		}
		return
	}
	if res.Status != http.StatusOK {
		t.Fatalf("backup: %d", res.Status)
	}
	entry := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)["items"].([]any)[0].(map[string]any)
	if entry["action"] != "download-backup" || entry["target"] != nil || entry["actor"].(map[string]any)["email"] != "root@example.com" {
		t.Errorf("audit entry %v", entry)
	}
}
