package web_test

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/push"
)

// The settings screen's "Notifications on this device", end to end: the
// real server with push on over a real store, its real push sender, and
// a push service on loopback that records what reaches it.

const webPushContact = "mailto:ops@herald.example"

// publicResolver answers the names in it with their addresses, and for
// the rest says they do not exist: the test reaches no DNS server.
type publicResolver map[string]string

func (r publicResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// recordingPushService is a push service on loopback that takes every
// push (201) and records where it went and how it came. Whether its
// payload decrypts with the device's keys is the server's tests' to
// check (http/push_test.go); here what matters is that a mention made
// the server push to the endpoint the page subscribed.
type recordingPushService struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []recordedPush
	arrived chan struct{}
}

type recordedPush struct {
	path          string
	encoding, ttl string
	authorization string
	bytes         int
}

func newRecordingPushService(t *testing.T) *recordingPushService {
	ps := &recordingPushService{arrived: make(chan struct{}, 100)}
	ps.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ps.mu.Lock()
		ps.got = append(ps.got, recordedPush{path: r.URL.Path, encoding: r.Header.Get("Content-Encoding"),
			ttl: r.Header.Get("TTL"), authorization: r.Header.Get("Authorization"), bytes: len(body)})
		ps.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		ps.arrived <- struct{}{}
	}))
	t.Cleanup(ps.srv.Close)
	return ps
}

func (ps *recordingPushService) pushes() []recordedPush {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]recordedPush(nil), ps.got...)
}

// startPushSender runs the server's push sender beside it, as serve does,
// trusting the push service's certificate.
func startPushSender(t *testing.T, e *apitest.Env, ps *recordingPushService) {
	t.Helper()
	store, ok := e.DB.(push.Store)
	if !ok {
		t.Fatalf("the store %T does not keep pushes", e.DB)
	}
	s, err := push.New(context.Background(), store, push.Config{Contact: webPushContact, AllowPrivate: true,
		TLS: ps.srv.Client().Transport.(*http.Transport).TLSClientConfig, Poll: 20 * time.Millisecond, Now: e.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// fakePushJS stands in, in the page, for the browser's push subscription
// and nothing else. Headless Chromium here has no way out to a real push
// service (Google's, for Chromium), so a real pushManager.subscribe could
// never succeed. What is replaced: PushManager.prototype.subscribe and
// getSubscription, and the subscription they give (endpoint, toJSON and
// unsubscribe): subscribe hands back an endpoint on the test's loopback
// push service with the P-256 key and 16-byte secret the test made, as a
// browser's would be, and records the options it was given. What stays
// real: the service worker and its registration, the notification
// permission (granted or denied by the test through the DevTools
// protocol as a person would on the browser's prompt), and
// Notification.requestPermission, only counted. It also stands in for
// document.hidden, which a headless tab cannot make true.
const fakePushJS = `(() => {
	const fake = window.fakePush = {endpoint: %q, p256dh: %q, auth: %q,
		asked: 0, subscribed: 0, unsubscribed: 0, options: null, current: null, tabHidden: false};
	const subscription = (endpoint, key) => ({
		endpoint, expirationTime: null, options: {userVisibleOnly: true, applicationServerKey: key},
		toJSON: () => ({endpoint, expirationTime: null, keys: {p256dh: fake.p256dh, auth: fake.auth}}),
		unsubscribe: async () => { fake.unsubscribed++; if (fake.current?.endpoint === endpoint) fake.current = null; return true; },
	});
	PushManager.prototype.subscribe = async function (options) {
		fake.subscribed++;
		const key = new Uint8Array(options.applicationServerKey);
		fake.options = {userVisibleOnly: options.userVisibleOnly, key: btoa(String.fromCharCode(...key)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')};
		if (Notification.permission !== 'granted') throw new DOMException('Registration failed - permission denied', 'NotAllowedError');
		fake.current = subscription(fake.endpoint, key.buffer);
		return fake.current;
	};
	PushManager.prototype.getSubscription = async function () { return fake.current; };
	const ask = Notification.requestPermission.bind(Notification);
	Notification.requestPermission = (...args) => { fake.asked++; return ask(...args); };
	Object.defineProperty(Document.prototype, 'hidden', {get: () => fake.tabHidden, configurable: true});
})()`

// setNotifications answers the browser's notification prompt for the
// person's origin ahead of time, as they would.
func (p *webPerson) setNotifications(setting browser.PermissionSetting) {
	p.t.Helper()
	if _, err := chromedp.CallBrowser(p.ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission:       &browser.PermissionDescriptor{Name: "notifications"},
		Setting:          setting,
		Origin:           p.b.server,
		BrowserContextID: chromedp.FromContext(p.ctx).BrowserContextID,
	}); err != nil {
		p.t.Fatal(err)
	}
}

// pushSettled waits until the push section has answered: no request in
// flight and something said.
func (p *webPerson) pushSettled() {
	p.t.Helper()
	p.waitFor("the push section has answered", `document.querySelector('#push-state').textContent !== '' &&
		!document.querySelector('#push-devices').hasAttribute('aria-busy') && !document.querySelector('#push-toggle').disabled`)
}

// pushRows lists the push section's devices as shown: name, whether it is
// this device, what it says.
func (p *webPerson) pushRows() []string {
	return webEval[[]string](p, `[...document.querySelectorAll('#push-devices > li')].map(li => li.querySelector('p').textContent)`)
}

// shootPush takes a screenshot of the push section.
func (p *webPerson) shootPush(name string) {
	p.t.Helper()
	p.do("scrolling to the push section", chromedp.Evaluate[chromedp.Void](`document.querySelector('#push-card').scrollIntoView()`))
	p.shoot(name)
}

// openSettings shows the settings screen afresh, as a person coming back
// to it does.
func (p *webPerson) openSettings() {
	p.t.Helper()
	p.click("#nav-timeline")
	p.screen("timeline")
	p.click("#nav-settings")
	p.screen("settings")
	p.pushSettled()
}

// TestWebClientPushSubscriptions: in the settings, "Notify me on this
// device" asks the browser for permission on its click only; a denied
// permission is explained; the server's refusals (at the limit of
// devices, an endpoint it cannot reach) are shown as every API error is;
// once allowed, the browser's subscription reaches the server and is
// listed as this device; a mention by someone else is pushed to it by the
// server, and shown by the service worker while the tab is hidden;
// another device is removed from its row, this one by "Stop"; a browser
// without push and a server without it each say so. axe checks each state.
func TestWebClientPushSubscriptions(t *testing.T) {
	ps := newRecordingPushService(t)
	e := apitest.New(t, func(c *heraldhttp.Config) {
		// fcm.googleapis.com stands for a phone's subscription, made
		// through the API and never pushed to.
		c.Push = heraldhttp.PushConfig{Contact: webPushContact, AllowPrivate: true,
			Resolver: publicResolver{"fcm.googleapis.com": "142.250.74.46"}}
	})
	startPushSender(t, e, ps)
	ada := e.Register("ada@example.com", apitest.Password)
	bob := e.Register("bob@example.com", apitest.Password)
	serverKey := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key", Token: ada}).JSON(t)["publicKey"].(string)

	deviceKey, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 16)
	_, _ = rand.Read(secret)
	endpoint := ps.srv.URL + "/push/ada-laptop"
	fake := fmt.Sprintf(fakePushJS, endpoint,
		base64.RawURLEncoding.EncodeToString(deviceKey.PublicKey().Bytes()), base64.RawURLEncoding.EncodeToString(secret))

	subscriptions := func() []map[string]any {
		t.Helper()
		res := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me/push-subscriptions", Token: ada})
		var out struct{ Items []map[string]any }
		if err := json.Unmarshal(res.Body, &out); err != nil || res.Status != http.StatusOK {
			t.Fatalf("listing ada's subscriptions: %d %s", res.Status, res.Body)
		}
		return out.Items
	}
	subscribe := func(endpoint string) map[string]any {
		t.Helper()
		k, _ := ecdh.P256().GenerateKey(rand.Reader)
		body := fmt.Sprintf(`{"endpoint":%q,"keys":{"p256dh":%q,"auth":"AAAAAAAAAAAAAAAAAAAAAA"}}`,
			endpoint, base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes()))
		res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/push-subscriptions", Token: ada,
			ContentType: "application/json", Body: body})
		if res.Status != http.StatusCreated {
			t.Fatalf("subscribing %s: %d %s", endpoint, res.Status, res.Body)
		}
		return res.JSON(t)
	}
	phone := subscribe("https://fcm.googleapis.com/fcm/send/ada-phone")

	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.do("standing in for the browser's push subscription", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: fake})
		return err
	}), chromedp.Reload())
	p.screen("auth")
	p.login("ada@example.com", apitest.Password)
	p.workerActive()
	p.click("#nav-settings")
	p.screen("settings")
	p.pushSettled()

	// Not subscribed: the button, the phone listed, nothing asked.
	if got := p.text("#push-toggle"); got != "Notify me on this device" {
		t.Errorf("the button says %q", got)
	}
	if got := p.pushRows(); len(got) != 1 || !strings.HasPrefix(got[0], "Chrome / Android (Google)") || strings.Contains(got[0], "This device") ||
		!strings.Contains(got[0], "nothing delivered yet") {
		t.Errorf("the devices listed: %q, want the phone, not this device", got)
	}
	if n := webEval[int](p, `window.fakePush.asked`); n != 0 {
		t.Errorf("opening the settings asked %d times for permission, want never", n)
	}
	if !webEval[bool](p, `!!document.querySelector('#push-devices time[title]')`) {
		t.Error("a device's time has no exact time on hover")
	}
	p.axeCheck("settings, push not on this device")

	// Denied: explained, and nothing subscribed.
	p.setNotifications(browser.PermissionSettingDenied)
	p.click("#push-toggle")
	p.waitFor("the refusal is explained", `document.querySelector('#push-help').textContent.includes('site settings')`)
	if got := p.text("#notice"); !strings.Contains(got, "blocked") {
		t.Errorf("after the refusal the page announced %q", got)
	}
	if n := webEval[int](p, `window.fakePush.asked`); n != 1 {
		t.Errorf("the click asked %d times, want once", n)
	}
	if n := webEval[int](p, `window.fakePush.subscribed`); n != 0 {
		t.Errorf("a denied permission subscribed %d times", n)
	}
	p.axeCheck("settings, notifications blocked")
	p.shootPush("web-push-denied.png")

	// Allowed, but the server refuses: at the limit of devices (409),
	// and an endpoint whose host does not resolve (422). The browser's
	// subscription goes with each refusal.
	p.setNotifications(browser.PermissionSettingGranted)
	var filler []string
	for i := range 9 {
		filler = append(filler, fmt.Sprint(subscribe(fmt.Sprintf("https://fcm.googleapis.com/fcm/send/filler-%d", i))["id"]))
	}
	p.expect(http.StatusConflict, "/api/me/push-subscriptions")
	p.click("#push-toggle")
	p.waitFor("the limit is said", `document.querySelector('#push-card .form-error').textContent.includes('10')`)
	p.pushSettled()
	if got := webEval[int](p, `window.fakePush.unsubscribed`); got != 1 {
		t.Errorf("after the server's 409 the browser unsubscribed %d times, want once", got)
	}
	for _, id := range filler {
		if res := e.Do(apitest.Request{Method: http.MethodDelete, Path: "/api/me/push-subscriptions/" + id, Token: ada}); res.Status != http.StatusNoContent {
			t.Fatalf("removing %s: %d", id, res.Status)
		}
	}
	p.do("an endpoint the server cannot reach", chromedp.Evaluate[chromedp.Void](`window.fakePush.endpoint = 'https://push.nowhere.example/x'`))
	p.expect(http.StatusUnprocessableEntity, "/api/me/push-subscriptions")
	p.click("#push-toggle")
	p.waitFor("the 422 is said", `document.querySelector('#push-card .form-error').textContent.includes('does not resolve')`)
	p.pushSettled()
	p.axeCheck("settings, a subscription refused")
	p.do("the loopback push service again", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`window.fakePush.endpoint = %q`, endpoint)))

	// Subscribed.
	p.click("#push-toggle")
	p.waitFor("this device is on", `document.querySelector('#push-toggle').textContent === 'Stop notifications on this device'`)
	p.pushSettled()
	if got := p.formError("#push-card"); got != "" {
		t.Errorf("subscribing left the error %q", got)
	}
	type options struct {
		UserVisibleOnly bool
		Key             string
	}
	if got := webEval[options](p, `window.fakePush.options`); !got.UserVisibleOnly || got.Key != serverKey {
		t.Errorf("subscribed with %+v, want userVisibleOnly and the server's key %s", got, serverKey)
	}
	items := subscriptions()
	if len(items) != 2 || items[0]["endpoint"] != endpoint {
		t.Fatalf("ada's subscriptions: %v, want this device's newest", items)
	}
	rows := p.pushRows()
	if len(rows) != 2 || !strings.Contains(rows[0], "This device") || !strings.HasPrefix(rows[0], "127.0.0.1") || strings.Contains(rows[1], "This device") {
		t.Errorf("the devices listed: %q, want this one (by its push service's host) first, marked", rows)
	}
	if n := webEval[int](p, `window.fakePush.asked`); n != 4 {
		t.Errorf("permission asked %d times over four clicks", n)
	}
	p.axeCheck("settings, this device on")
	p.shootPush("web-push-on.png")

	// The phone removed from its row.
	p.click(fmt.Sprintf(`#push-devices button[data-id="%v"]`, phone["id"]))
	p.waitFor("one device is left", `document.querySelectorAll('#push-devices > li').length === 1`)
	if items := subscriptions(); len(items) != 1 || items[0]["endpoint"] != endpoint {
		t.Errorf("after removing the phone: %v", items)
	}
	if n := webEval[int](p, `window.fakePush.current ? 1 : 0`); n != 1 {
		t.Error("removing another device unsubscribed this browser")
	}

	// A mention by bob is pushed to this device; the tab hidden, the page
	// shows it through the service worker too, under the same tag as the
	// worker gives the push, so it is shown once.
	p.liveOn()
	p.do("hiding the tab", chromedp.Evaluate[chromedp.Void](`window.fakePush.tabHidden = true`))
	m := e.Post(bob, "@ada tea?")
	select {
	case <-ps.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("no push reached the push service")
	}
	got := ps.pushes()
	if len(got) != 1 || got[0].path != "/push/ada-laptop" || got[0].encoding != "aes128gcm" || got[0].ttl != "86400" ||
		!strings.HasPrefix(got[0].authorization, "vapid t=") || !strings.Contains(got[0].authorization, "k="+serverKey) || got[0].bytes == 0 {
		t.Errorf("the pushes that arrived: %+v", got)
	}
	type shown struct{ Title, Body, Tag, URL string }
	// The notification comes through the live stream, which under load
	// (PostgreSQL, -race, other packages at once) can take longer than a
	// page's usual wait; the push above was given 30 s too.
	p.do("waiting until the page shows the mention through the worker", chromedp.Poll[chromedp.Void](
		`navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => ns.length === 1)`, chromedp.WithPollingTimeout(45*time.Second)))
	note := webEval[shown](p, `navigator.serviceWorker.ready.then(r => r.getNotifications()).then(([n]) => ({title: n.title, body: n.body, tag: n.tag, url: n.data?.url}))`)
	notification := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me/notifications?limit=1", Token: ada}).JSON(t)["items"].([]any)[0].(map[string]any)["id"]
	if want := (shown{Title: "bob mentioned you", Body: "@ada tea?", Tag: fmt.Sprint(notification), URL: fmt.Sprintf("#/messages/%v", m["id"])}); note != want {
		t.Errorf("the page showed %+v, want %+v", note, want)
	}
	p.do("looking at the tab", chromedp.Evaluate[chromedp.Void](`window.fakePush.tabHidden = false`))
	// The sender notes the delivery after the push service's answer.
	for deadline := time.Now().Add(15 * time.Second); subscriptions()[0]["lastSuccessAt"] == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the delivery was never noted")
		}
	}
	p.openSettings()
	if rows := p.pushRows(); len(rows) != 1 || !strings.Contains(rows[0], "last notification delivered") {
		t.Errorf("after a push the device says %q", rows)
	}

	// Stopped.
	p.click("#push-toggle")
	p.waitFor("this device is off", `document.querySelector('#push-toggle').textContent === 'Notify me on this device'`)
	p.pushSettled()
	if items := subscriptions(); len(items) != 0 {
		t.Errorf("after Stop the server keeps %v", items)
	}
	if n := webEval[int](p, `window.fakePush.current ? 1 : 0`); n != 0 {
		t.Error("Stop left the browser subscribed")
	}
	if !p.shown("#push-devices-empty") {
		t.Error("with no device the section does not say so")
	}

	// On again, then logging out takes this browser off: a computer
	// someone logged out of shows nobody their notifications.
	p.click("#push-toggle")
	p.waitFor("this device is on again", `document.querySelector('#push-toggle').textContent === 'Stop notifications on this device'`)
	p.pushSettled()
	if items := subscriptions(); len(items) != 1 {
		t.Fatalf("on again, the server keeps %v", items)
	}
	p.click("#logout")
	p.screen("auth")
	if items := subscriptions(); len(items) != 0 {
		t.Errorf("after logging out the server keeps %v", items)
	}
	if n := webEval[int](p, `window.fakePush.current ? 1 : 0`); n != 0 {
		t.Error("logging out left the browser subscribed")
	}
	// Back in, on the screen the address still names.
	p.fill("#login-email", "ada@example.com")
	p.fill("#login-password", apitest.Password)
	p.click("#login-form button[type=submit]")
	p.screen("settings")

	// What each push service is called.
	for endpoint, want := range map[string]string{
		"https://fcm.googleapis.com/fcm/send/x":                "Chrome / Android (Google)",
		"https://updates.push.services.mozilla.com/wpush/v2/x": "Firefox (Mozilla)",
		"https://web.push.apple.com/QGx":                       "Safari (Apple)",
		"https://wns2-par02p.notify.windows.com/w/?token=x":    "Edge (Microsoft)",
		"https://push.example.org:8443/x":                      "push.example.org",
		"https://notify.windows.com.evil.example/x":            "notify.windows.com.evil.example",
		"https://fcm.googleapis.com.evil.example/fcm/send/x":   "fcm.googleapis.com.evil.example",
	} {
		if got := webEval[string](p, fmt.Sprintf(`%s.then(m => m.pushServiceName(%q))`, settingsModule, endpoint)); got != want {
			t.Errorf("a device subscribed at %s is called %q, want %q", endpoint, got, want)
		}
	}

	// A browser without push says so, and on iOS what to do.
	p.do("a browser without push", chromedp.Evaluate[chromedp.Void](`delete window.PushManager; Object.defineProperty(navigator, 'standalone', {value: false})`))
	p.openSettings()
	if got := p.text("#push-state"); got != "This browser cannot receive push notifications." {
		t.Errorf("without push the section says %q", got)
	}
	if got := p.text("#push-help"); !strings.Contains(got, "Home Screen") {
		t.Errorf("on iOS the section says %q, want how to add it to the Home Screen", got)
	}
	if p.shown("#push-toggle") {
		t.Error("a browser without push is offered the button")
	}
	p.axeCheck("settings, a browser without push")
	p.shootPush("web-push-unsupported.png")
	if n := webEval[int](p, `window.fakePush.asked`); n != 5 {
		t.Errorf("permission asked %d times, want only on the five clicks that turn notifications on", n)
	}

	// A server without push.
	off := apitest.New(t)
	off.Register("cy@example.com", apitest.Password)
	// The same browser, with its own record of what its pages did.
	b2 := &webBrowser{t: t, ctx: b.ctx, server: off.URL, shots: b.shots, axe: b.axe}
	t.Cleanup(b2.checkPages)
	cy := b2.person("cy")
	cy.screen("auth")
	cy.login("cy@example.com", apitest.Password)
	cy.click("#nav-settings")
	cy.screen("settings")
	cy.pushSettled()
	if got := cy.text("#push-state"); got != "This server does not send push notifications." {
		t.Errorf("with push off the section says %q", got)
	}
	if cy.shown("#push-toggle") || cy.shown("#push-devices") || cy.formError("#push-card") != "" {
		t.Error("with push off the section offers more than a line")
	}
	cy.axeCheck("settings, push off")
	cy.shootPush("web-push-off.png")
}

// settingsModule is a JavaScript expression for the client's settings.js
// module.
const settingsModule = `import(document.querySelector('script[type=module]').src.replace('app.js', 'settings.js'))`
