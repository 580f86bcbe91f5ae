package http_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// Running in the open: registration modes, administrators nobody can
// impersonate, the administration API, moderation, password resets and
// write limits, each through real HTTP over a real store.

func TestInfo(t *testing.T) {
	for _, mode := range []heraldhttp.Registration{heraldhttp.RegistrationOpen, heraldhttp.RegistrationInvite, heraldhttp.RegistrationClosed} {
		e := apitest.New(t, apitest.WithRegistration(mode), func(c *heraldhttp.Config) { c.Version = "9.9.9 (abc, go, linux/amd64)" })
		e.MakeFirstAdmin("root@example.com")
		root := e.Login("root@example.com", pw)
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t); got["registration"] != string(mode) || got["version"] != nil {
			t.Errorf("%s: anonymous info = %v, want the mode and no version", mode, got)
		}
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info", Token: root}).JSON(t); got["version"] != "9.9.9 (abc, go, linux/amd64)" {
			t.Errorf("%s: an administrator's info = %v, want the version", mode, got)
		}
	}
	e := apitest.New(t)
	user := e.Register("ada@example.com", pw)
	for _, token := range []string{user, "herald_not-a-token", mintCode(t, auth.TokenPrefix)} {
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info", Token: token}).JSON(t); got["version"] != nil || got["registration"] != "open" {
			t.Errorf("info with token %.12s… = %v, want the public answer", token, got)
		}
	}
}

// TestRegistrationModes: open takes anyone; closed nobody; invite whoever
// holds a working invitation, each use counted, with one answer for an
// unknown, used up, revoked or expired one, which counts like a failed
// login against the address.
func TestRegistrationModes(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		e := apitest.New(t)
		if res := e.RegisterWith("ada@example.com", "herald_invite_ignored"); res.Status != http.StatusCreated {
			t.Errorf("open registration with an invite field: %d %s", res.Status, res.Body)
		}
	})
	t.Run("closed", func(t *testing.T) {
		e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationClosed))
		p := apitest.AssertProblem(t, e.RegisterWith("ada@example.com", ""), http.StatusForbidden)
		if !strings.Contains(p["detail"].(string), "closed") {
			t.Errorf("detail %q does not say registration is closed", p["detail"])
		}
		if c := e.Counts(); c.Users != 0 {
			t.Errorf("%d accounts after a closed registration", c.Users)
		}
	})
	t.Run("invite", func(t *testing.T) {
		e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationInvite))
		e.MakeFirstAdmin("root@example.com")
		root := e.Login("root@example.com", pw)
		p := apitest.AssertProblem(t, e.RegisterWith("ada@example.com", ""), http.StatusForbidden)
		if !strings.Contains(p["detail"].(string), "invitation") {
			t.Errorf("detail %q does not say an invitation is needed", p["detail"])
		}
		two := e.Invite(root, `{"maxUses": 2}`)
		if two["uses"] != 0.0 || two["maxUses"] != 2.0 || !strings.HasPrefix(two["code"].(string), auth.InvitePrefix) ||
			!strings.HasSuffix(two["url"].(string), "/#invite="+two["code"].(string)) {
			t.Errorf("invitation = %v", two)
		}
		for _, email := range []string{"ada@example.com", "bob@example.com"} {
			if res := e.RegisterWith(email, two["code"].(string)); res.Status != http.StatusCreated {
				t.Fatalf("%s with an invitation: %d %s", email, res.Status, res.Body)
			}
		}
		bad := func(name, code string) {
			t.Helper()
			p := apitest.AssertProblem(t, e.RegisterWith("carol@example.com", code), http.StatusUnprocessableEntity)
			if got := apitest.ViolationPaths(p); !slices.Equal(got, []string{"invite"}) {
				t.Errorf("%s: violations %v, want invite", name, got)
			}
		}
		bad("used up", two["code"].(string))
		bad("unknown", mintCode(t, auth.InvitePrefix))
		bad("not a code", "come in")
		revoked := e.Invite(root, "")
		if res := e.Do(apitest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/admin/invites/%v", revoked["id"]), Token: root}); res.Status != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", res.Status, res.Body)
		}
		bad("revoked", revoked["code"].(string))
		soon := e.Invite(root, apitest.JSONBody(t, map[string]string{"expiresAt": e.Clock.Now().Add(time.Hour).Format(time.RFC3339)}))
		e.Clock.Advance(time.Hour)
		bad("expired", soon["code"].(string))
		list := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/invites", Token: root}).JSON(t)["items"].([]any)
		if len(list) != 2 || strings.Contains(fmt.Sprint(list), "herald_invite_") {
			t.Errorf("invitations %v, want the two left, without codes", list)
		}
		// Guessing codes is guessing: 20 failures from one address (the
		// hour that expired the last one gave them all back), then 429.
		for range 19 {
			bad("guess", mintCode(t, auth.InvitePrefix))
		}
		res := e.RegisterWith("carol@example.com", mintCode(t, auth.InvitePrefix))
		if p := apitest.AssertProblem(t, res, http.StatusTooManyRequests); res.Header.Get("Retry-After") == "" {
			t.Errorf("guessing invitations: %v without Retry-After", p)
		}
	})
}

// mintCode is a well-formed code no store holds, so that a guess reaches
// the store's lookup rather than stopping at the checksum.
func mintCode(t *testing.T, prefix string) string {
	t.Helper()
	code, _, err := auth.MintCode(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// messagePath is the URL path of message id.
func messagePath(id uint64) string { return fmt.Sprintf("/api/messages/%d", id) }

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
		{"GET", "/api/admin/backup"},
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
		actor := "server"
		if a["actor"] != nil {
			actor = a["actor"].(map[string]any)["email"].(string)
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

// TestPasswordReset: an administrator's code, used by its holder through
// the API, sets a new password once and ends every session; a bad, used
// or expired code is refused naming code, and guessing is limited.
func TestPasswordReset(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	adaID := e.AccountID(root, "ada@example.com")
	makeCode := func() map[string]any {
		t.Helper()
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/admin/users/" + adaID + "/password-reset", Token: root})
		if res.Status != http.StatusCreated {
			t.Fatalf("reset: %d %s", res.Status, res.Body)
		}
		return res.JSON(t)
	}
	use := func(code, password string) *apitest.Response {
		return e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
			Body: apitest.JSONBody(t, map[string]string{"code": code, "newPassword": password})})
	}
	badCode := func(name string, res *apitest.Response) {
		t.Helper()
		if got := apitest.ViolationPaths(apitest.AssertProblem(t, res, http.StatusUnprocessableEntity)); !slices.Equal(got, []string{"code"}) {
			t.Errorf("%s: violations %v, want code", name, got)
		}
	}
	reset := makeCode()
	code := reset["code"].(string)
	if !strings.HasPrefix(code, auth.ResetPrefix) || reset["url"] != e.URL+"/#reset="+code || reset["expiresAt"] == nil {
		t.Errorf("reset = %v", reset)
	}
	if got := apitest.ViolationPaths(apitest.AssertProblem(t, use(code, "short"), http.StatusUnprocessableEntity)); !slices.Equal(got, []string{"newPassword"}) {
		t.Errorf("a short new password: violations %v", got)
	}
	if res := use(code, "a brand new password"); res.Status != http.StatusNoContent {
		t.Fatalf("reset: %d %s", res.Status, res.Body)
	}
	apitest.AssertProblem(t, e.Do(me(ada)), http.StatusUnauthorized)
	apitest.AssertProblem(t, e.LoginAttempt("ada@example.com", pw), http.StatusUnauthorized)
	e.Login("ada@example.com", "a brand new password")
	badCode("used", use(code, "another new password"))
	badCode("not a code", use("let me in", "another new password"))
	expiring := makeCode()["code"].(string)
	e.Clock.Advance(24 * time.Hour)
	badCode("expired", use(expiring, "another new password"))
	// The day that expired it gave back the address's 20 tries.
	for range 19 {
		badCode("guess", use(mintCode(t, auth.ResetPrefix), "another new password"))
	}
	apitest.AssertProblem(t, use(mintCode(t, auth.ResetPrefix), "another new password"), http.StatusTooManyRequests)
}

// TestWriteLimits: by default an account gets 60 writes at once, then one
// every 5 seconds; beyond, 429 with Retry-After; administrators are not
// limited; creates, edits and deletes all count.
func TestWriteLimits(t *testing.T) {
	e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{WritesPerAccount: auth.WritesPerAccount()}))
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	first := e.Post(ada, "first")
	for i := range 58 {
		e.Post(ada, fmt.Sprint("message ", i))
	}
	path := messagePath(apitest.MsgID(t, first))
	if res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"edited"}`}); res.Status != http.StatusOK {
		t.Fatalf("the 60th write: %d %s", res.Status, res.Body)
	}
	for _, req := range []apitest.Request{
		{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"61st"}`},
		{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"again"}`},
		{Method: "DELETE", Path: path, Token: ada},
	} {
		res := e.Do(req)
		apitest.AssertProblem(t, res, http.StatusTooManyRequests)
		if got := res.Header.Get("Retry-After"); got != "5" {
			t.Errorf("%s: Retry-After %q, want 5", req.Method, got)
		}
	}
	e.Clock.Advance(5 * time.Second)
	e.Post(ada, "one more after 5 s")
	for i := range 100 {
		e.Post(root, fmt.Sprint("an administrator's ", i))
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
