package http_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/http/internal/apitest"
)

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
