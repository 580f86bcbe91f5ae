package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herald/http/internal/apitest"
	"herald/http/internal/browsertest"
)

// axeFile is axe-core as pinned by tools/package-lock.json; .ci/run
// installs it with npm ci.
const axeFile = "../../tools/node_modules/axe-core/axe.min.js"

// loadAxe returns axe-core's source, or skips (fails under
// HERALD_REQUIRE_BROWSER=1) when it is not installed.
func loadAxe(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(axeFile)
	if err == nil {
		return string(b)
	}
	msg := fmt.Sprintf("%s is missing (cd tools && npm ci)", axeFile)
	if os.Getenv(browsertest.RequireEnv) == "1" {
		t.Fatalf("%s, and %s=1 requires the accessibility check", msg, browsertest.RequireEnv)
	}
	t.Skipf("%s: skipping the web client's browser test; set %s=1 to fail instead", msg, browsertest.RequireEnv)
	return ""
}

// webBrowser is one headless Chromium for a test; each person in it gets a
// browser context of their own, so nobody shares storage or a token.
type webBrowser struct {
	t       *testing.T
	ctx     context.Context
	server  string
	shots   string
	axe     string
	persons []*webPerson
}

func newWebBrowser(t *testing.T, server string) *webBrowser {
	t.Helper()
	chromium := browsertest.FindChromium(t)
	axe := loadAxe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	// Start the browser: a new browser context needs a running one.
	// Chromium once failed to come up at all in CI, before any page
	// (chromedp: "chrome failed to start"); that is the machine's, not
	// the client's, so a second start is allowed, and said.
	var bctx context.Context
	for attempt := 1; ; attempt++ {
		allocCtx, cancelAlloc := browsertest.NewAllocator(ctx, chromium, 1280, 900)
		c, cancelBrowser := chromedp.NewContext(allocCtx)
		err := chromedp.Do(c)
		if err == nil {
			t.Cleanup(cancelAlloc)
			t.Cleanup(cancelBrowser)
			bctx = c
			break
		}
		cancelBrowser()
		cancelAlloc()
		if attempt == 2 {
			t.Fatalf("starting chromium: %v", err)
		}
		t.Logf("starting chromium failed, starting it again: %v", err)
	}
	b := &webBrowser{t: t, ctx: bctx, server: server, shots: browsertest.ScreenshotDir(t), axe: axe}
	// Checked last, after every step: what went wrong in a page that the
	// steps themselves did not look at.
	t.Cleanup(b.checkPages)
	return b
}

// webPerson is one person at their own browser.
type webPerson struct {
	b     *webBrowser
	t     *testing.T
	name  string
	ctx   context.Context
	watch *browsertest.PageWatch
	// expected are refusals the scenario provokes on purpose ("409
	// /api/register"); the browser logs each as an error, and any other is
	// a failure.
	expected []string
	// tolerated are failures the scenario provokes any number of times
	// ("net::ERR_CONNECTION_REFUSED /api/messages/stream" while the server
	// is down, retried on a backoff with jitter).
	tolerated []string
}

// tab opens another tab of the same person: the same browser context, so
// the same localStorage, as when someone opens the client twice.
func (p *webPerson) tab(name string) *webPerson {
	p.t.Helper()
	// A context made from p's inherits p's browser context.
	return p.b.open(name, p.b.server+"/", p.ctx)
}

func (b *webBrowser) person(name string) *webPerson {
	return b.personAt(name, b.server+"/")
}

// personAt is person with the client opened at address, such as a link
// the API made ("/#reset=...").
func (b *webBrowser) personAt(name, address string) *webPerson {
	return b.open(name, address, b.ctx, chromedp.WithNewBrowserContext())
}

// open opens a tab on the client at address under a context made from
// parent.
func (b *webBrowser) open(name, address string, parent context.Context, opts ...chromedp.ContextOption) *webPerson {
	b.t.Helper()
	// The settings screen asks for the server's push key, and a server
	// without push answers 404: how the page learns push is off, which the
	// browser logs as a failed load all the same.
	p := &webPerson{b: b, t: b.t, name: name, watch: &browsertest.PageWatch{}, tolerated: []string{"404 /api/push/key"}}
	ctx, cancel := chromedp.NewContext(parent, append(opts, chromedp.WithListener(p.watch.Listen))...)
	b.t.Cleanup(cancel)
	p.ctx = ctx
	b.persons = append(b.persons, p)
	// The first run opens the tab, which lives as long as the context it
	// ran in: that must be ctx, not do's shorter one.
	if err := chromedp.Do(ctx); err != nil {
		b.t.Fatalf("opening a tab for %s: %v", name, err)
	}
	p.do("opening the client", chromedp.Navigate(address))
	return p
}

// do runs steps, failing the test with a screenshot at the first error.
func (p *webPerson) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	// A step that cannot happen fails in seconds, not at the test's end.
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.shoot("failed-" + p.name + ".png")
		p.describe()
		p.t.Fatalf("%s, %s: %v", p.name, what, err)
	}
}

// pageStateJS is what a failed step logs of the page besides its
// screenshot: what the timeline holds and says, which a rare failure on a
// loaded machine cannot be run again to see.
const pageStateJS = `JSON.stringify({
	items: document.querySelectorAll('#messages > li').length,
	busy: document.querySelector('#messages')?.getAttribute('aria-busy'),
	moreHidden: document.querySelector('#more')?.hidden,
	moreTop: document.querySelector('#more')?.getBoundingClientRect().top,
	innerHeight, scrollY, scrollHeight: document.body.scrollHeight,
	live: document.querySelector('#live')?.textContent,
	notice: document.querySelector('#notice')?.textContent,
	errors: [...document.querySelectorAll('.form-error')].map(e => e.textContent).filter(Boolean),
})`

// describe logs the page's state and every request it made, as far as a
// page that may be stuck still answers.
func (p *webPerson) describe() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if state, err := chromedp.Run(ctx, chromedp.Evaluate[string](pageStateJS)); err == nil {
		p.t.Logf("%s's page: %s", p.name, state)
	}
	requests, problems := p.watch.Snapshot()
	p.t.Logf("%s's page requested, in order:\n\t%s", p.name, strings.Join(requests, "\n\t"))
	if len(problems) > 0 {
		p.t.Logf("%s's page reported:\n\t%s", p.name, strings.Join(problems, "\n\t"))
	}
}

// waitFor polls a JavaScript condition until it holds.
func (p *webPerson) waitFor(what, cond string) {
	p.t.Helper()
	p.do("waiting until "+what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(15*time.Second)))
}

// eval runs a JavaScript expression and decodes its value.
func webEval[T any](p *webPerson, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		p.shoot("failed-" + p.name + ".png")
		p.describe()
		p.t.Fatalf("%s, evaluating %s: %v", p.name, js, err)
	}
	return v
}

func (p *webPerson) shoot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(p.b.shots, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Errorf("saving screenshot: %v", err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

// The page's state, read the way a person reads it.

// messageJS finds the timeline's item whose text is content.
func messageJS(content string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('#messages > li')].find(li => li.querySelector('.content')?.textContent === %q)`, content)
}

// liveOn waits until the page says its live stream is open.
func (p *webPerson) liveOn() {
	p.t.Helper()
	p.waitFor("live updates are on", `document.querySelector('#live').textContent === 'Live updates are on.'`)
}

// timelineContents lists the messages shown, top to bottom.
func (p *webPerson) timelineContents() []string {
	return webEval[[]string](p, `[...document.querySelectorAll('#messages > li .content')].map(e => e.textContent)`)
}

// messageSelector is a CSS selector for the shown message with content.
func (p *webPerson) messageSelector(content string) string {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%q is shown", content), messageJS(content))
	id := webEval[string](p, messageJS(content)+`.dataset.id`)
	return fmt.Sprintf(`#messages > li[data-id="%s"]`, id)
}

func (p *webPerson) text(sel string) string {
	p.t.Helper()
	return webEval[string](p, fmt.Sprintf(`document.querySelector(%q)?.textContent.trim() ?? ''`, sel))
}

// fill replaces a field's value by typing into it.
func (p *webPerson) fill(sel, value string) {
	p.t.Helper()
	p.do("filling "+sel,
		chromedp.WaitVisible(chromedp.CSS(sel)),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).value = ''`, sel)),
		chromedp.SendKeys(chromedp.CSS(sel), value))
}

func (p *webPerson) click(sel string) {
	p.t.Helper()
	p.do("clicking "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// screen waits until the named view (auth, timeline, settings) is the one
// shown.
func (p *webPerson) screen(name string) {
	p.t.Helper()
	p.waitFor("the "+name+" screen shows", fmt.Sprintf(`!document.querySelector('#%s-view').hidden && document.querySelector('#loading').hidden`, name))
}

func (p *webPerson) register(email, password string, remember bool) {
	p.t.Helper()
	p.fill("#register-email", email)
	p.fill("#register-password", password)
	if remember {
		p.click("#register-remember")
	}
	p.click("#register-form button[type=submit]")
	p.screen("timeline")
}

func (p *webPerson) login(email, password string) {
	p.t.Helper()
	p.fill("#login-email", email)
	p.fill("#login-password", password)
	p.click("#login-form button[type=submit]")
	p.screen("timeline")
}

func (p *webPerson) post(content string) {
	p.t.Helper()
	p.fill("#post-content", content)
	p.click("#post-form button[type=submit]")
	p.waitFor(fmt.Sprintf("%q is shown", content), messageJS(content))
}

// search runs the search form with the given words and owner.
func (p *webPerson) search(q, owner string) {
	p.t.Helper()
	p.fill("#search-q", q)
	p.fill("#search-owner", owner)
	p.click("#search-form button[type=submit]")
	p.waitFor("the search is done", `!document.querySelector('#messages').hasAttribute('aria-busy') && !document.querySelector('#search-form button').disabled`)
}

// formError is what a form's alert region says.
func (p *webPerson) formError(form string) string {
	return p.text(form + " .form-error")
}

// expect notes a refusal the scenario is about to provoke.
func (p *webPerson) expect(status int, path string) {
	p.expected = append(p.expected, fmt.Sprintf("%d %s", status, path))
}

// expectBroken notes a response the scenario is about to cut short, which
// the browser logs as the network error netErr
// ("net::ERR_INCOMPLETE_CHUNKED_ENCODING").
func (p *webPerson) expectBroken(netErr, path string) {
	p.expected = append(p.expected, netErr+" "+path)
}

// tolerate notes a failure the scenario provokes an unknown number of
// times, such as a refused connection ("net::ERR_CONNECTION_REFUSED").
func (p *webPerson) tolerate(failure, path string) {
	p.tolerated = append(p.tolerated, failure+" "+path)
}

// axeCheck runs axe-core on what the page shows now and fails on any
// serious or critical violation; lesser ones are logged.
func (p *webPerson) axeCheck(screen string) {
	p.t.Helper()
	if !webEval[bool](p, `typeof axe === 'object'`) {
		// Evaluated through the DevTools protocol, which the page's CSP
		// does not govern; the page itself could not load it.
		p.do("injecting axe-core", chromedp.Evaluate[chromedp.Void](p.b.axe))
	}
	type violation struct {
		ID, Impact, Help string
		Nodes            []string
	}
	vs := webEval[[]violation](p, `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({
		id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ') + ': ' + n.failureSummary)})))`)
	for _, v := range vs {
		msg := fmt.Sprintf("axe on the %s screen: %s (%s): %s\n\t%s", screen, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n\t"))
		if v.Impact == "serious" || v.Impact == "critical" {
			p.t.Error(msg)
		} else {
			p.t.Log(msg)
		}
	}
	p.t.Logf("axe on the %s screen: %d violations, none serious or critical unless reported above", screen, len(vs))
}

// refusedLoad is how Chromium logs a response with an error status, and
// brokenLoad one that failed on the way, such as a connection cut.
var (
	refusedLoad = regexp.MustCompile(`^network error: Failed to load resource: the server responded with a status of (\d+) .* (https?://\S+)$`)
	brokenLoad  = regexp.MustCompile(`^network error: Failed to load resource: (net::\S+) (https?://\S+)$`)
)

// checkPages fails on anything a page reported that the scenario did not
// provoke: script exceptions, CSP violations, refused requests. And no
// page may have asked another host for anything.
func (b *webBrowser) checkPages() {
	server, err := url.Parse(b.server)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, p := range b.persons {
		requests, problems := p.watch.Snapshot()
		expected := append([]string(nil), p.expected...)
		for _, pr := range problems {
			m := refusedLoad.FindStringSubmatch(pr)
			if m == nil {
				m = brokenLoad.FindStringSubmatch(pr)
			}
			if m != nil {
				u, err := url.Parse(m[2])
				key := m[1] + " " + u.Path
				if i := indexOf(expected, key); err == nil && i >= 0 {
					expected = append(expected[:i], expected[i+1:]...)
					continue
				}
				if err == nil && indexOf(p.tolerated, key) >= 0 {
					continue
				}
			}
			b.t.Errorf("%s's page reported %s", p.name, pr)
		}
		if len(requests) == 0 {
			b.t.Errorf("%s's page made no requests at all; the network listener is not working", p.name)
		}
		for _, raw := range requests {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "data" && u.Host != server.Host) {
				b.t.Errorf("%s's page requested another host: %s", p.name, raw)
			}
			if err == nil && u.Host == server.Host && u.Path == "/x" {
				b.t.Errorf("%s's page requested %s: a message's markup was taken for HTML", p.name, raw)
			}
		}
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// TestWebClientBrowser drives the web client as two people would, each in
// a browser context of their own: registering, logging out and in, posting,
// searching, editing and deleting their own messages and finding no
// controls on the other's, hostile content shown as text, the keyboard
// alone, a phone-sized screen, dark mode, the account settings, and axe's
// accessibility check on each main screen.
func TestWebClientBrowser(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	const (
		adaEmail, adaPassword = "ada@example.com", "correct horse battery"
		bobEmail, bobPassword = "bob@example.com", "staple battery horse"
	)

	// Ada arrives: the login screen, checked and photographed.
	ada := b.person("ada")
	ada.screen("auth")
	ada.axeCheck("login")
	ada.shoot("web-login.png")

	// A refused registration shows the server's own words: the field at
	// fault, and a duplicate e-mail.
	ada.expect(http.StatusUnprocessableEntity, "/api/register")
	ada.fill("#register-email", adaEmail)
	ada.fill("#register-password", "        ")
	ada.click("#register-form button[type=submit]")
	ada.waitFor("the refusal shows", `document.querySelector('#register-form .form-error').textContent !== ''`)
	if got := ada.formError("#register-form"); !strings.Contains(got, "Password:") {
		t.Errorf("a password of spaces: the form says %q, want the violation of password", got)
	}
	if got := webEval[string](ada, `document.querySelector('#register-password').getAttribute('aria-invalid')`); got != "true" {
		t.Errorf("the password field's aria-invalid = %q, want true", got)
	}

	// Ada registers, logs out, and logs in again; her token is kept for
	// the tab only.
	ada.register(adaEmail, adaPassword, false)
	// Her first page is asked for after the screen shows; logging out
	// before it is answered gets it refused (401), on PostgreSQL's slower
	// reads now and then.
	ada.waitFor("her empty timeline has loaded", `!document.querySelector('#empty').hidden`)
	ada.click("#logout")
	ada.screen("auth")
	if got := ada.text("#notice"); got != "You are logged out." {
		t.Errorf("after logging out the page says %q", got)
	}
	ada.expect(http.StatusUnauthorized, "/api/login")
	ada.fill("#login-email", adaEmail)
	ada.fill("#login-password", "not her password")
	ada.click("#login-form button[type=submit]")
	ada.waitFor("the refusal shows", `document.querySelector('#login-form .form-error').textContent !== ''`)
	if got, want := ada.formError("#login-form"), "E-mail or password is incorrect."; got != want {
		t.Errorf("a wrong password: the form says %q, want %q", got, want)
	}
	ada.login(adaEmail, adaPassword)
	if got := webEval[string](ada, `(sessionStorage.getItem('herald.token') ? 'session' : '') + (localStorage.getItem('herald.token') ? 'local' : '')`); got != "session" {
		t.Errorf("without remember me the token is kept in %q, want session storage only", got)
	}
	if got := ada.text("#whoami"); !strings.Contains(got, adaEmail) {
		t.Errorf("the header says %q, want Ada's e-mail", got)
	}

	// Bob registers in his own browser context, asking to be remembered.
	bob := b.person("bob")
	bob.screen("auth")
	bob.register(bobEmail, bobPassword, true)
	if got := webEval[string](bob, `(sessionStorage.getItem('herald.token') ? 'session' : '') + (localStorage.getItem('herald.token') ? 'local' : '')`); got != "local" {
		t.Errorf("with remember me the token is kept in %q, want local storage only", got)
	}

	// Ada posts; Bob sees it (from a search here; live arrival is
	// TestWebClientLive's) with no controls, while his own have them.
	const adaFirst = "Hello from Ada: the kettle is on"
	ada.post(adaFirst)
	const bobFirst = "Bob says hello back"
	bob.post(bobFirst)
	bob.search("", "")
	adaMsg := bob.messageSelector(adaFirst)
	if n := webEval[int](bob, fmt.Sprintf(`document.querySelectorAll(%q).length`, adaMsg+" button")); n != 0 {
		t.Errorf("Bob sees %d buttons on Ada's message, want none", n)
	}
	if got := bob.text(adaMsg + " .meta"); !strings.Contains(got, adaEmail) {
		t.Errorf("Ada's message shows its author as %q, without her e-mail", got)
	}
	bobMsg := bob.messageSelector(bobFirst)
	for _, act := range []string{"edit", "delete"} {
		if n := webEval[int](bob, fmt.Sprintf(`document.querySelectorAll(%q).length`, bobMsg+` button[data-act=`+act+`]`)); n != 1 {
			t.Errorf("Bob's own message has %d %s buttons, want 1", n, act)
		}
	}

	// Hostile content is shown as the text it is, and runs nothing.
	const hostile = `<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> <b>bold?</b>`
	ada.post(hostile)
	hostileSel := ada.messageSelector(hostile)
	if n := webEval[int](ada, fmt.Sprintf(`document.querySelectorAll(%q).length`, hostileSel+" .content *")); n != 0 {
		t.Errorf("the hostile message became %d elements", n)
	}
	if got := webEval[string](ada, `String(window.pwned)`); got != "undefined" {
		t.Errorf("the hostile message ran script: window.pwned = %s", got)
	}

	// Right-to-left text takes its own direction, in the list and in the
	// boxes people type it into, so its punctuation and alignment come out
	// as its readers expect; left-to-right text keeps its own.
	const arabic = "مرحبا بالعالم!"
	ada.post(arabic)
	for content, want := range map[string]string{arabic: "rtl", hostile: "ltr"} {
		el := ada.messageSelector(content) + " .content"
		if got := webEval[string](ada, fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).direction`, el)); got != want {
			t.Errorf("the message %q is shown %s, want %s", content, got, want)
		}
	}
	for _, box := range []string{"#post-content", "#search-q"} {
		if got := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q).dir`, box)); got != "auto" {
			t.Errorf("%s has dir %q, want auto: text typed into it takes its own direction", box, got)
		}
	}

	// Ada edits her first message: the form opens with its text, Save
	// stores the new one, and the store agrees.
	const adaEdited = "Hello from Ada: the tea is ready"
	e.Clock.Advance(time.Minute) // the server's clock stands still otherwise
	sel := ada.messageSelector(adaFirst)
	ada.click(sel + " button[data-act=edit]")
	ada.do("waiting for the edit form", chromedp.WaitVisible(chromedp.CSS(sel+" form.edit textarea")))
	if got := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q).value`, sel+" form.edit textarea")); got != adaFirst {
		t.Errorf("the edit form holds %q, want %q", got, adaFirst)
	}
	if got := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q).dir`, sel+" form.edit textarea")); got != "auto" {
		t.Errorf("the edit box has dir %q, want auto", got)
	}
	ada.fill(sel+" form.edit textarea", adaEdited)
	ada.click(sel + " button[data-act=save]")
	ada.waitFor("the edit is saved", messageJS(adaEdited))
	if got := ada.text(sel + " .meta"); !strings.Contains(got, "edited") {
		t.Errorf("an edited message's header says %q, want it marked edited", got)
	}
	token := e.Login(adaEmail, adaPassword)
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=tea", Token: token})
	if !strings.Contains(string(res.Body), adaEdited) {
		t.Errorf("the store does not hold the edit: %s", res.Body)
	}

	// Search, by words and by owner.
	ada.post("Ada's second note, about tea as well")
	ada.search("tea", "")
	if got := ada.timelineContents(); len(got) != 2 || got[0] != "Ada's second note, about tea as well" || got[1] != adaEdited {
		t.Errorf("searching tea shows %q", got)
	}
	ada.search("", bobEmail)
	if got := ada.timelineContents(); len(got) != 1 || got[0] != bobFirst {
		t.Errorf("searching Bob's messages shows %q", got)
	}
	ada.search("hello", adaEmail)
	if got := ada.timelineContents(); len(got) != 1 || got[0] != adaEdited {
		t.Errorf("searching Ada's hello shows %q", got)
	}
	ada.search("coffee", "")
	if got := ada.timelineContents(); len(got) != 0 || !webEval[bool](ada, `!document.querySelector('#empty').hidden`) {
		t.Errorf("searching coffee shows %q and no 'no messages'", got)
	}
	// The stream refuses the same filters as the search.
	ada.expect(http.StatusBadRequest, "/api/messages")
	ada.expect(http.StatusBadRequest, "/api/messages/stream")
	ada.search("!!!", "")
	if got := ada.formError("#search-form"); got == "" {
		t.Error("a search with no word shows no error")
	}
	ada.click("#search-clear")
	ada.waitFor("the timeline is back", messageJS(bobFirst))

	// An edit never overwrites a change made elsewhere since the form
	// opened: Save is refused with the reason, and Cancel shows the change.
	const secondNote, elsewhere = "Ada's second note, about tea as well", "Ada's second note, changed on her phone"
	sel = ada.messageSelector(secondNote)
	id := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q).dataset.id`, sel))
	ada.click(sel + " button[data-act=edit]")
	ada.do("waiting for the edit form", chromedp.WaitVisible(chromedp.CSS(sel+" form.edit textarea")))
	if res := e.Do(apitest.Request{Method: "PATCH", Path: "/api/messages/" + id, Token: token, ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"content": elsewhere})}); res.Status != http.StatusOK {
		t.Fatalf("editing elsewhere: status %d: %s", res.Status, res.Body)
	}
	ada.expect(http.StatusPreconditionFailed, "/api/messages/"+id)
	ada.fill(sel+" form.edit textarea", "Ada's second note, overwritten")
	ada.click(sel + " button[data-act=save]")
	ada.waitFor("the refusal shows", fmt.Sprintf(`document.querySelector(%q).textContent !== ''`, sel+" .form-error"))
	if got := ada.text(sel + " .form-error"); !strings.Contains(got, "changed elsewhere") {
		t.Errorf("a conflicting edit: the form says %q", got)
	}
	ada.click(sel + " button[data-act=cancel]")
	ada.waitFor("the change made elsewhere shows", messageJS(elsewhere))

	// Ada deletes her edited message, confirming first.
	sel = ada.messageSelector(adaEdited)
	ada.click(sel + " button[data-act=delete]")
	ada.click(sel + " button[data-act=remove]")
	ada.waitFor("the message is gone", "!"+messageJS(adaEdited))
	if got := e.Counts().Messages; got != 4 {
		t.Errorf("the store holds %d messages after the delete, want 4", got)
	}
	bob.search("", "")
	if got := bob.timelineContents(); strings.Contains(strings.Join(got, "\n"), adaEdited) {
		t.Errorf("Bob still sees the deleted message: %q", got)
	}

	// The keyboard alone: from the top of a freshly loaded page, Tab
	// reaches the post box; typing and Enter post.
	ada.do("reloading", chromedp.Reload())
	ada.screen("timeline")
	if got := webEval[string](ada, `document.activeElement.tagName`); got != "BODY" {
		t.Errorf("a fresh page starts with focus on %s, want the top of the page", got)
	}
	tabs := 0
	for ; tabs < 30 && webEval[string](ada, `document.activeElement?.id ?? ''`) != "post-content"; tabs++ {
		ada.do("pressing Tab", chromedp.KeyEvent(kb.Tab))
	}
	if tabs == 30 {
		t.Fatalf("30 presses of Tab never reached the post box")
	}
	t.Logf("the post box is %d presses of Tab from the top", tabs)
	const typed = "Typed and sent with the keyboard alone"
	ada.do("typing", chromedp.KeyEvent(typed), chromedp.KeyEvent(kb.Enter))
	ada.waitFor("the typed message is shown", messageJS(typed))
	if got := webEval[string](ada, `document.activeElement.id`); got != "post-content" {
		t.Errorf("after posting, focus is on %q, want the post box", got)
	}

	// The main screens, checked and photographed; the desktop timeline is
	// the picture of the README and docs/web-client.md.
	ada.axeCheck("timeline")
	ada.do("framing the picture of the README",
		chromedp.EmulateViewport(1024, 1000),
		chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); scrollTo(0, 0)`))
	ada.shoot("web-client.png")
	ada.do("back to the window's size", chromedp.ResetViewport())
	ada.do("dark mode", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}))
	if got := webEval[string](ada, `getComputedStyle(document.body).backgroundColor`); got != "rgb(17, 20, 24)" {
		t.Errorf("in dark mode the page's background is %s", got)
	}
	ada.axeCheck("timeline, dark")
	ada.shoot("web-timeline-dark.png")

	// A phone: the timeline fits 390 pixels without sideways scrolling, even
	// with a word and a link far wider than the screen.
	long := strings.Repeat("unbreakable", 30) + " https://example.com/" + strings.Repeat("a/very/long/path/", 20)
	ada.post(long)
	bob.do("a phone-sized screen", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Reload())
	bob.screen("timeline")
	bob.waitFor("the timeline is shown", messageJS(typed))
	bob.waitFor("the long message is shown", messageJS(long))
	if w := webEval[int](bob, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 pixels the page is %d wide", w)
	}
	bob.axeCheck("timeline, phone")
	bob.shoot("web-phone.png")

	// Settings: Ada's devices, one signed out from here.
	e.Clock.Advance(time.Minute)
	second := e.Login(adaEmail, adaPassword) // the newest of Ada's devices
	ada.click("#nav-settings")
	ada.screen("settings")
	ada.waitFor("the devices are listed", `document.querySelectorAll('#devices li').length === 3`)
	if got := webEval[int](ada, `[...document.querySelectorAll('#devices li')].filter(li => li.textContent.includes('This device')).length`); got != 1 {
		t.Errorf("%d devices are marked as this one, want 1", got)
	}
	ada.do("light mode", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
		return err
	}))
	ada.axeCheck("settings")
	ada.shoot("web-settings.png")
	ada.click(`#devices button[data-current="false"]`) // newest first: the second login
	ada.waitFor("the device is gone", `document.querySelectorAll('#devices li').length === 2`)
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: second}); res.Status != http.StatusUnauthorized {
		t.Errorf("the signed-out device's token still works: status %d", res.Status)
	}
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: token}); res.Status != http.StatusOK {
		t.Errorf("another device's token stopped working: status %d", res.Status)
	}

	// A wrong current password is refused in the form, without ending the
	// session; the right one changes the password.
	ada.expect(http.StatusUnauthorized, "/api/me/password")
	ada.fill("#password-current", "not her password")
	ada.fill("#password-new", "a brand new password")
	ada.click("#password-form button[type=submit]")
	ada.waitFor("the refusal shows", `document.querySelector('#password-form .form-error').textContent !== ''`)
	if got, want := ada.formError("#password-form"), "The password is incorrect."; got != want {
		t.Errorf("a wrong current password: the form says %q, want %q", got, want)
	}
	ada.screen("settings")
	ada.fill("#password-current", adaPassword)
	ada.fill("#password-new", "a brand new password")
	ada.click("#password-form button[type=submit]")
	ada.waitFor("the change is confirmed", `document.querySelector('#notice').textContent.startsWith('Password changed')`)
	ada.waitFor("the other devices are gone", `document.querySelectorAll('#devices li').length === 1`)
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: token}); res.Status != http.StatusUnauthorized {
		t.Errorf("after the password change another device's token still works: status %d", res.Status)
	}
	e.Login(adaEmail, "a brand new password")

	// Sign out everywhere: back to the login screen, every token dead.
	ada.click("#signout-all")
	ada.screen("auth")
	if got := webEval[string](ada, `sessionStorage.getItem('herald.token') ?? localStorage.getItem('herald.token') ?? ''`); got != "" {
		t.Error("after signing out everywhere the token is still stored")
	}

	// Bob deletes his account, confirming with his password.
	bob.do("back to the desktop", chromedp.EmulateViewport(1280, 900))
	bob.click("#nav-settings")
	bob.screen("settings")
	// His devices are listed after the screen shows, above the button: a
	// click aimed before they are in lands where the button no longer is.
	bob.waitFor("his devices are listed", `document.querySelectorAll('#devices li').length > 0 && !document.querySelector('#devices').hasAttribute('aria-busy')`)
	bob.click("#delete-start")
	bob.fill("#delete-password", bobPassword)
	bob.click("#delete-form button[type=submit]")
	bob.screen("auth")
	if got := bob.text("#notice"); !strings.Contains(got, "deleted") {
		t.Errorf("after deleting the account the page says %q", got)
	}
	if got := e.Counts(); got.Users != 1 || got.Messages != 5 {
		t.Errorf("after Bob left the store holds %d users and %d messages, want 1 and 5", got.Users, got.Messages)
	}
}

// TestWebClientSSEParser runs the client's Server-Sent Events parser in
// the browser on the awkward parts of the format: line endings of every
// kind split across chunks, comments, multi-line data, an id that carries
// over, a retry: line, and an event with a type and no data.
func TestWebClientSSEParser(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	p := b.person("parser")
	p.screen("auth")
	chunks := []string{
		"retry: 3000\nid: 4\n: connected\n\n",
		"id: 5\r", "\nevent: message.cr", "eated\r\ndata: {\"id\":1}\r\n\r", "\n",
		"data: first\ndata:second\n\n",
		": keep-alive\n\n",
		"event: reset\n\n",
		"data: x\rdata: y\r\r", "id: 6\nevent: message.deleted\ndata: {\"id\":1}\n\n",
		"id\nunknown: field\ndata\n\n",
	}
	js, err := jsonString(chunks)
	if err != nil {
		t.Fatal(err)
	}
	got := webEval[string](p, `import(document.querySelector('script[type=module]').src.replace('app.js', 'stream.js')).then(m => {
		const out = [];
		const feed = m.sseParser(e => out.push(e));
		for (const c of `+js+`) feed(c);
		return JSON.stringify(out);
	})`)
	want := `[{"retry":3000},{"id":"4"},` +
		`{"type":"message.created","data":"{\"id\":1}","id":"5"},` +
		`{"type":"message","data":"first\nsecond","id":"5"},` +
		`{"type":"reset","data":"","id":"5"},` +
		`{"type":"message","data":"x\ny","id":"5"},` +
		`{"type":"message.deleted","data":"{\"id\":1}","id":"6"},` +
		`{"type":"message","data":"","id":""}]`
	if got != want {
		t.Errorf("parsed\n%s\nwant\n%s", got, want)
	}
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestWebClientScroll: the timeline pages on the search cursor as the
// reader scrolls down, newest first, each message once, until there is
// no next page; the "older" button does the same from the keyboard.
func TestWebClientScroll(t *testing.T) {
	e := apitest.New(t)
	const email, password = "ada@example.com", "correct horse battery"
	token := e.Register(email, password)
	const total = 45 // two full pages of 20 and a part
	for i := 1; i <= total; i++ {
		e.Post(token, fmt.Sprintf("message number %d", i))
	}
	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	p.login(email, password)
	p.waitFor("the first page is shown", `document.querySelectorAll('#messages > li').length === 20`)
	if got := p.timelineContents()[0]; got != fmt.Sprintf("message number %d", total) {
		t.Errorf("the newest message shown is %q", got)
	}

	// The keyboard's way to the second page.
	p.do("pressing the older button", chromedp.Focus(chromedp.CSS("#more")), chromedp.KeyEvent(kb.Enter))
	p.waitFor("the second page is shown", `document.querySelectorAll('#messages > li').length >= 40`)

	// Scrolling brings the rest.
	p.do("scrolling to the end", chromedp.Evaluate[chromedp.Void](`scrollTo(0, document.body.scrollHeight)`))
	p.waitFor("every message is shown", `document.querySelectorAll('#messages > li').length === 45 && document.querySelector('#more').hidden`)
	got := p.timelineContents()
	for i, content := range got {
		if want := fmt.Sprintf("message number %d", total-i); content != want {
			t.Fatalf("message %d of the timeline is %q, want %q", i, content, want)
		}
	}
}
