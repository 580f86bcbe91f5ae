package web_test

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// The web client as a person meets it outside the happy path: two tabs on
// one account, a server that restarts under an open page, the limits'
// refusals, and the keyboard alone.

// focused describes the element with the focus: its id, else its tag and
// data-act, so a failure says where the focus went.
func (p *webPerson) focused() string {
	return webEval[string](p, `(() => {
		const el = document.activeElement;
		if (!el || el === document.body) return 'BODY';
		if (el.id) return el.id;
		if (el.dataset.act) return el.dataset.act + ':' + el.closest('li')?.querySelector('.content')?.textContent;
		return el.tagName + ':' + el.textContent.trim();
	})()`)
}

// TestWebClientTwoTabs: one person with the client open in two tabs of one
// browser, remembered on the device so both hold the same token. A post in
// one reaches the other live. A message deleted in one while the other is
// editing it leaves the editor open with its text and a reason; Save is
// refused with the same reason, and closing the editor takes the message
// away. Logging out in one tab signs the other out at once, saying why, and
// what was half typed in its post box is there again when the same person
// logs back in. Signing out another device (a tab that logged in on its own
// token) leaves this tab's remembered token alone. A session that ends under
// a click on Post shows the login screen, and no stale error after the next
// login.
func TestWebClientTwoTabs(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	const email, password = "ada@example.com", "correct horse battery"
	one := b.person("ada-tab1")
	one.screen("auth")
	one.register(email, password, true)
	two := one.tab("ada-tab2")
	two.screen("timeline")
	one.liveOn()
	two.liveOn()

	// A post in one tab reaches the other, with her controls on it.
	const fromOne = "Posted in the first tab"
	one.post(fromOne)
	two.waitFor("the first tab's post arrives", messageJS(fromOne))
	if n := webEval[int](two, fmt.Sprintf(`document.querySelectorAll(%q).length`, two.messageSelector(fromOne)+" button[data-act=edit]")); n != 1 {
		t.Errorf("the second tab shows %d edit buttons on her own message, want 1", n)
	}

	// Deleted in one tab while being edited in the other.
	const doomed, rewrite = "This one gets deleted", "A careful rewrite, typed at length"
	one.post(doomed)
	sel := two.messageSelector(doomed)
	id := webEval[string](two, fmt.Sprintf(`document.querySelector(%q).dataset.id`, sel))
	two.click(sel + " button[data-act=edit]")
	two.fill(sel+" form.edit textarea", rewrite)
	mine := one.messageSelector(doomed)
	one.click(mine + " button[data-act=delete]")
	one.click(mine + " button[data-act=remove]")
	one.waitFor("the message is gone", "!"+messageJS(doomed))
	two.waitFor("the editor says the message is gone", fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('deleted elsewhere')`, sel+" .form-error"))
	if got := webEval[string](two, fmt.Sprintf(`document.querySelector(%q)?.value ?? '(no editor)'`, sel+" form.edit textarea")); got != rewrite {
		t.Errorf("after the delete elsewhere the editor holds %q, want %q", got, rewrite)
	}
	two.expect(http.StatusNotFound, "/api/messages/"+id)
	two.do("clearing the error", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).replaceChildren()`, sel+" .form-error")))
	two.click(sel + " button[data-act=save]")
	two.waitFor("Save is refused with the reason", fmt.Sprintf(`document.querySelector(%q)?.textContent.includes('deleted elsewhere')`, sel+" .form-error"))
	if got := webEval[string](two, fmt.Sprintf(`document.querySelector(%q)?.value ?? '(no editor)'`, sel+" form.edit textarea")); got != rewrite {
		t.Errorf("after the refused save the editor holds %q, want %q", got, rewrite)
	}
	two.do("pressing Escape in the editor", chromedp.Focus(chromedp.CSS(sel+" form.edit textarea")), chromedp.KeyEvent(kb.Escape))
	two.waitFor("the deleted message leaves when the editor closes", "!document.querySelector("+fmt.Sprintf("%q", sel)+")")
	if got := two.focused(); got == "BODY" {
		t.Error("after the deleted message left, nothing has the focus")
	}

	// Logging out in one tab: the other says so at once, and keeps its
	// half-typed post for her next login.
	const draft = "Half a thought, not yet posted"
	two.fill("#post-content", draft)
	one.click("#logout")
	one.screen("auth")
	two.screen("auth")
	if got := two.text("#notice"); !strings.Contains(got, "another tab") {
		t.Errorf("after logging out in the first tab the second says %q, want it to name the other tab", got)
	}
	two.login(email, password) // for this tab only
	if got := webEval[string](two, `document.querySelector('#post-content').value`); got != draft {
		t.Errorf("after logging in again the post box holds %q, want the draft %q", got, draft)
	}

	// Another device signed out: the tab on its own token goes to the
	// login screen, and the first tab's remembered token stays.
	one.fill("#login-email", email)
	one.fill("#login-password", password)
	one.click("#login-remember")
	one.click("#login-form button[type=submit]")
	one.screen("timeline")
	two.liveOn()
	two.expect(http.StatusUnauthorized, "/api/messages/stream")
	one.click("#nav-settings")
	one.screen("settings")
	one.waitFor("both devices are listed", `document.querySelectorAll('#devices li').length === 2`)
	one.click(`#devices button[data-current="false"]`)
	two.screen("auth")
	if got := two.text("#notice"); !strings.Contains(got, "session has ended") {
		t.Errorf("after its token was signed out the second tab says %q", got)
	}
	one.do("reloading the first tab", chromedp.Reload())
	one.screen("settings") // still signed in, on the screen it was on

	// The session ends under a click on Post: the login screen says why,
	// and the post form has no stale error after the next login.
	two.login(email, password)
	two.liveOn()
	const second = "Another thought, cut short"
	two.fill("#post-content", second)
	token := webEval[string](two, `sessionStorage.getItem('herald.token')`)
	if res := e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: token}); res.Status != http.StatusNoContent {
		t.Fatalf("logging the second tab's token out: status %d: %s", res.Status, res.Body)
	}
	two.expect(http.StatusUnauthorized, "/api/messages")
	two.expect(http.StatusUnauthorized, "/api/messages/stream")
	two.click("#post-form button[type=submit]")
	two.screen("auth")
	if got := two.text("#notice"); !strings.Contains(got, "session has ended") {
		t.Errorf("after the session ended under Post the page says %q", got)
	}
	two.login(email, password)
	if got := two.formError("#post-form"); got != "" {
		t.Errorf("after logging in again the post form says %q, want nothing", got)
	}
	if got := webEval[string](two, `document.querySelector('#post-content').value`); got != second {
		t.Errorf("after logging in again the post box holds %q, want %q", got, second)
	}
}

// serveDBAt is apitest.Serve on a listener at addr, so a restarted server is
// found where the page left the old one.
func serveDBAt(t *testing.T, path, addr string) (stop func()) {
	t.Helper()
	var l net.Listener
	var err error
	// The old listener's port is free once it is closed; give the kernel
	// a moment should it not be yet.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if l, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	_, stop = apitest.ServeOn(t, l, apitest.OpenStore(t, path, nil), heraldhttp.Config{}, nil)
	return stop
}

// TestWebClientServerRestart: the server stops under an open page and comes
// back on the same database and address. The page says the server cannot
// be reached, at the top and where live updates are announced; a post
// tried meanwhile says so too and keeps its text. Once the server answers
// anything again, the live stream opens at once rather than at the end of
// its backoff, the stale error goes, the post goes through and what others
// post arrives live; all without a reload.
func TestWebClientServerRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	e, stop := apitest.Serve(t, apitest.OpenStore(t, path, nil), heraldhttp.Config{}, nil)
	addr := e.HTTP.Listener.Addr().String()
	const email, password = "ada@example.com", "correct horse battery"
	e.Register(email, password)
	bob := e.Register("bob@example.com", "staple battery horse")

	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login(email, password)
	ada.liveOn()

	const draft = "Typed while the server restarts"
	ada.fill("#post-content", draft)
	ada.tolerate("net::ERR_CONNECTION_REFUSED", "/api/messages/stream")
	ada.tolerate("net::ERR_INCOMPLETE_CHUNKED_ENCODING", "/api/messages/stream")
	ada.expectBroken("net::ERR_CONNECTION_REFUSED", "/api/messages")
	stop()
	down := time.Now()
	ada.waitFor("the live line says the server cannot be reached", `document.querySelector('#live').textContent.includes('cannot be reached')`)
	if got := ada.text("#notice"); !strings.Contains(got, "cannot be reached") {
		t.Errorf("with the server down the page's notice says %q", got)
	}
	ada.click("#post-form button[type=submit]")
	ada.waitFor("the post is refused", `document.querySelector('#post-form .form-error').textContent !== ''`)
	if got := ada.formError("#post-form"); !strings.Contains(got, "cannot be reached") {
		t.Errorf("a post with the server down says %q", got)
	}
	if got := webEval[string](ada, `document.querySelector('#post-content').value`); got != draft {
		t.Errorf("after the refused post the box holds %q, want %q", got, draft)
	}

	// Down long enough for the stream's backoff to grow past 8 seconds:
	// its next try on its own would come well after the server is back.
	time.Sleep(time.Until(down.Add(11 * time.Second)))
	serveDBAt(t, path, addr)

	// Something else she does reaches the server: the settings' list of
	// devices. The stream takes that as the sign to try at once.
	ada.click("#nav-settings")
	ada.screen("settings")
	ada.waitFor("the devices are listed", `document.querySelectorAll('#devices li').length === 2`) // Go's registration and her login
	answered := time.Now()
	ada.click("#nav-timeline")
	ada.screen("timeline")
	ada.liveOn()
	if waited := time.Since(answered); waited > 4*time.Second {
		t.Errorf("the live stream opened again %v after the server answered, want at once", waited.Round(time.Millisecond))
	}
	if got := ada.formError("#post-form"); got != "" {
		t.Errorf("with the server back the post form still says %q", got)
	}
	if got := webEval[string](ada, `document.querySelector('#post-content').value`); got != draft {
		t.Errorf("with the server back the box holds %q, want %q", got, draft)
	}
	ada.click("#post-form button[type=submit]")
	ada.waitFor("the draft is posted", messageJS(draft))
	e2 := &apitest.Env{T: t, URL: e.URL}
	const fromBob = "Bob, after the restart"
	e2.Post(bob, fromBob)
	ada.waitFor("Bob's message arrives live", messageJS(fromBob))
}

// busyTap answers the next few requests for its path in place of the
// server. For logins: first as
// Herald does when its password-hashing queue is full (503, Retry-After 1,
// the problem document problemFor writes for auth.ErrBusy), then as a
// proxy in front of it might during maintenance (503, an HTML page, a
// Retry-After date). A real full queue is a matter of timing; its answer
// is not.
type busyTap struct {
	path  string // the requests answered in place of the server
	mu    sync.Mutex
	queue []func(http.ResponseWriter)
}

func (tap *busyTap) tune(srv *http.Server) {
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tap.mu.Lock()
		var answer func(http.ResponseWriter)
		if r.URL.Path == tap.path && len(tap.queue) > 0 {
			answer, tap.queue = tap.queue[0], tap.queue[1:]
		}
		tap.mu.Unlock()
		if answer == nil {
			next.ServeHTTP(w, r)
			return
		}
		answer(w)
	})
}

func (tap *busyTap) push(answer func(http.ResponseWriter)) {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.queue = append(tap.queue, answer)
}

// TestWebClientWaitMessages: refusals that mean "not now" say how long to
// wait, in words, with the number from Retry-After in the unit a person
// would use: a registration beyond the address's limit (429, 45 seconds),
// a login beyond the account's failures (429, 5 minutes), a server busy
// hashing passwords (503, 1 second: singular), and a 503 without a problem
// document whose Retry-After is a date. Never "Error 429", a status
// number, JSON, or the server's "try again later" beside a number.
func TestWebClientWaitMessages(t *testing.T) {
	tap := &busyTap{path: "/api/login"}
	oneRegistration := auth.Rate{Burst: 1, Every: 45 * time.Second}
	// The limits count by a clock that stands still, so a wait is the
	// whole interval however long the browser takes between two tries.
	cfg := heraldhttp.Config{Now: apitest.NewClock().Now, Limits: heraldhttp.Limits{
		RegistrationsPerAddress: oneRegistration,
		LoginFailuresPerAccount: auth.Rate{Burst: 1, Every: 5 * time.Minute},
	}}
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), cfg, tap.tune)
	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	const email, password = "ada@example.com", "correct horse battery"

	// refusal submits form and returns what its alert region says.
	refusal := func(form string) string {
		t.Helper()
		p.do("clearing the form's error", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).replaceChildren()`, form+" .form-error")))
		p.click(form + " button[type=submit]")
		p.waitFor("the refusal shows", fmt.Sprintf(`document.querySelector(%q).textContent !== ''`, form+" .form-error"))
		return p.formError(form)
	}
	check := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: the form says %q, want %q", what, got, want)
		}
		for _, bad := range []string{"429", "503", "{", "later", "seconds."} {
			if strings.Contains(got, bad) && !strings.Contains(want, bad) {
				t.Errorf("%s: the form says %q, which has %q in it", what, got, bad)
			}
		}
	}

	p.register(email, password, false)
	// Logged out before her first page is answered, it would be refused.
	p.waitFor("her empty timeline has loaded", `!document.querySelector('#empty').hidden`)
	p.click("#logout")
	p.screen("auth")
	p.expect(http.StatusTooManyRequests, "/api/register")
	p.fill("#register-email", "bob@example.com")
	p.fill("#register-password", "staple battery horse")
	// The wait counts down from when the burst was spent, 45 s: on a busy
	// machine a second may pass before this registration is answered.
	registration := strings.Replace(refusal("#register-form"), "wait 44 seconds", "wait 45 seconds", 1)
	check("a registration beyond the limit", registration,
		"Too many registrations from your address. Please wait 45 seconds, then try again.")

	p.expect(http.StatusUnauthorized, "/api/login")
	p.expect(http.StatusTooManyRequests, "/api/login")
	p.fill("#login-email", email)
	p.fill("#login-password", "not her password")
	refusal("#login-form")
	check("a login beyond the failures allowed", refusal("#login-form"),
		"Too many failed logins. Please wait 5 minutes, then try again.")

	tap.push(func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"type":"about:blank","title":"Service Unavailable","status":503,"detail":"the server is busy checking passwords; try again in a moment"}`)
	})
	p.expect(http.StatusServiceUnavailable, "/api/login")
	check("a server busy hashing passwords", refusal("#login-form"),
		"The server is busy checking passwords. Please wait 1 second, then try again.")

	tap.push(func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Retry-After", time.Now().Add(150*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `<html><body><h1>503 Service Unavailable</h1></body></html>`)
	})
	p.expect(http.StatusServiceUnavailable, "/api/login")
	check("a proxy's 503 during maintenance", refusal("#login-form"),
		"The server is busy or down for maintenance. Please wait 3 minutes, then try again.")
}

// TestWebClientKeyboard: the client with the keyboard alone. Tab goes
// through the login form's fields in order, then its button; focus is
// visible (:focus-visible). On the timeline Tab goes from the post box to
// Post, on to the search and each own message's Edit and Delete. Post and
// Search pressed from the keyboard leave the focus where the person can
// go on (the post box; the Search button), not on <body>. Escape closes an
// editor and the question whether to delete, giving the focus back to the
// button that opened it; after a delete the focus is on the next message
// (its first button, or the message itself when it is someone else's).
// The skip link moves the focus to the content without leaving the screen.
func TestWebClientKeyboard(t *testing.T) {
	e := apitest.New(t)
	const email, password = "ada@example.com", "correct horse battery"
	token := e.Register(email, password)
	e.Post(e.Register("bob@example.com", "bob's long password"), "bob's")
	for _, c := range []string{"first", "second", "third"} {
		e.Post(token, c)
	}
	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	tab := func() string {
		t.Helper()
		p.do("pressing Tab", chromedp.KeyEvent(kb.Tab))
		return p.focused()
	}
	press := func(what, key string) {
		t.Helper()
		p.do("pressing "+what, chromedp.KeyEvent(key))
	}
	outlined := func() bool {
		return webEval[bool](p, `(() => { const s = getComputedStyle(document.activeElement); return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) >= 2; })()`)
	}

	// The login form, in order, and visibly.
	var order []string
	for i := 0; i < 8 && (len(order) == 0 || order[len(order)-1] != "BUTTON:Log in"); i++ {
		order = append(order, tab())
		if order[len(order)-1] != "BODY" && !outlined() {
			t.Errorf("%s has the focus with no visible outline", order[len(order)-1])
		}
	}
	want := []string{"login-email", "login-password", "login-remember", "BUTTON:Log in"}
	if len(order) < len(want) || strings.Join(order[len(order)-len(want):], " ") != strings.Join(want, " ") {
		t.Errorf("Tab on the login screen goes %q, want it to end %q", order, want)
	}
	p.do("focusing the e-mail", chromedp.Focus(chromedp.CSS("#login-email")))
	p.do("typing the credentials", chromedp.KeyEvent(email), chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(password), chromedp.KeyEvent(kb.Enter))
	p.screen("timeline")
	p.waitFor("the messages are shown", messageJS("first"))

	// Post with the button, from the keyboard.
	p.do("focusing the post box", chromedp.Focus(chromedp.CSS("#post-content")))
	press("typing", "fourth")
	if got := tab(); got != "BUTTON:Post" {
		t.Errorf("Tab from the post box goes to %q, want the Post button", got)
	}
	press("Enter", kb.Enter)
	p.waitFor("the message is posted", messageJS("fourth"))
	p.waitFor("the post is done", `!document.querySelector('#post-form button').disabled`)
	if got := p.focused(); got != "post-content" {
		t.Errorf("after posting with the Post button the focus is on %q, want the post box", got)
	}

	// Search with the button, from the keyboard.
	p.do("focusing Search", chromedp.Focus(chromedp.CSS("#search-form button[type=submit]")))
	press("Enter", kb.Enter)
	p.waitFor("the search is done", `!document.querySelector('#messages').hasAttribute('aria-busy') && !document.querySelector('#search-form button').disabled && document.querySelectorAll('#messages > li').length === 5`)
	if got := p.focused(); got != "BUTTON:Search" {
		t.Errorf("after searching with the Search button the focus is on %q, want the button", got)
	}

	// On to the messages' own buttons, newest first.
	order = nil
	for i := 0; i < 12 && !strings.HasPrefix(p.focused(), "delete:third"); i++ {
		order = append(order, tab())
	}
	// Each message's author, when the message has a handle, is a link to
	// their profile; then Reply, Edit and Delete.
	want = []string{"A:Reply", "edit:fourth", "delete:fourth", "A:Reply", "edit:third", "delete:third"}
	if author := webEval[string](p, `document.querySelector('#messages a.owner')?.textContent ?? ''`); author != "" {
		want = []string{"A:" + author, "A:Reply", "edit:fourth", "delete:fourth", "A:" + author, "A:Reply", "edit:third", "delete:third"}
	}
	if len(order) < len(want) || strings.Join(order[len(order)-len(want):], " ") != strings.Join(want, " ") {
		t.Errorf("Tab from Search goes %q, want it to end %q", order, want)
	}

	// Escape closes the editor, its text unsaved, and the focus is back on Edit.
	sel := p.messageSelector("second")
	p.do("focusing Edit", chromedp.Focus(chromedp.CSS(sel+" button[data-act=edit]")))
	press("Enter", kb.Enter)
	p.waitFor("the editor has the focus", `document.activeElement.matches('form.edit textarea')`)
	press("typing", " and more")
	press("Escape", kb.Escape)
	p.waitFor("the editor is closed", fmt.Sprintf(`!document.querySelector(%q)`, sel+" form.edit"))
	if got := p.focused(); got != "edit:second" {
		t.Errorf("after Escape in the editor the focus is on %q, want its Edit button", got)
	}

	// Escape also takes back the question whether to delete; then delete.
	p.do("focusing Delete", chromedp.Focus(chromedp.CSS(sel+" button[data-act=delete]")))
	press("Enter", kb.Enter)
	if got := p.focused(); got != "remove:second" {
		t.Errorf("Delete puts the focus on %q, want the confirming button", got)
	}
	press("Escape", kb.Escape)
	p.waitFor("the question is gone", fmt.Sprintf(`!document.querySelector(%q)`, sel+" [data-act=remove]"))
	if got := p.focused(); got != "delete:second" {
		t.Errorf("after Escape on the question the focus is on %q, want its Delete button", got)
	}
	press("Enter", kb.Enter)
	press("Enter", kb.Enter)
	p.waitFor("the message is deleted", "!"+messageJS("second"))
	if got := p.focused(); got != "edit:first" {
		t.Errorf("after the delete the focus is on %q, want the next message's Edit button", got)
	}
	// The next message is someone else's, with no buttons: it takes the
	// focus itself, rather than sending the person back to the top.
	press("Tab", kb.Tab)
	press("Enter", kb.Enter)
	press("Enter", kb.Enter)
	p.waitFor("the message is deleted", "!"+messageJS("first"))
	if got := webEval[string](p, `document.activeElement.closest('li')?.querySelector('.content')?.textContent ?? document.activeElement.id`); got != "bob's" {
		t.Errorf("after deleting the message above someone else's the focus is on %q, want that message", got)
	}

	// The skip link on the settings screen stays on it.
	p.click("#nav-settings")
	p.screen("settings")
	p.do("focusing the skip link", chromedp.Focus(chromedp.CSS(".skip")))
	press("Enter", kb.Enter)
	time.Sleep(200 * time.Millisecond) // a hashchange would have come by now
	p.screen("settings")
	if got := p.focused(); got != "main" {
		t.Errorf("after the skip link the focus is on %q, want the main content", got)
	}
}

// TestWebClientSignsInWhenTheServerAnswers: a page opened with a saved
// token while the server answers "not now" (a restart behind a proxy, a
// maintenance page) shows the login screen and says it will sign in once
// the server answers; then it does, without a reload or the password.
func TestWebClientSignsInWhenTheServerAnswers(t *testing.T) {
	tap := &busyTap{path: "/api/me"}
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, tap.tune)
	const email, password = "ada@example.com", "correct horse battery"
	e.Register(email, password)
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login(email, password)
	ada.screen("timeline")

	// The first answer asks for 3 seconds, longer than the page's own
	// first wait of 1: the second question must not come sooner.
	var mu sync.Mutex
	var asked []time.Time
	for _, retryAfter := range []string{"3", "1"} {
		tap.push(func(w http.ResponseWriter) {
			mu.Lock()
			asked = append(asked, time.Now())
			mu.Unlock()
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		})
		ada.expect(http.StatusServiceUnavailable, "/api/me")
	}
	ada.do("reloading", chromedp.Reload())
	ada.screen("auth")
	ada.waitFor("the page says it will sign in", `document.querySelector('#notice').textContent !== ''`)
	if got, want := ada.text("#notice"), "The server is busy or down for maintenance. You will be signed in as soon as it answers."; got != want {
		t.Errorf("with the server busy the page says %q, want %q", got, want)
	}
	ada.screen("timeline")
	if got := ada.text("#whoami"); !strings.HasPrefix(got, "Signed in as ") || !strings.Contains(got, email) {
		t.Errorf("signed in as %q", got)
	}
	tap.mu.Lock()
	left := len(tap.queue)
	tap.mu.Unlock()
	if left != 0 {
		t.Errorf("%d of the busy answers were never asked for", left)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) == 2 && asked[1].Sub(asked[0]) < 2500*time.Millisecond {
		t.Errorf("the page asked again %v after a Retry-After of 3 seconds", asked[1].Sub(asked[0]).Round(time.Millisecond))
	}
}

// TestWebClientKeepsEditsAcrossSessions: editors open when the session
// ends under them (here, the token signed out from elsewhere) come back,
// with what was typed, when the same person logs in again in the tab: one
// on page one, and one on a page the page loads again to reach it. Each
// keeps the version its text was written against, so the one whose
// message was changed elsewhere meanwhile refuses to overwrite that
// change, and the other saves.
func TestWebClientKeepsEditsAcrossSessions(t *testing.T) {
	e, _ := apitest.Serve(t, apitest.OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), nil), heraldhttp.Config{}, nil)
	const email, password = "ada@example.com", "correct horse battery"
	ada := e.Register(email, password)
	bob := e.Register("bob@example.com", "staple battery horse")
	const old, recent = "Ada's old message", "Ada's recent message"
	oldID := e.Post(ada, old)["id"].(float64)
	for i := range 25 {
		e.Post(bob, fmt.Sprintf("Bob's message %d", i))
	}
	recentID := e.Post(ada, recent)["id"].(float64)
	const doomed, doomedText = "Ada's message, soon deleted", "Words worth keeping"
	doomedID := e.Post(ada, doomed)["id"].(float64)

	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	p.login(email, password)
	p.liveOn()
	p.waitFor("page one is shown", `document.querySelectorAll('#messages > li').length === 20 && !document.querySelector('#more').hidden`)
	p.do("pressing the older button", chromedp.Focus(chromedp.CSS("#more")), chromedp.KeyEvent(kb.Enter))
	oldSel, recentSel, doomedSel := p.messageSelector(old), p.messageSelector(recent), p.messageSelector(doomed)
	const oldText, recentText = "Ada's old message, rewritten", "Ada's recent message, rewritten"
	for _, ed := range []struct{ sel, text string }{{oldSel, oldText}, {recentSel, recentText}, {doomedSel, doomedText}} {
		p.click(ed.sel + " button[data-act=edit]")
		p.waitFor("the editor is open", fmt.Sprintf(`document.querySelector(%q)`, ed.sel+" form.edit"))
		p.fill(ed.sel+" form.edit textarea", ed.text)
	}

	p.expect(http.StatusUnauthorized, "/api/messages/stream")
	token := webEval[string](p, `sessionStorage.getItem('herald.token')`)
	if res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/logout", Token: token}); res.Status != http.StatusNoContent {
		t.Fatalf("logging Ada's page out: status %d: %s", res.Status, res.Body)
	}
	p.screen("auth")
	// Changed and deleted elsewhere while she is away.
	phone := e.Login(email, password)
	e.Patch(phone, recentID, "Ada's recent message, changed on her phone")
	e.Remove(phone, doomedID)

	p.login(email, password)
	for _, ed := range []struct{ sel, text string }{{oldSel, oldText}, {recentSel, recentText}} {
		p.waitFor("the editor is open again", fmt.Sprintf(`document.querySelector(%q)`, ed.sel+" form.edit"))
		if got := webEval[string](p, fmt.Sprintf(`document.querySelector(%q).value`, ed.sel+" form.edit textarea")); got != ed.text {
			t.Errorf("the editor opened again holds %q, want %q", got, ed.text)
		}
	}
	// The deleted message's edit cannot be reopened: its text is said.
	if got := p.formError("#post-form"); !strings.Contains(got, doomedText) {
		t.Errorf("the edit of a deleted message left the post form saying %q, want its text", got)
	}
	p.expect(http.StatusPreconditionFailed, fmt.Sprintf("/api/messages/%d", int(recentID)))
	p.click(recentSel + " button[data-act=save]")
	p.waitFor("the save is refused", fmt.Sprintf(`document.querySelector(%q).textContent !== ''`, recentSel+" form.edit .form-error"))
	if got := p.text(recentSel + " form.edit .form-error"); !strings.Contains(got, "changed elsewhere") {
		t.Errorf("saving over a change made elsewhere says %q", got)
	}
	p.click(oldSel + " button[data-act=save]")
	p.waitFor("the old message is saved", messageJS(oldText))
	if got := e.Do(apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/messages/%d", int(oldID)), Token: ada}).JSON(t)["content"]; got != oldText {
		t.Errorf("the store holds %q for the old message, want %q", got, oldText)
	}
}
