package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"herald/http/internal/apitest"
	"herald/http/internal/browsertest"
)

// TestBrowserTryItOut drives the documentation page as a person would, in
// headless Chromium against the real server: log in through the page's
// POST /api/login, authorize with the token it returned, create a message
// through POST /api/message, and see the 201 with the owner's e-mail. The
// page must not request anything from any other host.
func TestBrowserTryItOut(t *testing.T) {
	chromium := browsertest.FindChromium(t)
	e := apitest.New(t)
	// The credentials are the login example in openapi.json, so the page's
	// prefilled body works as it stands, as it should for a reader.
	const email, password = "ada@example.com", "correct horse battery"
	e.Register(email, password)
	server, err := url.Parse(e.URL)
	if err != nil {
		t.Fatal(err)
	}

	shotDir := browsertest.ScreenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := browsertest.NewAllocator(ctx, chromium, 1280, 1400)
	defer cancelAlloc()
	watch := &browsertest.PageWatch{}
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithListener(watch.Listen))
	defer cancelBrowser()

	// shoot saves what the viewport shows, or only the element sel when
	// one is given: the whole page is ten thousand pixels tall.
	shoot := func(name, sel string) {
		t.Helper()
		shot := chromedp.CaptureScreenshot()
		if sel != "" {
			shot = chromedp.Screenshot(chromedp.CSS(sel))
		}
		png, err := chromedp.Run(bctx, shot)
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		path := filepath.Join(shotDir, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Errorf("saving screenshot: %v", err)
			return
		}
		t.Logf("screenshot: %s", path)
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			shoot("failed.png", "")
			t.Fatalf("%s: %v", what, err)
		}
	}
	// responseOf waits for the operation's live response and returns its
	// status code and body as the page shows them.
	responseOf := func(opID string) (status, body string) {
		t.Helper()
		sel := "#" + opID + " .live-responses-table .response"
		step("waiting for the response of "+opID, chromedp.WaitVisible(chromedp.CSS(sel+" .response-col_status")))
		status, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel+" .response-col_status")))
		if err != nil {
			t.Fatal(err)
		}
		body, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel+" .response-col_description pre")))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(status), body
	}
	// tryOut opens an operation, switches it to "Try it out" and, when body
	// is not empty, replaces the prefilled request body. The body is set
	// through the element's native setter plus an input event, which is
	// how React learns of a change it did not make.
	tryOut := func(opID, body string) {
		t.Helper()
		op := "#" + opID
		step("opening "+opID,
			chromedp.Click(chromedp.CSS(op+" .opblock-summary-control")),
			chromedp.WaitVisible(chromedp.CSS(op+" .try-out__btn")),
			chromedp.Click(chromedp.CSS(op+" .try-out__btn")),
			chromedp.WaitVisible(chromedp.CSS(op+" .execute")),
		)
		if body == "" {
			return
		}
		js := fmt.Sprintf(`(() => {
			const ta = document.querySelector(%q);
			const set = Object.getOwnPropertyDescriptor(HTMLTextAreaElement.prototype, "value").set;
			set.call(ta, %q);
			ta.dispatchEvent(new Event("input", {bubbles: true}));
			return true;
		})()`, op+" textarea.body-param__text", body)
		step("filling the body of "+opID,
			chromedp.WaitVisible(chromedp.CSS(op+" textarea.body-param__text")),
			chromedp.Evaluate[chromedp.Void](js))
	}

	step("opening the documentation page",
		chromedp.Navigate(e.URL+"/api/docs"),
		chromedp.WaitVisible(chromedp.CSS("#operations-User-login")),
	)

	shoot("docs-page.png", "")

	// Log in through the page, with the example body it offers.
	tryOut("operations-User-login", "")
	step("executing login", chromedp.Click(chromedp.CSS("#operations-User-login .execute")))
	status, body := responseOf("operations-User-login")
	if got, want := status, "200"; got != want {
		shoot("failed.png", "")
		t.Fatalf("login in the page: status %q, want %q; body: %s", got, want, body)
	}
	var login struct{ Token string }
	if err := json.Unmarshal([]byte(body), &login); err != nil || login.Token == "" {
		t.Fatalf("login response shows no token (%v): %s", err, body)
	}

	// Authorize with that token in the dialog, as a reader would paste it.
	step("authorizing",
		chromedp.Click(chromedp.CSS(".auth-wrapper .authorize")),
		chromedp.WaitVisible(chromedp.CSS(".modal-ux input")),
		chromedp.SendKeys(chromedp.CSS(".modal-ux input"), login.Token),
		chromedp.Click(chromedp.CSS(".modal-ux .auth-btn-wrapper .authorize")),
		chromedp.WaitVisible(chromedp.CSS(".modal-ux .btn-done")),
		chromedp.Click(chromedp.CSS(".modal-ux .btn-done")),
	)

	// Create a message at the original, singular path.
	const content = "hello from the documentation page"
	tryOut("operations-Message-postMessage", `{"content": "`+content+`"}`)
	step("executing message creation", chromedp.Click(chromedp.CSS("#operations-Message-postMessage .execute")))
	status, body = responseOf("operations-Message-postMessage")
	// One screen from the request body down to the server's answer.
	step("scrolling to the request",
		chromedp.ScrollIntoView(chromedp.CSS("#operations-Message-postMessage .opblock-section-request-body")))
	shoot("docs-post-message.png", "")
	if got, want := status, "201"; got != want {
		t.Fatalf("POST /api/message in the page: status %q, want %q; body: %s", got, want, body)
	}
	var msg struct {
		Content string
		User    struct{ Email string }
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatalf("response body is not a message (%v): %s", err, body)
	}
	if got, want := msg.User.Email, email; got != want {
		t.Errorf("page shows owner %q, want %q", got, want)
	}
	if got, want := msg.Content, content; got != want {
		t.Errorf("page shows content %q, want %q", got, want)
	}
	if got, want := e.Counts().Messages, 1; got != want {
		t.Errorf("store holds %d messages, want %d", got, want)
	}

	// persistAuthorization: the token survives a reload of the page.
	step("reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#operations-User-login")))
	stored, err := chromedp.Run(bctx, chromedp.Evaluate[string](`localStorage.getItem("authorized") || ""`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored, login.Token) {
		t.Errorf("the token was not kept across a reload; localStorage has %q", stored)
	}

	requests, problems := watch.Snapshot()
	for _, p := range problems {
		t.Errorf("page reported %s", p)
	}
	if len(requests) == 0 {
		t.Error("saw no requests at all; the network listener is not working")
	}
	for _, raw := range requests {
		u, err := url.Parse(raw)
		if err != nil {
			t.Errorf("unparsable request URL %q", raw)
			continue
		}
		switch {
		case u.Scheme == "data", u.Scheme == "blob", u.Scheme == "about":
		case u.Host != server.Host:
			t.Errorf("page requested another host: %s", raw)
		}
	}
	t.Logf("the page made %d requests", len(requests))
}
