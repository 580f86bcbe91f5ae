package http_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/mail"
	"herald/mail/mailtest"
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

// mailServer runs a mail server on loopback and a sender to it until the
// test ends.
func mailServer(t *testing.T) (*mailtest.Server, *mail.Sender) {
	t.Helper()
	srv := mailtest.Start(t, mailtest.Options{})
	sender := mail.NewSender(mail.Settings{Host: "127.0.0.1", Port: srv.Port, PlainText: true, From: "herald@herald.example.com"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sender.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return srv, sender
}

var resetLink = regexp.MustCompile(`https://herald\.example\.com/#reset=(herald_reset_[A-Za-z0-9_-]+)`)

// TestPasswordResetByEmail: a person who forgot their password asks for
// a link by e-mail; the link, under the public URL whatever Host the
// request named, holds a code that sets a new password once and ends
// every session. Whether the address has an account or not, the answer
// is the same 202; an address without one gets no e-mail, and neither
// does anyone beyond 3 requests an hour per address or per client
// address.
func TestPasswordResetByEmail(t *testing.T) {
	srv, sender := mailServer(t)
	e := apitest.New(t, apitest.WithMailer(sender, "https://herald.example.com"),
		apitest.WithLimits(heraldhttp.Limits{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))
	ada := e.Register("ada@example.com", pw)
	e.Register("bob@example.com", pw)
	var first []byte
	ask := func(email, client string) {
		t.Helper()
		req, err := http.NewRequest("POST", e.URL+"/api/password-reset/request", strings.NewReader(`{"email":"`+email+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "evil.example" // never in a link
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", client)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			t.Fatalf("asking for %s: %d %s", email, res.StatusCode, body)
		}
		if first == nil {
			first = body
		} else if !bytes.Equal(body, first) {
			t.Errorf("asking for %s answered %s, not %s like the first", email, body, first)
		}
	}
	ask("ADA@example.com", "203.0.113.1")
	got := srv.Wait(t, 1, 10*time.Second)
	if got[0].To[0] != "ada@example.com" {
		t.Fatalf("the e-mail went to %v", got[0].To)
	}
	text, html := got[0].Parts(t)
	m := resetLink.FindStringSubmatch(text)
	if m == nil || !strings.Contains(html, m[0]) {
		t.Fatalf("no link under the public URL in the e-mail:\n%s", got[0])
	}
	if strings.Contains(text, "evil.example") || strings.Contains(html, "evil.example") {
		t.Errorf("the request's Host is in the e-mail")
	}
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"code": m[1], "newPassword": "a new long password"})})
	if res.Status != http.StatusNoContent {
		t.Fatalf("using the e-mailed code: %d %s", res.Status, res.Body)
	}
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: ada}); res.Status != http.StatusUnauthorized {
		t.Errorf("ada's old token after the reset: %d", res.Status)
	}
	e.Login("ada@example.com", "a new long password")
	again := e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"code": m[1], "newPassword": "yet another password"})})
	apitest.AssertProblem(t, again, http.StatusUnprocessableEntity)

	// No account, no e-mail; the same answer.
	ask("nobody@example.com", "203.0.113.2")
	// Per address: bob's first three go, the fourth does not, from
	// wherever it comes.
	for i := range 4 {
		ask("bob@example.com", fmt.Sprintf("203.0.113.%d", 10+i))
	}
	// Per client address: one client asking for many accounts.
	for _, email := range []string{"ada@example.com", "ada@example.com", "ada@example.com"} {
		ask(email, "198.51.100.7")
	}
	ask("bob@example.com", "198.51.100.7") // bob's budget is spent too
	srv.Wait(t, 1+3+2, 10*time.Second)
	time.Sleep(300 * time.Millisecond) // nothing more comes
	got = srv.Messages(t)
	to := map[string]int{}
	for _, r := range got {
		to[r.To[0]]++
	}
	// ada: the first, and two of the client's three (ada's own budget:
	// three an hour, one spent by the first).
	if len(got) != 6 || to["bob@example.com"] != 3 || to["ada@example.com"] != 3 {
		t.Errorf("e-mails sent: %v, want 3 to ada and 3 to bob", to)
	}
	if strings.Contains(e.Logs.String(), "herald_reset_") {
		t.Error("a reset code is in the log")
	}
}

// TestPasswordResetRequestRefused: without e-mail the route is 404 with a
// problem saying why, and /api/info says there is none; with it, an
// address that is not one is 422 naming email.
func TestPasswordResetRequestRefused(t *testing.T) {
	off := apitest.New(t)
	res := off.Do(apitest.Request{Method: "POST", Path: "/api/password-reset/request", ContentType: "application/json",
		Body: `{"email":"ada@example.com"}`})
	if p := apitest.AssertProblem(t, res, http.StatusNotFound); !strings.Contains(fmt.Sprint(p["detail"]), "sends no e-mail") {
		t.Errorf("without e-mail: %v", p)
	}
	if got := off.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t)["passwordResetByEmail"]; got != false {
		t.Errorf("without e-mail /api/info says passwordResetByEmail %v", got)
	}
	_, sender := mailServer(t)
	e := apitest.New(t, apitest.WithMailer(sender, "https://herald.example.com"))
	if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t)["passwordResetByEmail"]; got != true {
		t.Errorf("with e-mail /api/info says passwordResetByEmail %v", got)
	}
	for _, body := range []string{`{"email":""}`, `{"email":"not an address"}`, `{}`, `{"email":"ada@example.com","extra":1}`} {
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset/request", ContentType: "application/json", Body: body})
		want, status := []string{"email"}, http.StatusUnprocessableEntity
		if strings.Contains(body, "extra") {
			want, status = []string{"extra"}, http.StatusBadRequest // as every operation answers an unknown field
		}
		if got := apitest.ViolationPaths(apitest.AssertProblem(t, res, status)); !slices.Equal(got, want) {
			t.Errorf("%s: violations %v, want %v", body, got, want)
		}
	}
}
