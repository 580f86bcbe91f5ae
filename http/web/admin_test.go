package web_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herald/auth"
	"herald/http/internal/apitest"
	"herald/model"
)

// The administration screen, moderation on the timeline, and nothing of
// either for anyone who is not an administrator.

// hasFocus reports whether the element sel has the focus.
func (p *webPerson) hasFocus(sel string) bool {
	p.t.Helper()
	return webEval[bool](p, fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, sel))
}

// userRow is a selector for the administration screen's row of email,
// once it is listed.
func (p *webPerson) userRow(email string) string {
	p.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll('#users > li')].find(li => li.querySelector('strong')?.textContent === %q)`, email)
	p.waitFor(email+" is listed", find)
	return fmt.Sprintf(`#users > li[data-id="%s"]`, webEval[string](p, find+`.dataset.id`))
}

// searchUsers runs the administration screen's search and waits for its
// answer.
func (p *webPerson) searchUsers(q string) {
	p.t.Helper()
	p.fill("#users-q", q)
	p.click("#users-search button[type=submit]")
	p.waitFor("the accounts are listed", `!document.querySelector('#users').hasAttribute('aria-busy') && !document.querySelector('#users-search button').disabled`)
}

// grantClipboard lets p's page read and write the clipboard, as a person
// allows a site to: headless Chromium asks nobody.
func (p *webPerson) grantClipboard() {
	p.t.Helper()
	id := chromedp.FromContext(p.ctx).BrowserContextID
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		if _, err := chromedp.CallBrowser(p.ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted,
			Origin: p.b.server, BrowserContextID: id,
		}); err != nil {
			p.t.Fatalf("granting %s: %v", name, err)
		}
	}
}

// manyAccounts makes n accounts in the store, user00@example.org and on.
func manyAccounts(e *apitest.Env, n int) {
	e.T.Helper()
	ctx := context.Background()
	hash, err := auth.NewHasher(apitest.FastParams, 1).Hash(ctx, apitest.Password)
	if err != nil {
		e.T.Fatal(err)
	}
	for i := range n {
		u := &model.User{Email: fmt.Sprintf("user%02d@example.org", i), PasswordHash: hash}
		if _, err := e.DB.CreateUser(ctx, u, model.TokenHash{2, byte(i)}, time.Minute, nil); err != nil {
			e.T.Fatal(err)
		}
	}
}

// TestWebClientAdministration: an administrator deletes someone else's
// message from the timeline, then, on the administration screen, finds
// accounts by part of their e-mail (paged), suspends one and lifts it,
// grants and revokes the role, is refused taking the last administrator's,
// makes a password-reset link and copies it, deletes an account's messages
// and then the account; makes an invitation, sees its link and revokes
// it; and reads all of it in the audit log. The tabs work from the
// keyboard, and axe checks each.
func TestWebClientAdministration(t *testing.T) {
	e := apitest.New(t)
	e.MakeFirstAdmin("root@example.com")
	const adaEmail, bobEmail = "ada@example.com", "bob@example.com"
	ada := e.Register(adaEmail, apitest.Password)
	bob := e.Register(bobEmail, apitest.Password)
	e.Post(ada, "Ada's first")
	spam := e.Post(ada, "Ada's spam")
	e.Post(bob, "Bob's one")
	e.Post(bob, "Bob's two")
	manyAccounts(e, 22)

	b := newWebBrowser(t, e.URL)
	p := b.person("root")
	p.screen("auth")
	p.login("root@example.com", apitest.Password)

	// Moderation: Delete on Ada's message, and no Edit.
	sel := p.messageSelector("Ada's spam")
	if n := webEval[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel+" button[data-act=edit]")); n != 0 {
		t.Errorf("an administrator sees %d Edit buttons on someone else's message, want none", n)
	}
	p.click(sel + " button[data-act=delete]")
	if got := p.text(sel + " .confirm"); !strings.Contains(got, adaEmail) {
		t.Errorf("the question whether to delete says %q, want it to name the owner", got)
	}
	p.click(sel + " button[data-act=remove]")
	p.waitFor("Ada's message is gone", "!"+messageJS("Ada's spam"))
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: fmt.Sprintf("/api/messages/%d", apitest.MsgID(t, spam)), Token: ada}), http.StatusNotFound)

	// The administration screen, on its accounts.
	p.click("#nav-admin")
	p.screen("admin")
	p.waitFor("the accounts are listed", `document.querySelectorAll('#users > li').length === 20`)
	p.axeCheck("administration, users")

	p.searchUsers("example.org")
	p.waitFor("a page of accounts", `document.querySelectorAll('#users > li').length === 20 && document.querySelector('#users-more').checkVisibility()`)
	p.click("#users-more")
	p.waitFor("the rest of them", `document.querySelectorAll('#users > li').length === 22 && document.querySelector('#users-more').hidden`)
	emails := webEval[[]string](p, `[...document.querySelectorAll('#users > li strong')].map(s => s.textContent)`)
	if len(emails) != 22 || emails[0] != "user21@example.org" || emails[21] != "user00@example.org" {
		t.Errorf("the accounts of example.org, paged: %q", emails)
	}

	p.searchUsers("ADA")
	p.waitFor("Ada alone", `document.querySelectorAll('#users > li').length === 1`)
	row := p.userRow(adaEmail)
	if got := p.text(row + " p"); !strings.Contains(got, "1 message") || !strings.Contains(got, "last seen") || strings.Contains(got, "null") {
		t.Errorf("Ada's row says %q, want her one message left and when she was last seen", got)
	}

	// Suspended, then lifted.
	p.click(row + ` [data-act="suspend"]`)
	p.waitFor("Ada is marked suspended", fmt.Sprintf(`document.querySelector(%q).textContent.includes('Suspended')`, row+" p"))
	if !p.hasFocus(row + ` [data-act="suspend"]`) {
		t.Errorf("after suspending the focus is on %q, want the button that did it", p.focused())
	}
	if got := p.text(row + ` [data-act="suspend"]`); got != "Lift suspension" {
		t.Errorf("the suspended account's button says %q", got)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: ada}), http.StatusUnauthorized)
	apitest.AssertProblem(t, e.LoginAttempt(adaEmail, apitest.Password), http.StatusForbidden)
	p.click(row + ` [data-act="suspend"]`)
	p.waitFor("the suspension is lifted", fmt.Sprintf(`!document.querySelector(%q).textContent.includes('Suspended')`, row+" p"))
	ada = e.Login(adaEmail, apitest.Password)

	// The role, granted and revoked.
	roles := func() string {
		return fmt.Sprint(e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: ada}).JSON(t)["roles"])
	}
	p.click(row + ` [data-act="admin"]`)
	p.waitFor("Ada is marked an administrator", fmt.Sprintf(`document.querySelector(%q).textContent.includes('Administrator')`, row+" p"))
	if got := roles(); got != "[ROLE_USER ROLE_ADMIN]" {
		t.Errorf("after the grant Ada's roles are %s", got)
	}
	p.click(row + ` [data-act="admin"]`)
	p.waitFor("Ada is no administrator", fmt.Sprintf(`!document.querySelector(%q).textContent.includes('Administrator')`, row+" p"))
	if got := roles(); got != "[ROLE_USER]" {
		t.Errorf("after the revocation Ada's roles are %s", got)
	}

	// The last administrator keeps the role, and the row says why.
	p.searchUsers("root")
	rootRow := p.userRow("root@example.com")
	p.expect(http.StatusConflict, "/api/admin/users/"+e.AccountID(e.Login("root@example.com", apitest.Password), "root@example.com"))
	p.click(rootRow + ` [data-act="admin"]`)
	p.waitFor("the refusal shows", fmt.Sprintf(`document.querySelector(%q).textContent !== ''`, rootRow+" .form-error"))
	if got := p.text(rootRow + " .form-error"); !strings.Contains(got, "last administrator") {
		t.Errorf("removing the last administrator: the row says %q", got)
	}

	// A password reset: the link and the code, shown once, copied.
	p.searchUsers("ada@")
	row = p.userRow(adaEmail)
	p.click(row + ` [data-act="reset"]`)
	p.waitFor("the link shows", fmt.Sprintf(`document.querySelector(%q)`, row+" .secret"))
	link := webEval[string](p, fmt.Sprintf(`document.querySelector(%q).value`, row+` .secret input[id$="-link"]`))
	code := webEval[string](p, fmt.Sprintf(`document.querySelector(%q).value`, row+` .secret input[id$="-code"]`))
	if !strings.HasPrefix(code, auth.ResetPrefix) || link != e.URL+"/#reset="+code {
		t.Errorf("the reset shows link %q and code %q", link, code)
	}
	if got := p.text(row + " .secret"); !strings.Contains(got, "shown only now") {
		t.Errorf("the reset box says %q, want it to say it is shown once", got)
	}
	if got := p.focused(); !strings.HasSuffix(got, "-link") {
		t.Errorf("with the link shown the focus is on %q, want the link", got)
	}
	p.axeCheck("administration, a password-reset link")
	p.shoot("web-admin-reset.png")
	p.grantClipboard()
	p.click(row + " .secret button") // Copy link
	p.waitFor("the copy is confirmed", fmt.Sprintf(`document.querySelector(%q).textContent !== ''`, row+` .secret [role="status"]`))
	if got := p.text(row + ` .secret [role="status"]`); got != "Copied to the clipboard." {
		t.Errorf("copying the link says %q", got)
	}
	if got := webEval[string](p, `navigator.clipboard.readText()`); got != link {
		t.Errorf("the clipboard holds %q, want the link", got)
	}
	if res := e.Do(apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"code": code, "newPassword": "a brand new password"})}); res.Status != http.StatusNoContent {
		t.Errorf("the code shown does not reset the password: %d %s", res.Status, res.Body)
	}

	// Bob's messages, then Bob: each asked first.
	p.searchUsers("bob")
	row = p.userRow(bobEmail)
	p.click(row + ` [data-act="messages"]`)
	if got := p.text(row + " .confirm"); !strings.Contains(got, "Delete all 2 messages of "+bobEmail) {
		t.Errorf("the question says %q", got)
	}
	p.do("pressing Escape", chromedp.KeyEvent(kb.Escape))
	p.waitFor("the question is gone", fmt.Sprintf(`!document.querySelector(%q)`, row+" .confirm"))
	if !p.hasFocus(row + ` [data-act="messages"]`) {
		t.Errorf("after Escape the focus is on %q, want the button that asked", p.focused())
	}
	p.click(row + ` [data-act="messages"]`)
	p.click(row + ` [data-act="yes-messages"]`)
	p.waitFor("Bob has no messages", fmt.Sprintf(`document.querySelector(%q).textContent.includes('0 messages')`, row+" p"))
	if got := e.Counts().Messages; got != 1 {
		t.Errorf("after Bob's messages went the store holds %d, want Ada's first", got)
	}
	bobID := webEval[string](p, fmt.Sprintf(`document.querySelector(%q).dataset.id`, row))
	p.click(row + ` [data-act="delete"]`)
	p.click(row + ` [data-act="yes-delete"]`)
	p.waitFor("Bob's row is gone", fmt.Sprintf(`!document.querySelector(%q)`, row))
	if !p.shown("#users-empty") {
		t.Error("with Bob gone the search does not say no account matches")
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: bob}), http.StatusUnauthorized)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/admin/users/" + bobID, Token: e.Login("root@example.com", apitest.Password)}), http.StatusNotFound)

	// Invitations, reached from the keyboard.
	p.do("arrowing to the next tab", chromedp.Focus(chromedp.CSS("#tab-users")), chromedp.KeyEvent(kb.ArrowRight))
	p.waitFor("the invitations show", `document.querySelector('#panel-invites').checkVisibility() && !document.querySelector('#panel-users').checkVisibility()`)
	if got := p.focused(); got != "tab-invites" {
		t.Errorf("after the arrow the focus is on %q, want the Invitations tab", got)
	}
	p.waitFor("no invitations yet", `document.querySelector('#invites-empty').checkVisibility()`)
	p.axeCheck("administration, invitations")
	p.fill("#invite-uses", "2")
	p.click("#invite-form button[type=submit]")
	p.waitFor("the invitation's link shows", `document.querySelector('#invite-made input')`)
	p.waitFor("the invitation is listed", `document.querySelectorAll('#invites > li').length === 1`)
	link = webEval[string](p, `document.querySelector('#invite-made input[id$="-link"]').value`)
	code = webEval[string](p, `document.querySelector('#invite-made input[id$="-code"]').value`)
	if !strings.HasPrefix(code, auth.InvitePrefix) || link != e.URL+"/#invite="+code {
		t.Errorf("the invitation shows link %q and code %q", link, code)
	}
	if got := p.text("#invites > li"); !strings.Contains(got, "Used 0 of 2") {
		t.Errorf("the invitation is listed as %q", got)
	}
	if got := p.text("#invite-made"); !strings.Contains(got, "2 people") || !strings.Contains(got, "shown only now") {
		t.Errorf("the invitation's box says %q", got)
	}
	rootToken := e.Login("root@example.com", apitest.Password)
	listed := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/invites", Token: rootToken}).JSON(t)["items"].([]any)
	if len(listed) != 1 || listed[0].(map[string]any)["maxUses"] != 2.0 {
		t.Fatalf("the server lists the invitations %v", listed)
	}
	p.axeCheck("administration, a new invitation")
	p.shoot("web-client-admin-invites.png")
	p.click("#invites > li button")
	p.waitFor("the invitation is gone", `document.querySelectorAll('#invites > li').length === 0 && document.querySelector('#invites-empty').checkVisibility()`)
	if listed := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/invites", Token: rootToken}).JSON(t)["items"].([]any); len(listed) != 0 {
		t.Errorf("after the revocation the server lists %v", listed)
	}

	// The audit log: every act above, newest first.
	p.click("#tab-audit")
	p.waitFor("the audit log is listed", `document.querySelectorAll('#audit tbody tr').length > 0 && !document.querySelector('#audit tbody').hasAttribute('aria-busy')`)
	p.axeCheck("administration, audit log")
	p.shoot("web-admin-audit.png")
	rows := webEval[[]string](p, `[...document.querySelectorAll('#audit tbody tr')].map(tr => [...tr.cells].slice(1).map(c => c.textContent).join(' | '))`)
	const r = "root@example.com"
	inviteID := fmt.Sprint(listed[0].(map[string]any)["id"])
	want := []string{
		r + " | Revoked an invitation | invitation " + inviteID,
		r + " | Made an invitation | invitation " + inviteID,
		r + " | Deleted the account | " + bobEmail,
		r + " | Deleted 2 messages | " + bobEmail,
		r + " | Made a password-reset code | " + adaEmail,
		r + " | Removed administrator | " + adaEmail,
		r + " | Made administrator | " + adaEmail,
		r + " | Lifted a suspension | " + adaEmail,
		r + " | Suspended | " + adaEmail,
		r + fmt.Sprintf(" | Deleted a message | message %d of %s", apitest.MsgID(t, spam), adaEmail),
		"The server's machine | Made administrator | " + r,
	}
	if !slices.Equal(rows, want) {
		t.Errorf("the audit log shows\n\t%s\nwant\n\t%s", strings.Join(rows, "\n\t"), strings.Join(want, "\n\t"))
	}
	if webEval[int](p, `document.querySelectorAll('#audit tbody time').length`) != len(want) {
		t.Error("the audit log's entries do not each say when")
	}
	// A phone: the log fits 390 pixels without sideways scrolling.
	p.do("a phone-sized screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	if w := webEval[int](p, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 pixels the audit log is %d wide", w)
	}
	p.axeCheck("administration, audit log, phone")
	p.do("back to the window's size", chromedp.ResetViewport())

	p.click("#tab-users")
	p.searchUsers("example.com")
	p.waitFor("root and Ada are listed", `document.querySelectorAll('#users > li').length === 2`)
	p.do("framing the picture of docs/web-client.md",
		chromedp.EmulateViewport(1024, 1000),
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); scrollTo(0, 0)`))
	p.shoot("web-client-admin.png")
	p.do("back to the window's size", chromedp.ResetViewport())
}

// TestWebClientNotAdministrator: a person who is not an administrator
// never sees the administration screen: not its entry, not through its
// address (#admin is the timeline), not what an administrator left in the
// same tab, and the page asks nothing of the administration API; nor is
// there Delete on other people's messages. Once made an administrator,
// the entry is there; when the role is taken away with the screen open,
// the next refusal takes the screen away and says why.
func TestWebClientNotAdministrator(t *testing.T) {
	e := apitest.New(t)
	e.MakeFirstAdmin("root@example.com")
	const adaEmail = "ada@example.com"
	e.Register(adaEmail, apitest.Password)
	e.Post(e.Login("root@example.com", apitest.Password), "The administrator's message")
	b := newWebBrowser(t, e.URL)
	p := b.person("shared")
	p.screen("auth")

	// An administrator uses the screen in this tab, and logs out there.
	p.login("root@example.com", apitest.Password)
	p.click("#nav-admin")
	p.screen("admin")
	p.waitFor("the accounts are listed", `document.querySelectorAll('#users > li').length === 2`)
	p.click("#logout")
	p.screen("auth")
	if n := webEval[int](p, `document.querySelectorAll('#admin-view li, #admin-view tr td').length`); n != 0 {
		t.Errorf("after the administrator logged out the page still holds %d of the screen's rows", n)
	}

	// Ada logs in with #admin in the address.
	before, _ := p.watch.Snapshot()
	if got := p.address(); got != e.URL+"/#admin" {
		t.Fatalf("the address is %q, want the administration screen's", got)
	}
	p.login(adaEmail, apitest.Password)
	p.waitFor("the timeline is shown", messageJS("The administrator's message"))
	if p.shown("#nav-admin") || p.shown("#admin-view") {
		t.Error("Ada sees the administration screen or its entry")
	}
	p.do("asking for the screen again", chromedp.Evaluate[chromedp.Void](`location.hash = '#timeline'; location.hash = '#admin'`))
	time.Sleep(300 * time.Millisecond) // a hashchange would have come by now
	p.screen("timeline")
	if p.shown("#admin-view") {
		t.Error("#admin shows Ada the administration screen")
	}
	if n := webEval[int](p, `document.querySelectorAll('#messages button').length`); n != 0 {
		t.Errorf("Ada sees %d buttons on the administrator's message, want none", n)
	}
	p.axeCheck("timeline, not an administrator")
	after, _ := p.watch.Snapshot()
	for _, u := range after[len(before):] {
		if strings.Contains(u, "/api/admin") {
			t.Errorf("Ada's page asked the administration API: %s", u)
		}
	}

	// Made an administrator: the entry is there once the page knows.
	e.MakeAdmin(adaEmail)
	p.do("reloading", chromedp.Reload())
	p.screen("admin") // the address still says #admin
	if !p.shown("#nav-admin") {
		t.Error("an administrator has no entry to the administration screen")
	}
	p.waitFor("the accounts are listed", `document.querySelectorAll('#users > li').length === 2`)

	// The role taken away on the server's machine: the next act is
	// refused, and the screen goes.
	u, err := e.DB.UserByEmail(context.Background(), adaEmail)
	if err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := e.DB.UpdateAccount(context.Background(), model.ByServer(), u.ID, model.AccountUpdate{Admin: &no}); err != nil {
		t.Fatal(err)
	}
	p.expect(http.StatusForbidden, "/api/admin/invites")
	p.click("#tab-invites")
	p.screen("timeline")
	p.waitFor("the page says why", `document.querySelector('#notice').textContent.includes('no longer an administrator')`)
	if p.shown("#nav-admin") {
		t.Error("after the role was taken away the entry to the screen is still there")
	}
}

// TestWebClientSettings: an administrator reads the settings on the
// administration screen (the flags' values while the database holds
// none), is told which field is wrong when a value is refused, and saves
// a change that is in force at once (GET /api/info, a registration
// refused) and in the audit log; axe checks the tab.
func TestWebClientSettings(t *testing.T) {
	e := apitest.New(t)
	e.MakeFirstAdmin("root@example.com")
	b := newWebBrowser(t, e.URL)
	p := b.person("root")
	p.screen("auth")
	p.login("root@example.com", apitest.Password)
	p.click("#nav-admin")
	p.screen("admin")
	p.click("#tab-settings")
	p.waitFor("the settings show", `document.querySelector('#settings-form input[name=registration][value=open]').checked && document.querySelector('#settings-writes').value !== ''`)
	if got, want := webEval[string](p, `document.querySelector('#settings-writes').value`), apitest.UnlimitedWrites.String(); got != want {
		t.Errorf("writes per account shows %q, want the flag's %q", got, want)
	}
	p.axeCheck("administration, settings")

	p.click("#settings-form input[name=registration][value=invite]")
	p.fill("#settings-writes", "fast")
	p.expect(http.StatusUnprocessableEntity, "/api/admin/settings")
	p.click("#settings-form button[type=submit]")
	p.waitFor("the refusal shows", `document.querySelector('#settings-writes').getAttribute('aria-invalid') === 'true'`)
	if got := p.text("#settings-form .form-error"); !strings.Contains(got, "Writes per account") || !strings.Contains(got, "BURST/INTERVAL") {
		t.Errorf("the refusal says %q, want it to name the field and what it takes", got)
	}
	p.axeCheck("administration, settings refused")
	if mode := e.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t)["registration"]; mode != "open" {
		t.Fatalf("after a refused change, registration is %v", mode)
	}

	p.fill("#settings-writes", "30/10s")
	p.click("#settings-form button[type=submit]")
	p.waitFor("the change is saved", `document.querySelector('#settings-writes').getAttribute('aria-invalid') === null && document.querySelector('#settings-writes').value === '30/10s' && !document.querySelector('#settings-form button').disabled`)
	if mode := e.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t)["registration"]; mode != "invite" {
		t.Errorf("after the change, /api/info says registration %v, want invite", mode)
	}
	reg := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"bob@example.com","password":"correct horse battery"}`})
	apitest.AssertProblem(t, reg, http.StatusForbidden)

	p.click("#tab-audit")
	p.waitFor("the audit log is listed", `document.querySelectorAll('#audit tbody tr').length > 0 && !document.querySelector('#audit tbody').hasAttribute('aria-busy')`)
	if got, want := p.text("#audit tbody tr"), "Changed the settings: who may register: invite, writes per account: 30/10s"; !strings.Contains(got, want) {
		t.Errorf("the audit log's newest entry says %q, want it to hold %q", got, want)
	}
}
