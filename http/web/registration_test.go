package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/mail"
	"herald/mail/mailtest"
)

// The web client's side of running in the open for people who are not
// signed in: registration as the server allows it, and the page a
// password-reset link opens.

// shown reports whether the element sel is on the page and rendered.
func (p *webPerson) shown(sel string) bool {
	p.t.Helper()
	return webEval[bool](p, fmt.Sprintf(`!!document.querySelector(%q)?.checkVisibility()`, sel))
}

// address is the page's address as the address bar shows it.
func (p *webPerson) address() string {
	p.t.Helper()
	return webEval[string](p, `location.href`)
}

// goTo follows a link within the open page, as clicking it would: only the
// fragment changes, so the page is not loaded again.
func (p *webPerson) goTo(address string) {
	p.t.Helper()
	p.do("following "+address, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.href = %q`, address)))
}

// TestWebClientInviteRegistration: on a server that takes invitations,
// the link the API makes opens the sign-up form with its code filled in
// and out of the address, and creates the account; the same link, used up,
// followed in a page already open, fills the form in as well, and the
// server's refusal is shown on the invitation field.
func TestWebClientInviteRegistration(t *testing.T) {
	e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationInvite))
	e.MakeFirstAdmin("root@example.com")
	inv := e.Invite(e.Login("root@example.com", apitest.Password), "")
	link, code := inv["url"].(string), inv["code"].(string)
	b := newWebBrowser(t, e.URL)

	ada := b.personAt("ada", link)
	ada.screen("auth")
	ada.waitFor("the invitation field shows", `document.querySelector('#register-invite-code').checkVisibility()`)
	if got := webEval[string](ada, `document.querySelector('#register-invite-code').value`); got != code {
		t.Errorf("the invitation field holds %q, want the link's code %q", got, code)
	}
	if !webEval[bool](ada, `document.querySelector('#register-invite-code').required`) {
		t.Error("the invitation field is not required")
	}
	if got := ada.address(); got != e.URL+"/" {
		t.Errorf("after reading the invitation the address is %q, want %q", got, e.URL+"/")
	}
	if got := ada.text("#notice"); !strings.Contains(got, "invitation is filled in") {
		t.Errorf("the page says %q, want it to say the invitation is filled in", got)
	}
	ada.axeCheck("sign-up with an invitation")
	ada.shoot("web-invite.png")
	ada.register("ada@example.com", "correct horse battery", false)
	if got := e.Counts().Users; got != 2 {
		t.Errorf("the store holds %d accounts, want root's and Ada's", got)
	}

	bob := b.person("bob")
	bob.screen("auth")
	bob.goTo(link)
	bob.waitFor("the invitation is filled in", fmt.Sprintf(`document.querySelector('#register-invite-code').value === %q`, code))
	if got := bob.address(); strings.Contains(got, code) {
		t.Errorf("after reading the invitation the address is %q, with the code", got)
	}
	bob.expect(http.StatusUnprocessableEntity, "/api/register")
	bob.fill("#register-email", "bob@example.com")
	bob.fill("#register-password", "staple battery horse")
	bob.click("#register-form button[type=submit]")
	bob.waitFor("the refusal shows", `document.querySelector('#register-form .form-error').textContent !== ''`)
	if got := bob.formError("#register-form"); !strings.Contains(got, "Invitation code: is not a valid invitation") {
		t.Errorf("a used-up invitation: the form says %q, want the violation of the invitation", got)
	}
	if got := webEval[string](bob, `document.querySelector('#register-invite-code').getAttribute('aria-invalid')`); got != "true" {
		t.Errorf("the invitation field's aria-invalid = %q, want true", got)
	}
	if got := e.Counts().Users; got != 2 {
		t.Errorf("after the refusal the store holds %d accounts, want 2", got)
	}
}

// TestWebClientRegistrationClosed: on a server closed to registration the
// page shows no sign-up form, says registration is closed, and logging in
// works as ever.
func TestWebClientRegistrationClosed(t *testing.T) {
	e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationClosed))
	e.MakeFirstAdmin("root@example.com")
	b := newWebBrowser(t, e.URL)
	p := b.person("visitor")
	p.screen("auth")
	p.waitFor("the page says registration is closed", `document.querySelector('#register-closed')?.checkVisibility()`)
	if p.shown("#register-form") || p.shown("#register-email") {
		t.Error("a server closed to registration shows the sign-up form")
	}
	if got := p.text("#register-closed"); !strings.Contains(got, "Registration is closed on this server") {
		t.Errorf("the page says %q, want it to say registration is closed", got)
	}
	p.axeCheck("login, registration closed")
	p.shoot("web-closed.png")
	p.login("root@example.com", apitest.Password)
}

// TestWebClientPasswordReset: the link an administrator makes opens a page
// asking for the new password twice, with the code filled in and out of
// the address. Two different passwords are caught before anything is
// sent, a password of spaces is the server's refusal on its field; the
// right one leads to the login screen, where the new password works and
// the old one does not. The same link again is refused on the code, and
// guessing codes beyond the address's limit says how long to wait.
func TestWebClientPasswordReset(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	const email, fresh = "ada@example.com", "a brand new password"
	e.Register(email, apitest.Password)
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/admin/users/" + e.AccountID(root, email) + "/password-reset", Token: root})
	if res.Status != http.StatusCreated {
		t.Fatalf("making a reset code: %d %s", res.Status, res.Body)
	}
	reset := res.JSON(t)
	link, code := reset["url"].(string), reset["code"].(string)

	b := newWebBrowser(t, e.URL)
	p := b.personAt("ada", link)
	p.screen("reset")
	if got := webEval[string](p, `document.querySelector('#reset-code').value`); got != code {
		t.Errorf("the code field holds %q, want the link's code", got)
	}
	if got := p.address(); got != e.URL+"/#reset" {
		t.Errorf("after reading the code the address is %q, want %q", got, e.URL+"/#reset")
	}
	p.axeCheck("password reset")
	p.shoot("web-reset.png")

	submit := func(password, again string) {
		t.Helper()
		p.do("clearing the form's error", chromedp.Evaluate[chromedp.Void](`document.querySelector('#reset-form .form-error').replaceChildren()`))
		p.fill("#reset-password", password)
		p.fill("#reset-again", again)
		p.click("#reset-form button[type=submit]")
	}
	refusal := func() string {
		t.Helper()
		p.waitFor("the refusal shows", `document.querySelector('#reset-form .form-error').textContent !== ''`)
		return p.formError("#reset-form")
	}
	invalid := func(sel string) {
		t.Helper()
		if got := webEval[string](p, fmt.Sprintf(`document.querySelector(%q).getAttribute('aria-invalid')`, sel)); got != "true" {
			t.Errorf("%s has aria-invalid %q, want true", sel, got)
		}
	}

	requests, _ := p.watch.Snapshot()
	submit(fresh, fresh+"!")
	if got := refusal(); !strings.Contains(got, "not the same") {
		t.Errorf("two different passwords: the form says %q", got)
	}
	invalid("#reset-again")
	if after, _ := p.watch.Snapshot(); slices.ContainsFunc(after[len(requests):], func(u string) bool { return strings.HasSuffix(u, "/api/password-reset") }) {
		t.Error("two different passwords were sent to the server")
	}

	p.expect(http.StatusUnprocessableEntity, "/api/password-reset")
	submit("        ", "        ")
	if got := refusal(); !strings.Contains(got, "New password: must not be blank") {
		t.Errorf("a password of spaces: the form says %q, want the violation of the new password", got)
	}
	invalid("#reset-password")

	submit(fresh, fresh)
	p.screen("auth")
	if got := p.text("#notice"); !strings.Contains(got, "password is changed") {
		t.Errorf("after the reset the page says %q", got)
	}
	if got := p.focused(); got != "login-email" {
		t.Errorf("after the reset the focus is on %q, want the login form", got)
	}
	if got := p.address(); got != e.URL+"/" {
		t.Errorf("after the reset the address is %q", got)
	}
	apitest.AssertProblem(t, e.LoginAttempt(email, apitest.Password), http.StatusUnauthorized)
	p.login(email, fresh)

	// The link again, in the page signed in: the code is used.
	p.goTo(link)
	p.screen("reset")
	if got := p.address(); got != e.URL+"/#reset" {
		t.Errorf("after reading the code again the address is %q", got)
	}
	p.expect(http.StatusUnprocessableEntity, "/api/password-reset")
	submit("another new password", "another new password")
	if got := refusal(); !strings.Contains(got, "Password-reset code: is not a valid password-reset code") {
		t.Errorf("a used code: the form says %q, want the violation of the code", got)
	}
	invalid("#reset-code")
	e.Login(email, fresh)

	// Guessing from the same address runs into the limit: the page says
	// how long to wait.
	for i := 0; ; i++ {
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
			Body: apitest.JSONBody(t, map[string]string{"code": auth.ResetPrefix + strings.Repeat("g", 49), "newPassword": fresh})})
		if res.Status == http.StatusTooManyRequests {
			break
		}
		if i == 25 {
			t.Fatalf("25 bad codes and still %d", res.Status)
		}
	}
	p.expect(http.StatusTooManyRequests, "/api/password-reset")
	submit("another new password", "another new password")
	if got := refusal(); !strings.HasPrefix(got, "Too many failed attempts from your address. Please wait") {
		t.Errorf("beyond the limit the form says %q", got)
	}
}

// TestWebClientPasswordResetByEmail: on a server that sends e-mail, the
// sign-in form offers a link by e-mail; asking for one says what the
// server said, the e-mail comes, and its link opens the page that sets
// the new password, which then works.
func TestWebClientPasswordResetByEmail(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	sender := mail.NewSender(mail.Settings{Host: "127.0.0.1", Port: srv.Port, PlainText: true, From: "herald@example.com"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sender.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The links point at the public URL: here the test server's own, known
	// once it listens, so the handler is told it through a listener made
	// first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	public := "http://" + ln.Addr().String()
	e, stop := apitest.ServeOn(t, ln, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), time.Now),
		heraldhttp.Config{Mailer: sender, PublicURL: public}, nil)
	defer stop()
	const email, fresh = "ada@example.com", "a brand new password"
	e.Register(email, apitest.Password)

	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	p.waitFor("the link by e-mail is offered", `document.querySelector('#login-forgot a').textContent === 'Get a link by e-mail'`)
	p.click("#login-forgot a")
	p.screen("reset")
	p.waitFor("the form for a link shows", `document.querySelector('#forgot-form').checkVisibility()`)
	p.axeCheck("password reset, with e-mail")
	p.fill("#forgot-email", email)
	p.click("#forgot-form button[type=submit]")
	p.waitFor("the page says the e-mail is on its way", `document.querySelector('#notice').textContent.includes('on its way')`)
	got := srv.Wait(t, 1, 10*time.Second)
	text, _ := got[0].Parts(t)
	link := regexp.MustCompile(regexp.QuoteMeta(public) + `/#reset=herald_reset_[A-Za-z0-9_-]+`).FindString(text)
	if link == "" {
		t.Fatalf("no link to %s in the e-mail:\n%s", public, got[0])
	}
	p.goTo(link)
	p.screen("reset")
	p.fill("#reset-password", fresh)
	p.fill("#reset-again", fresh)
	p.click("#reset-form button[type=submit]")
	p.screen("auth")
	apitest.AssertProblem(t, e.LoginAttempt(email, apitest.Password), http.StatusUnauthorized)
	p.login(email, fresh)
}
