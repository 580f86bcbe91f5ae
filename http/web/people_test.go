package web_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"herald/http/internal/apitest"
)

// The web client's side of people talking to each other: names, handles
// and profiles, links in content, relative times, notices that go, a
// compact composer and header, replies and notifications.

// domModule is a JavaScript expression for the client's dom.js module.
const domModule = `import(document.querySelector('script[type=module]').src.replace('app.js', 'dom.js'))`

// TestWebClientProfile: a person changes their name and handle in the
// settings, a taken or malformed handle refused at the field in the
// server's words; a profile screen shows anyone's name, handle and since
// when, and says so when nobody has the handle.
func TestWebClientProfile(t *testing.T) {
	e := apitest.New(t)
	e.Register("bob@example.com", apitest.Password)
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.register("ada@example.com", apitest.Password, false)

	ada.click("#nav-settings")
	ada.screen("settings")
	ada.waitFor("her handle is filled in", `document.querySelector('#profile-handle-input').value === 'ada'`)
	if got := webEval[string](ada, `document.querySelector('#profile-name').value`); got != "ada" {
		t.Errorf("the name field holds %q, want her name, which is her handle until she chooses one", got)
	}
	ada.axeCheck("settings with the profile")

	// Someone else's handle: 409, said at the field.
	ada.expect(http.StatusConflict, "/api/me")
	ada.fill("#profile-name", "Ada Lovelace")
	ada.fill("#profile-handle-input", "bob")
	ada.click("#profile-form button[type=submit]")
	ada.waitFor("the refusal shows", `document.querySelector('#profile-form .form-error').textContent !== ''`)
	if got := ada.formError("#profile-form"); !strings.Contains(strings.ToLower(got), "handle") {
		t.Errorf("a taken handle: the form says %q, want it to name the handle", got)
	}
	if got := webEval[string](ada, `document.querySelector('#profile-handle-input').getAttribute('aria-invalid')`); got != "true" {
		t.Errorf("after a taken handle the field's aria-invalid = %q, want true", got)
	}

	// A handle the rules refuse: 422, said at the field too.
	ada.expect(http.StatusUnprocessableEntity, "/api/me")
	ada.fill("#profile-handle-input", "9lives")
	ada.click("#profile-form button[type=submit]")
	ada.waitFor("the refusal shows", `document.querySelector('#profile-form .form-error').textContent.includes('Handle')`)

	// A free one is saved, and the menu says who she is now.
	ada.fill("#profile-handle-input", "countess")
	ada.click("#profile-form button[type=submit]")
	ada.waitFor("the change is confirmed", `document.querySelector('#notice').textContent.includes('saved')`)
	if got := ada.formError("#profile-form"); got != "" {
		t.Errorf("after saving, the form still says %q", got)
	}
	if got := ada.text("#whoami"); !strings.Contains(got, "@countess") {
		t.Errorf("after the change the menu says %q", got)
	}
	token := e.Login("ada@example.com", apitest.Password)
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/users/countess", Token: token}); !strings.Contains(string(res.Body), `"Ada Lovelace"`) {
		t.Errorf("the server does not hold the change: %d %s", res.Status, res.Body)
	}

	// Bob's profile.
	ada.goTo(e.URL + "/#/users/bob")
	ada.screen("profile")
	ada.waitFor("Bob's profile shows", `document.querySelector('#profile-handle').textContent === '@bob'`)
	if got := ada.text("#profile-title"); got != "bob" {
		t.Errorf("Bob's profile is titled %q, want his name", got)
	}
	if !webEval[bool](ada, `!!document.querySelector('#profile-since time[datetime][title]')`) {
		t.Error("the profile does not say since when, with the exact time on hover")
	}
	ada.axeCheck("profile")

	// Nobody's.
	ada.expect(http.StatusNotFound, "/api/users/nobody")
	ada.goTo(e.URL + "/#/users/nobody")
	ada.waitFor("the page says nobody has it", `document.querySelector('#profile-error').textContent.includes('Nobody has the handle @nobody')`)
}

// TestWebClientLinks: http and https URLs in content are links that tell
// the browser to pass nothing on (rel), built as elements around the
// content's own text, which reads exactly as written; markup and every
// other scheme stay text, and nothing in the content runs.
func TestWebClientLinks(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.register("ada@example.com", apitest.Password, false)

	const content = `See https://example.com/a_(b)?x=1&y=2. Not javascript:alert(1), ` +
		`<a href="javascript:alert(2)">this</a> nor <img src=x onerror="window.pwned=3">; ` +
		`(http://example.org/wiki) and @nobody, whom nobody is.`
	ada.post(content)
	sel := ada.messageSelector(content) + " .content"
	if got := ada.text(sel); got != strings.TrimSpace(content) {
		t.Errorf("the message reads %q, want it as written", got)
	}
	type link struct{ Tag, Href, Rel, Text string }
	links := webEval[[]link](ada, fmt.Sprintf(`[...document.querySelector(%q).querySelectorAll('*')].map(e => ({
		tag: e.tagName, href: e.getAttribute('href') ?? '', rel: e.getAttribute('rel') ?? '', text: e.textContent}))`, sel))
	want := []link{
		{"A", "https://example.com/a_(b)?x=1&y=2", "noopener noreferrer nofollow ugc", "https://example.com/a_(b)?x=1&y=2"},
		{"A", "http://example.org/wiki", "noopener noreferrer nofollow ugc", "http://example.org/wiki"},
	}
	if fmt.Sprint(links) != fmt.Sprint(want) {
		t.Errorf("the message's elements are\n%v\nwant\n%v", links, want)
	}
	if got := webEval[string](ada, `String(window.pwned)`); got != "undefined" {
		t.Errorf("the content ran script: window.pwned = %s", got)
	}
}

// TestWebClientTimes: times say how long ago, in words, with the exact
// time on hover and for machines; they are said again as time passes.
func TestWebClientTimes(t *testing.T) {
	e := apitest.New(t)
	e.Clock.Advance(time.Since(apitest.Epoch)) // the server's clock at the browser's time
	token := e.Register("ada@example.com", apitest.Password)
	posted := e.Post(token, "Posted a moment ago")
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.login("ada@example.com", apitest.Password)
	sel := ada.messageSelector("Posted a moment ago") + " time"
	type shown struct{ Text, Datetime, Title string }
	got := webEval[shown](ada, fmt.Sprintf(`(t => ({text: t.textContent, datetime: t.dateTime, title: t.title}))(document.querySelector(%q))`, sel))
	if got.Text != "now" || got.Datetime != posted["createdAt"] || !strings.Contains(got.Title, strconv.Itoa(time.Now().Year())) {
		t.Errorf("a message posted a moment ago shows %+v, want \"now\" with its time in datetime and title", got)
	}

	// What time has passed changes.
	ada.do("making it ten minutes older", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
		`document.querySelector(%q).dateTime = new Date(Date.now() - 600000).toISOString()`, sel)))
	ada.do("looking at the page again", chromedp.Evaluate[chromedp.Void](`document.dispatchEvent(new Event('visibilitychange'))`))
	if got := ada.text(sel); got != "10 minutes ago" {
		t.Errorf("ten minutes later the message says %q", got)
	}

	// The words for each distance, from a fixed now: noon on 10 June 2026.
	words := webEval[map[string]string](ada, domModule+`.then(m => {
		const now = new Date(2026, 5, 10, 12, 0), at = (ms) => m.ago(new Date(now.getTime() + ms), now);
		const min = 60000, hour = 60 * min, day = 24 * hour;
		return {seconds: at(-20000), minutes: at(-3 * min), hours: at(-2 * hour), yesterday: at(-day - hour),
			lastNight: at(-13 * hour), days: at(-3 * day), weeks: at(-30 * day), soon: at(5 * min), later: at(2 * day)};
	})`)
	for k, want := range map[string]string{
		"seconds": "now", "minutes": "3 minutes ago", "hours": "2 hours ago", "yesterday": "yesterday",
		"lastNight": "yesterday", "days": "3 days ago", "weeks": "May 11, 2026", "soon": "in 5 minutes", "later": "in 2 days",
	} {
		if words[k] != want {
			t.Errorf("%s: %q, want %q", k, words[k], want)
		}
	}
}

// TestWebClientNotices: news ("Message posted.") goes after a few
// seconds; what the person must act on (a session that ended) stays until
// dismissed.
func TestWebClientNotices(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	bob := b.person("bob")
	bob.screen("auth")
	bob.register("bob@example.com", apitest.Password, false)
	bob.liveOn()
	bob.expect(http.StatusUnauthorized, "/api/messages/stream")
	other := e.Login("bob@example.com", apitest.Password)
	if res := e.Do(apitest.Request{Method: "DELETE", Path: "/api/me/tokens", Token: other}); res.Status != http.StatusNoContent {
		t.Fatalf("signing out everywhere: status %d", res.Status)
	}
	bob.screen("auth")
	bob.waitFor("the page says the session ended", `document.querySelector('#notice').textContent.includes('session has ended')`)

	ada := b.person("ada")
	ada.screen("auth")
	ada.register("ada@example.com", apitest.Password, false)
	ada.post("Posted, and said so")
	ada.waitFor("the page says it is posted", `document.querySelector('#notice').textContent === 'Message posted.'`)
	if ada.shown("#notice-dismiss") {
		t.Error("news has a Dismiss button")
	}
	ada.waitFor("the news goes", `document.querySelector('#notice').textContent === ''`)

	if got := bob.text("#notice"); !strings.Contains(got, "session has ended") {
		t.Errorf("as long after, Bob's page says %q, want the session's end still said", got)
	}
	bob.click("#notice-dismiss")
	bob.waitFor("the notice is dismissed", `document.querySelector('#notice').textContent === '' && document.querySelector('#notice-dismiss').hidden`)
}

// TestWebClientLayout: on a phone 360 pixels wide the header is one line
// at most 64 pixels high, whose menu holds the settings and logging out;
// the audit log breaks e-mail addresses only after their "@" or a dot,
// and the page is no wider than the screen. On a desktop at least four
// short messages are in view without scrolling. The composer is one line
// that grows with what is typed, and Ctrl+Enter posts.
func TestWebClientLayout(t *testing.T) {
	e := apitest.New(t)
	const adminEmail = "administrator.of.this.server@long-domain-name.example.com"
	const otherEmail = "someone.with.a.long.address@another-long-domain.example.org"
	admin := e.Admin(adminEmail)
	e.Register(otherEmail, apitest.Password)
	if res := e.Do(apitest.Request{Method: "PATCH", Path: "/api/admin/users/" + e.AccountID(admin, otherEmail), Token: admin,
		ContentType: "application/merge-patch+json", Body: `{"suspended": true}`}); res.Status != http.StatusOK {
		t.Fatalf("suspending: status %d: %s", res.Status, res.Body)
	}
	for i := 1; i <= 5; i++ {
		e.Post(admin, fmt.Sprintf("Short message %d", i))
	}
	b := newWebBrowser(t, e.URL)
	p := b.person("admin")

	// A desktop.
	p.do("a desktop", chromedp.EmulateViewport(1280, 800))
	p.screen("auth")
	p.login(adminEmail, apitest.Password)
	p.waitFor("the messages are shown", messageJS("Short message 1"))
	p.do("to the top", chromedp.Evaluate[chromedp.Void](`document.activeElement.blur(); scrollTo(0, 0)`))
	if n := webEval[int](p, `[...document.querySelectorAll('#messages > li')].filter(li => li.getBoundingClientRect().bottom <= innerHeight).length`); n < 4 {
		t.Errorf("at 1280×800, %d messages are in view without scrolling, want at least 4", n)
	}
	p.shoot("web-desktop-800.png")

	// The composer grows by a line with each line typed, and Ctrl+Enter posts.
	one := webEval[float64](p, `document.querySelector('#post-content').getBoundingClientRect().height`)
	p.do("typing two lines", chromedp.Focus(chromedp.CSS("#post-content")), chromedp.KeyEvent("First line"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierShift)), chromedp.KeyEvent("second line"))
	if two := webEval[float64](p, `document.querySelector('#post-content').getBoundingClientRect().height`); two < one*1.4 {
		t.Errorf("with two lines the composer is %.0f pixels high, with one %.0f: it does not grow", two, one)
	}
	p.do("Ctrl+Enter", chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	p.waitFor("the two lines are posted", messageJS("First line\nsecond line"))
	// The stream may show the message before the answer to the post empties the box.
	p.waitFor("the composer is emptied", `document.querySelector('#post-content').value === '' && !document.querySelector('#post-form button').disabled`)
	if back := webEval[float64](p, `document.querySelector('#post-content').getBoundingClientRect().height`); back > one+1 {
		t.Errorf("emptied, the composer is %.0f pixels high, want %.0f again", back, one)
	}

	// A phone.
	p.do("a phone", chromedp.EmulateViewport(360, 740, chromedp.EmulateMobile), chromedp.Reload())
	p.screen("timeline")
	p.waitFor("the messages are shown", messageJS("Short message 1"))
	if h := webEval[float64](p, `document.querySelector('header').getBoundingClientRect().height`); h > 64 {
		t.Errorf("at 360 pixels the header is %.0f pixels high, want at most 64", h)
	}
	// One line: every item of the navigation overlaps every other's height.
	if !webEval[bool](p, `(rects => rects.length === 3 && Math.max(...rects.map(r => r.top)) < Math.min(...rects.map(r => r.bottom)))(
		[...document.querySelectorAll('#nav > a, #menu-toggle')].map(e => e.getBoundingClientRect()))`) {
		t.Error("at 360 pixels the navigation takes more than one line")
	}
	if p.shown("#logout") {
		t.Error("at 360 pixels Log out is shown outside the menu")
	}
	p.axeCheck("timeline, 360 pixels")
	p.shoot("web-phone-360.png")
	p.click("#menu-toggle")
	if got := webEval[string](p, `document.querySelector('#menu-toggle').getAttribute('aria-expanded')`); got != "true" {
		t.Errorf("the open menu's button has aria-expanded %q", got)
	}
	p.do("Escape", chromedp.KeyEvent(kb.Escape))
	if p.shown("#logout") || !p.hasFocus("#menu-toggle") {
		t.Error("Escape does not close the menu and give the focus back to its button")
	}
	p.click("#menu-toggle")
	p.click("#nav-admin")
	p.screen("admin")
	p.click("#tab-audit")
	p.waitFor("the audit log is shown", `document.querySelectorAll('#audit tbody tr').length > 0`)
	// Each piece of an address between the places it may break is on one
	// line.
	broken := webEval[[]string](p, `[...document.querySelectorAll('#audit td')].flatMap(td => [...td.querySelectorAll('*'), td])
		.flatMap(e => [...e.childNodes]).filter(n => n.nodeType === 3 && n.textContent.trim() && !/\s/.test(n.textContent))
		.filter(n => { const r = document.createRange(); r.selectNodeContents(n); return r.getClientRects().length > 1; })
		.map(n => n.textContent)`)
	if len(broken) > 0 {
		t.Errorf("at 360 pixels the audit log breaks inside %q", broken)
	}
	if w := webEval[int](p, `document.documentElement.scrollWidth`); w > 360 {
		t.Errorf("at 360 pixels the administration screen is %d wide", w)
	}
	p.axeCheck("audit log, 360 pixels")
	p.shoot("web-audit-360.png")
	p.click("#menu-toggle")
	p.click("#logout")
	p.screen("auth")
}

// TestWebClientConversation: two people talking. Bob mentions Ada: his
// name, handle and e-mail head the message, the mention links to her
// profile, and Ada's unread count rises in the navigation and the title
// without a reload; her notifications page lists it, marked unread, and
// opening the page marks it read. Ada replies from the thread; the reply
// arrives live in Bob's open thread, his count rises, his message says
// "1 reply"; one more arrives on his open notifications page, and "mark
// all read" clears his count.
func TestWebClientConversation(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.screen("auth")
	ada.register("ada@example.com", apitest.Password, false)
	bob := b.person("bob")
	bob.screen("auth")
	bob.register("bob@example.com", apitest.Password, false)
	for _, p := range []*webPerson{ada, bob} {
		p.liveOn()
	}

	const mention = "Hello @ada, the kettle is on"
	bob.post(mention)
	ada.waitFor("the mention is counted", `document.querySelector('#unread').textContent === '1' && !document.querySelector('#unread-badge').hidden`)
	if got := webEval[string](ada, `document.title`); got != "(1) Herald" {
		t.Errorf("with one unread notification the title is %q", got)
	}
	sel := ada.messageSelector(mention)
	type author struct{ Owner, Href, Handle, Email string }
	got := webEval[author](ada, fmt.Sprintf(`(m => ({owner: m.querySelector('.owner').textContent, href: m.querySelector('.owner').getAttribute('href'),
		handle: m.querySelector('.handle').textContent, email: m.querySelector('.email').textContent}))(document.querySelector(%q))`, sel))
	if want := (author{"bob", "#/users/bob", "@bob", "bob@example.com"}); got != want {
		t.Errorf("Bob's message is headed %+v, want %+v", got, want)
	}
	if got := webEval[string](ada, fmt.Sprintf(`document.querySelector(%q).getAttribute('href')`, sel+" .content a.mention")); got != "#/users/ada" {
		t.Errorf("the mention links to %q, want Ada's profile", got)
	}
	ada.click(sel + " a.owner")
	ada.screen("profile")
	ada.waitFor("Bob's profile shows", `document.querySelector('#profile-handle').textContent === '@bob'`)

	// Her notifications: opened, marked read.
	ada.click("#nav-notifications")
	ada.screen("notifications")
	ada.waitFor("the mention is listed", `document.querySelectorAll('#notifications > li').length === 1`)
	if got := ada.text("#notifications > li"); !strings.Contains(got, "mentioned you") || !strings.Contains(got, mention) {
		t.Errorf("the notification reads %q", got)
	}
	if !webEval[bool](ada, `document.querySelector('#notifications > li').classList.contains('unread')`) {
		t.Error("the new notification is not marked unread on the page")
	}
	ada.waitFor("the count is cleared", `document.querySelector('#unread-badge').hidden && document.title === 'Herald'`)
	ada.axeCheck("notifications")

	// Bob opens his message's thread; Ada replies from hers.
	bobSel := bob.messageSelector(mention)
	id := webEval[string](bob, fmt.Sprintf(`document.querySelector(%q).dataset.id`, bobSel))
	bob.click(bobSel + " a.reply")
	bob.screen("thread")
	bob.waitFor("the thread shows the message", fmt.Sprintf(`document.querySelector('#thread-root .content')?.textContent === %q`, mention))
	bob.waitFor("the focus is in the reply box", `document.activeElement === document.querySelector('#reply-content')`)
	ada.click("#notifications > li a[href^='#/messages/']")
	ada.screen("thread")
	ada.waitFor("her thread shows the message", fmt.Sprintf(`document.querySelector('#thread-root .content')?.textContent === %q`, mention))
	const reply = "Coming, with biscuits"
	ada.fill("#reply-content", reply)
	ada.do("sending", chromedp.KeyEvent(kb.Enter))
	ada.waitFor("her reply is in the thread", fmt.Sprintf(`[...document.querySelectorAll('#thread-replies .content')].some(c => c.textContent === %q)`, reply))
	bob.waitFor("the reply arrives in his thread", fmt.Sprintf(`[...document.querySelectorAll('#thread-replies .content')].some(c => c.textContent === %q)`, reply))
	bob.waitFor("the reply is counted", `document.querySelector('#unread').textContent === '1' && document.title === '(1) Herald'`)
	bob.axeCheck("thread")

	token := e.Login("ada@example.com", apitest.Password)
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages/" + id + "/replies", Token: token})
	if !strings.Contains(string(res.Body), reply) {
		t.Errorf("the server does not hold the reply to %s: %d %s", id, res.Status, res.Body)
	}

	bob.click("#nav-timeline")
	bob.screen("timeline")
	bob.waitFor("his message counts the reply", fmt.Sprintf(`document.querySelector(%q)?.textContent === '1 reply'`, bobSel+" a.replies"))
	bob.click("#nav-notifications")
	bob.screen("notifications")
	bob.waitFor("the reply is listed", `[...document.querySelectorAll('#notifications > li')].some(li => li.textContent.includes('replied to you'))`)
	bob.waitFor("opening the page marked it read", `document.querySelector('#unread-badge').hidden`)
	// Another, while he reads: at the top of the page, and counted.
	const another = "And a second reply, @bob"
	ada.fill("#reply-content", another)
	ada.do("sending", chromedp.KeyEvent(kb.Enter))
	bob.waitFor("the second arrives", `document.querySelector('#notifications > li.unread')?.textContent.includes('And a second reply') && document.querySelector('#unread').textContent === '1'`)
	bob.click("#notifications-read")
	bob.waitFor("everything is read", `document.querySelector('#unread-badge').hidden && document.title === 'Herald' && !document.querySelector('#notifications > li.unread')`)
}

// browserNotificationsJS stands in for the browser's Notification and for
// document.hidden, as a page script sees them: headless Chromium has
// neither a person to ask nor a desktop to show notifications on, nor a
// way to hide a tab. It records what the page asks and shows.
const browserNotificationsJS = `
window.asked = 0;
window.notified = [];
window.tabHidden = false;
class StandIn {
	constructor(title, options) { window.notified.push({title, body: options?.body ?? ''}); }
	addEventListener() {}
	close() {}
}
StandIn.permission = 'default';
StandIn.requestPermission = async () => { window.asked++; StandIn.permission = 'granted'; return 'granted'; };
window.Notification = StandIn;
Object.defineProperty(Document.prototype, 'hidden', { get: () => window.tabHidden, configurable: true });
`

// TestWebClientDesktopNotifications: the page never asks for permission
// to show notifications unless the person presses "Notify me in this
// browser"; once allowed, a notification that arrives while the tab is
// hidden is shown on the desktop, and one that arrives while it is looked
// at is not. Its second half needs the API (notification events).
func TestWebClientDesktopNotifications(t *testing.T) {
	e := apitest.New(t)
	bob := e.Register("bob@example.com", apitest.Password)
	b := newWebBrowser(t, e.URL)
	ada := b.person("ada")
	ada.do("standing in for the browser's notifications", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: browserNotificationsJS})
		return err
	}), chromedp.Reload())
	ada.screen("auth")
	ada.register("ada@example.com", apitest.Password, false)
	ada.liveOn()
	if n := webEval[int](ada, `window.asked`); n != 0 {
		t.Errorf("signing in asked %d times for permission to notify, want never", n)
	}
	ada.click("#nav-notifications")
	ada.screen("notifications")
	ada.click("#notify-me")
	ada.waitFor("the browser is asked once", `window.asked === 1 && document.querySelector('#notify-me').hidden`)

	ada.do("hiding the tab", chromedp.Evaluate[chromedp.Void](`window.tabHidden = true`))
	e.Post(bob, "Psst @ada, look")
	ada.waitFor("a desktop notification is shown", `window.notified.length === 1`)
	if got := webEval[string](ada, `window.notified[0].title + ': ' + window.notified[0].body`); got != "bob mentioned you: Psst @ada, look" {
		t.Errorf("the desktop notification says %q", got)
	}
	ada.do("looking at the tab", chromedp.Evaluate[chromedp.Void](`window.tabHidden = false`))
	e.Post(bob, "And again @ada")
	ada.waitFor("the second is counted", `document.querySelector('#notifications > li') && document.querySelectorAll('#notifications > li').length === 2`)
	if n := webEval[int](ada, `window.notified.length`); n != 1 {
		t.Errorf("%d desktop notifications with the tab in view, want only the one shown while it was hidden", n)
	}
}
