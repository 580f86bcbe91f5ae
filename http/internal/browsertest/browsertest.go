// Package browsertest starts the headless Chromium that the browser tests
// of the documentation page (package http) and of the web client
// (http/web) drive, and records what a page did. Only tests import it.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// RequireEnv names the variable that turns a missing Chromium from a
// skip into a failure; .ci/run sets it, so CI cannot pass without the test.
const RequireEnv = "HERALD_REQUIRE_BROWSER"

// ScreenshotDirEnv names a directory to keep the test's screenshots in after
// it ends; by default they go to the test's temporary directory.
const ScreenshotDirEnv = "HERALD_SCREENSHOT_DIR"

// FindChromium returns the browser to drive, or skips (or fails, under
// HERALD_REQUIRE_BROWSER=1) when there is none.
func FindChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	const msg = "no chromium on PATH (apt-get install chromium)"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s, and %s=1 requires the browser test", msg, RequireEnv)
	}
	t.Skipf("%s: skipping the browser test; set %s=1 to fail instead", msg, RequireEnv)
	return ""
}

// ScreenshotDir is where a browser test saves its screenshots.
func ScreenshotDir(t *testing.T) string {
	if dir := os.Getenv(ScreenshotDirEnv); dir != "" {
		return dir
	}
	return t.TempDir()
}

// NewAllocator runs chromium headless with a window of the given
// size, with nothing that talks to the outside or needs a sandbox.
func NewAllocator(ctx context.Context, chromium string, width, height int) (context.Context, context.CancelFunc) {
	return chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// No UserDataDir: chromedp then passes a fresh --user-data-dir of its
		// own and removes it with retries, as Chromium's helper processes
		// can still write there for a moment after it exits.
		chromedp.WindowSize(width, height),
	)
}

// PageWatch records what a page did that a test must check afterwards:
// every URL it requested, and every script exception or browser-logged
// error. Chromium calls its listener on one goroutine while the test reads
// on another.
type PageWatch struct {
	mu       sync.Mutex
	requests []string
	// problems are script exceptions and errors the browser logged, such as
	// a request the Content-Security-Policy refused: a refused request never
	// reaches the network, so requests alone would not show the attempt.
	problems []string
}

// Listen is the listener to hand chromedp.WithListener.
func (w *PageWatch) Listen(ev any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		w.requests = append(w.requests, ev.Request.URL)
	case *network.EventWebSocketCreated:
		w.requests = append(w.requests, ev.URL)
	case *runtime.EventExceptionThrown:
		text := "exception: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			text += " " + ev.ExceptionDetails.Exception.Description
		}
		w.problems = append(w.problems, text)
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError {
			w.problems = append(w.problems, fmt.Sprintf("%s error: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// Snapshot returns what the page did so far.
func (w *PageWatch) Snapshot() (requests, problems []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests), slices.Clone(w.problems)
}
