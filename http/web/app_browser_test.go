package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/serviceworker"
	"github.com/chromedp/chromedp"

	"herald/http/internal/apitest"
)

// workerActive waits until the service worker has installed (the shell is
// kept), activated and taken the page over.
func (p *webPerson) workerActive() {
	p.t.Helper()
	p.waitFor("the service worker controls the page", `!!navigator.serviceWorker.controller`)
}

// workerTarget attaches to the page's service worker, to evaluate in its
// own global scope.
func (p *webPerson) workerTarget(server string) context.Context {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		targets, err := chromedp.Targets(p.ctx)
		if err != nil {
			p.t.Fatalf("listing targets: %v", err)
		}
		for _, tg := range targets {
			if tg.Type == "service_worker" && tg.URL == server+"/sw.js" {
				ctx, cancel := chromedp.NewContext(p.ctx, chromedp.WithTargetID(tg.TargetID))
				p.t.Cleanup(cancel)
				if err := chromedp.Do(ctx); err != nil {
					p.t.Fatalf("attaching to the service worker: %v", err)
				}
				return ctx
			}
		}
		if time.Now().After(deadline) {
			p.t.Fatal("no service worker target")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func workerEval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating in the service worker %s: %v", js, err)
	}
	return v
}

// TestWebClientInstallable: Chromium finds nothing that keeps the client
// served by the real server from being installed: manifest, icons and a
// service worker with a fetch handler, in a secure context (127.0.0.1
// counts as one).
func TestWebClientInstallable(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	// In the browser's own profile: a browser context of its own is
	// incognito, where nothing can be installed.
	p := b.open("ada", e.URL+"/", b.ctx)
	p.screen("auth")
	p.workerActive()

	manifest, err := chromedp.Call(p.ctx, page.GetAppManifest, page.GetAppManifestParams{})
	if err != nil {
		t.Fatal(err)
	}
	if manifest.URL != e.URL+"/manifest.webmanifest" {
		t.Errorf("the page's manifest is %q", manifest.URL)
	}
	for _, m := range manifest.Errors {
		t.Errorf("manifest error: %s (line %d, column %d, critical %d)", m.Message, m.Line, m.Column, m.Critical)
	}
	// Chromium checks asynchronously, once the worker is in place and the
	// icons are fetched: asked too soon it may still miss something.
	var errs []string
	for deadline := time.Now().Add(15 * time.Second); ; {
		res, err := chromedp.Call(p.ctx, page.GetInstallabilityErrors, cdp.Empty{})
		if err != nil {
			t.Fatal(err)
		}
		errs = errs[:0]
		for _, ie := range res.InstallabilityErrors {
			var args []string
			for _, a := range ie.ErrorArguments {
				args = append(args, a.Name+"="+a.Value)
			}
			errs = append(errs, ie.ErrorID+" "+strings.Join(args, " "))
		}
		if len(errs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, e := range errs {
		t.Errorf("installability error: %s", e)
	}
	p.shoot("web-installable.png")
}

// TestWebClientPush: a push delivered to the page's service worker shows a
// notification with the payload's title, body, tag and link; a push with
// no payload, or one that is not the server's JSON, still shows one (a
// push that shows nothing counts against the site). A click on one opens
// its message in the open window; a link to another origin opens the
// notifications page instead.
func TestWebClientPush(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")

	// The registration's id, as the ServiceWorker domain reports it.
	var (
		mu    sync.Mutex
		regID serviceworker.RegistrationID
	)
	if err := chromedp.Listen(p.ctx, func(ev any) {
		if ev, ok := ev.(*serviceworker.EventWorkerRegistrationUpdated); ok {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range ev.Registrations {
				if r.ScopeURL == e.URL+"/" && !r.IsDeleted {
					regID = r.RegistrationID
				}
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(p.ctx, serviceworker.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	p.workerActive()
	// Granted the way a person would grant it on the button that asks.
	if _, err := chromedp.CallBrowser(p.ctx, browser.SetPermission, browser.SetPermissionParams{
		Permission:       &browser.PermissionDescriptor{Name: "notifications"},
		Setting:          browser.PermissionSettingGranted,
		Origin:           e.URL,
		BrowserContextID: chromedp.FromContext(p.ctx).BrowserContextID,
	}); err != nil {
		t.Fatal(err)
	}
	var id serviceworker.RegistrationID
	for deadline := time.Now().Add(10 * time.Second); id == ""; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		id = regID
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no ServiceWorker.workerRegistrationUpdated for the scope /")
		}
	}

	type shown struct {
		Title, Body, Tag, URL, Icon, Badge string
	}
	push := func(data string) {
		t.Helper()
		if _, err := chromedp.Call(p.ctx, serviceworker.DeliverPushMessage, serviceworker.DeliverPushMessageParams{
			Origin: e.URL, RegistrationID: id, Data: data,
		}); err != nil {
			t.Fatalf("delivering %q: %v", data, err)
		}
	}
	// notifications waits until the worker shows n, and lists them.
	notifications := func(n int) []shown {
		t.Helper()
		const list = `navigator.serviceWorker.ready.then(r => r.getNotifications()).then(ns => ns.map(n => ({
			title: n.title, body: n.body, tag: n.tag, url: n.data?.url ?? '', icon: n.icon, badge: n.badge})))`
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			got := webEval[[]shown](p, list)
			if len(got) == n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d notifications are shown, want %d: %+v", len(got), n, got)
			}
		}
	}

	payload, err := json.Marshal(map[string]any{
		"kind": "mention", "id": 42, "title": "Bob mentioned you", "body": "@ada the kettle is on",
		"url": e.URL + "/#/messages/7", "messageId": 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	push(string(payload))
	got := notifications(1)
	want := shown{Title: "Bob mentioned you", Body: "@ada the kettle is on", Tag: "42", URL: e.URL + "/#/messages/7"}
	if g := got[0]; g.Title != want.Title || g.Body != want.Body || g.Tag != want.Tag || g.URL != want.URL {
		t.Errorf("the push shows %+v, want %+v", g, want)
	}
	if g := got[0]; !strings.HasSuffix(g.Icon, "/icon-192.png") || !strings.HasSuffix(g.Badge, "/badge.png") {
		t.Errorf("the notification's icon %q and badge %q are not the app's", g.Icon, g.Badge)
	}
	// The same notification pushed again (a retry) replaces itself.
	push(string(payload))
	time.Sleep(300 * time.Millisecond)
	notifications(1)

	// Without a payload, and with one that is not the server's: something
	// generic, leading to the notifications page.
	push("")
	push("not JSON {")
	generic := 0
	for _, n := range notifications(3) {
		if n.Title == "New notification" {
			generic++
			if n.URL != "/#notifications" {
				t.Errorf("a generic notification leads to %q", n.URL)
			}
		}
	}
	if generic != 2 {
		t.Errorf("%d generic notifications, want 2: %+v", generic, notifications(3))
	}

	// Clicks. A click on a real notification is not something the DevTools
	// protocol can make; the worker's own handler is run on a
	// notificationclick event made in the worker from the notification it
	// shows. Its waitUntil is the event's own on a real click; a made
	// event's would throw, so the test's stands in and waits as the
	// browser would.
	sw := p.workerTarget(e.URL)
	targets := map[string]string{
		e.URL + "/#/messages/7": e.URL + "/#/messages/7",
		"/#/messages/8":         e.URL + "/#/messages/8",
		"https://evil.example/": e.URL + "/#notifications",
		"//evil.example/x":      e.URL + "/#notifications",
		"javascript:alert(1)":   e.URL + "/#notifications",
		"data:text/html,hi":     e.URL + "/#notifications",
		"http://[::1":           e.URL + "/#notifications",
		// The same host by another scheme or port is another origin.
		strings.Replace(e.URL, "http:", "https:", 1) + "/#/messages/9": e.URL + "/#notifications",
		"http://127.0.0.1:1/#/messages/9":                              e.URL + "/#notifications",
	}
	for raw, want := range targets {
		js, _ := json.Marshal(raw)
		if got := workerEval[string](t, sw, fmt.Sprintf(`notificationTarget(%s, self.location.origin)`, js)); got != want {
			t.Errorf("a click on a notification for %q leads to %q, want %q", raw, got, want)
		}
	}
	if got := workerEval[string](t, sw, `notificationTarget(undefined, self.location.origin)`); got != e.URL+"/#notifications" {
		t.Errorf("a click on a notification without a link leads to %q", got)
	}

	click := func(tag string) {
		t.Helper()
		workerEval[bool](t, sw, fmt.Sprintf(`self.registration.getNotifications({tag: %q}).then(ns => {
			let work = null;
			const ev = new NotificationEvent('notificationclick', {notification: ns[0]});
			Object.defineProperty(ev, 'waitUntil', {value: (p) => { work = p; }});
			self.dispatchEvent(ev);
			return work.then(() => true);
		})`, tag))
	}
	click("42")
	p.waitFor("the clicked notification's message is the page's address", fmt.Sprintf(`location.href === %q`, e.URL+"/#/messages/7"))
	notifications(2) // the clicked one is closed
	// A notification whose link leads elsewhere opens the notifications
	// page in the same window.
	evil, _ := json.Marshal(map[string]any{"kind": "reply", "id": 43, "title": "Elsewhere", "body": "x", "url": "https://evil.example/", "messageId": 8})
	push(string(evil))
	notifications(3)
	click("43")
	p.waitFor("the notifications page is the page's address", fmt.Sprintf(`location.href === %q`, e.URL+"/#notifications"))
}

// TestWebClientOffline: once the worker is in place, the client opens with
// the network gone: the kept page renders, says it is offline, and the API
// is not answered from any cache; back online, the notice goes.
func TestWebClientOffline(t *testing.T) {
	e := apitest.New(t)
	b := newWebBrowser(t, e.URL)
	p := b.person("ada")
	p.screen("auth")
	p.register("ada@example.com", "correct horse battery", true)
	p.waitFor("her empty timeline has loaded", `!document.querySelector('#empty').hidden`)
	p.workerActive()
	p.waitFor("the shell is kept", `caches.keys().then(ks => ks.some(k => k.startsWith('herald-shell-')))`)
	if got := p.text("#offline"); got != "" {
		t.Errorf("online, the page says %q", got)
	}

	// Nothing the API answered is kept, by the worker or anyone.
	kept := webEval[[]string](p, `caches.keys().then(ks => Promise.all(ks.map(k => caches.open(k).then(c => c.keys())))).then(rs => rs.flat().map(r => new URL(r.url).pathname))`)
	for _, k := range kept {
		if strings.HasPrefix(k, "/api/") {
			t.Errorf("a cache keeps %s", k)
		}
	}
	if len(kept) < 5 {
		t.Errorf("the shell keeps only %v", kept)
	}

	// The page and its worker are two targets with a network each, and
	// the worker fetches the page's navigations: both go offline.
	sw := p.workerTarget(e.URL)
	offline := func(off bool) {
		t.Helper()
		p.do("going offline="+fmt.Sprint(off), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			// navigator.onLine, which the page reads.
			if _, err := chromedp.Call(ctx, network.OverrideNetworkState, network.OverrideNetworkStateParams{
				Offline: off, DownloadThroughput: -1, UploadThroughput: -1,
			}); err != nil {
				return err
			}
			return emulateOffline(ctx, off)
		}))
		ctx, cancel := context.WithTimeout(sw, 20*time.Second)
		defer cancel()
		if err := emulateOffline(ctx, off); err != nil {
			t.Fatalf("the worker going offline=%v: %v", off, err)
		}
	}
	// What reaches the server, from its access log: offline, nothing may.
	served := func() int { return strings.Count(e.Logs.String(), "msg=request ") }
	offline(true)
	// Requests the page made before it went offline may still be
	// answered (a slow store, a loaded machine), and are logged when they
	// are: counted from once the log has been still a while.
	before := served()
	for still := time.Now(); time.Since(still) < 500*time.Millisecond; time.Sleep(50 * time.Millisecond) {
		if n := served(); n != before {
			before, still = n, time.Now()
		}
	}
	// The page asks for its session and the server's settings, which fail
	// offline as they should, retried on a backoff.
	p.tolerate("net::ERR_INTERNET_DISCONNECTED", "/api/me")
	p.tolerate("net::ERR_INTERNET_DISCONNECTED", "/api/info")
	p.do("reloading offline", chromedp.Reload())
	p.waitFor("the page is up", `document.querySelector('#loading').hidden`)
	p.waitFor("the page says it is offline", `document.querySelector('#offline').textContent.startsWith('You are offline')`)
	if got := webEval[bool](p, `document.querySelector('#offline').getBoundingClientRect().height > 0`); !got {
		t.Error("the offline notice takes no room on the screen")
	}
	if got := webEval[bool](p, `!!navigator.serviceWorker.controller`); !got {
		t.Error("the page opened offline is not the worker's")
	}
	// The API goes to the network, which is gone: no answer from a cache.
	if got := webEval[string](p, `fetch('/api/info').then(r => 'answered ' + r.status, () => 'failed')`); got != "failed" {
		t.Errorf("offline, GET /api/info was %s", got)
	}
	if n := served() - before; n != 0 {
		t.Errorf("offline, the server was asked %d times; the page came from the network, not the worker's shell:\n%s", n, e.Logs.String())
	}
	p.axeCheck("offline")
	p.shoot("web-offline.png")

	offline(false)
	p.waitFor("the offline notice is gone", `document.querySelector('#offline').textContent === ''`)
	p.screen("timeline")
}

// emulateOffline cuts the network of the target of ctx, or gives it back.
func emulateOffline(ctx context.Context, off bool) error {
	var rules []*network.Conditions
	if off {
		rules = []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}}
	}
	_, err := chromedp.Call(ctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		EmulateOfflineServiceWorker: &off, MatchedNetworkConditions: rules,
	})
	return err
}
