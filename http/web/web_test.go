package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// The web client's requests go through a client of their own: e.Do checks
// every exchange against openapi.json, which describes the API, not the
// page, and Go's default transport would ask for gzip and unpack it behind
// the test's back.
var webHTTP = &http.Client{Transport: &http.Transport{DisableCompression: true}}

type webResponse struct {
	status int
	header http.Header
	body   []byte
}

func webGet(t *testing.T, method, url string, header http.Header) *webResponse {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	res, err := webHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &webResponse{res.StatusCode, res.Header, b}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("bad gzip: %v", err)
	}
	return out
}

// The directives the issue asks for, each of which must be present as is.
var webCSPDirectives = []string{
	"default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:",
	"connect-src 'self'", "base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
	// The installable app: its manifest and service worker, from here only.
	"manifest-src 'self'", "worker-src 'self'",
}

func checkWebCSP(t *testing.T, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	got := strings.Split(csp, ";")
	for i := range got {
		got[i] = strings.TrimSpace(got[i])
	}
	for _, d := range webCSPDirectives {
		if !slices.Contains(got, d) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, d)
		}
	}
	if strings.Contains(csp, "unsafe-") {
		t.Errorf("Content-Security-Policy %q allows something unsafe", csp)
	}
}

// TestWebIndex: / is the client's page, under a strict CSP, with nothing in
// it that the CSP would block or that reaches for another host, and it is
// revalidated on each visit.
func TestWebIndex(t *testing.T) {
	e := apitest.New(t)
	res := webGet(t, "GET", e.URL+"/", nil)
	if res.status != http.StatusOK {
		t.Fatalf("status = %d, want 200: %s", res.status, res.body)
	}
	if got, want := res.header.Get("Content-Type"), "text/html; charset=utf-8"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	checkWebCSP(t, res.header)
	if got, want := res.header.Get("Cache-Control"), "no-cache"; got != want {
		t.Errorf("Cache-Control = %q, want %q", got, want)
	}
	if got := res.header.Get("ETag"); !regexp.MustCompile(`^"[0-9a-f]+"$`).MatchString(got) {
		t.Errorf("ETag = %q, want a strong tag", got)
	}
	if got, want := res.header.Get("Vary"), "Accept-Encoding"; got != want {
		t.Errorf("Vary = %q, want %q", got, want)
	}
	if got, want := res.header.Get("X-Content-Type-Options"), "nosniff"; got != want {
		t.Errorf("X-Content-Type-Options = %q, want %q", got, want)
	}

	page := string(res.body)
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(page, -1) {
		if !strings.Contains(tag, `src="/assets/`) || !strings.Contains(tag, `type="module"`) {
			t.Errorf("script %s is not one of the client's modules; the CSP would block it", tag)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)<style`),                         // inline style sheet
		regexp.MustCompile(`(?i)\sstyle\s*=`),                    // style attribute
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),                 // inline event handler
		regexp.MustCompile(`(?i)(src|href)\s*=\s*"(https?:)?//`), // another host
		regexp.MustCompile(`(?i)javascript:`),
	} {
		if m := bad.FindString(page); m != "" {
			t.Errorf("page contains %q", m)
		}
	}
	for _, want := range []string{`<html lang="en">`, `name="viewport"`, `href="/api/docs"`, `<main`, `role="status"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(page, "{{") {
		t.Error("page still holds a template mark")
	}

	// A revisit with the ETag costs a 304 and no body.
	again := webGet(t, "GET", e.URL+"/", http.Header{"If-None-Match": {res.header.Get("ETag")}})
	if again.status != http.StatusNotModified || len(again.body) != 0 {
		t.Errorf("revalidation: status %d with %d bytes, want 304 and none", again.status, len(again.body))
	}
	if got := webGet(t, "GET", e.URL+"/", http.Header{"If-None-Match": {`"other"`}}); got.status != http.StatusOK {
		t.Errorf("a stale ETag got %d, want 200", got.status)
	}
}

// webFiles crawls the client from its page: the files index.html names,
// the modules each script imports, the manifest and the icons it names,
// and the service worker app.js registers and the icons it shows. It
// returns their URLs, page first.
func webFiles(t *testing.T, base string) []string {
	t.Helper()
	page := webGet(t, "GET", base+"/", nil)
	urls := []string{"/"}
	add := func(u string) {
		if !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="(/assets/[^"]+|/manifest\.webmanifest)"`).FindAllStringSubmatch(string(page.body), -1) {
		add(m[1])
	}
	imports := regexp.MustCompile(`(?m)^import\s[^'"]*['"](\./[^'"]+)['"]`)
	registers := regexp.MustCompile(`serviceWorker\.register\('(/[^']+)'\)`)
	workerIcons := regexp.MustCompile("`/assets/\\$\\{VERSION\\}/([^`]+)`")
	version := ""
	for i := 1; i < len(urls); i++ {
		if v := regexp.MustCompile(`^/assets/([^/]+)/`).FindStringSubmatch(urls[i]); v != nil {
			version = v[1]
		}
		res := webGet(t, "GET", base+urls[i], nil)
		if res.status != http.StatusOK {
			t.Fatalf("%s: status %d", urls[i], res.status)
		}
		switch {
		case urls[i] == "/manifest.webmanifest":
			var m struct{ Icons []struct{ Src string } }
			if err := json.Unmarshal(res.body, &m); err != nil {
				t.Fatalf("%s: %v", urls[i], err)
			}
			for _, icon := range m.Icons {
				add(icon.Src)
			}
		case urls[i] == "/sw.js":
			for _, m := range workerIcons.FindAllStringSubmatch(string(res.body), -1) {
				add("/assets/" + version + "/" + m[1])
			}
		case strings.HasSuffix(urls[i], ".js"):
			for _, m := range imports.FindAllStringSubmatch(string(res.body), -1) {
				add(path.Join(path.Dir(urls[i]), m[1]))
			}
			for _, m := range registers.FindAllStringSubmatch(string(res.body), -1) {
				add(m[1])
			}
		}
	}
	return urls
}

// TestWebAssets: every file the page loads is served with its type, the
// CSP, a year's caching (its URL changes with its content), gzip when the
// client takes it and identity otherwise; HEAD answers like GET without the
// body. Every file of the client is reached, so none is dead weight.
func TestWebAssets(t *testing.T) {
	e := apitest.New(t)
	urls := webFiles(t, e.URL)

	onDisk, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range onDisk {
		if f.Name() == "index.html" || path.Ext(f.Name()) == ".go" {
			continue
		}
		if !slices.ContainsFunc(urls, func(u string) bool { return path.Base(u) == f.Name() }) {
			t.Errorf("%s is embedded but the page never loads it", f.Name())
		}
	}

	types := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
		".svg": "image/svg+xml",
		".png": "image/png",
	}
	for _, u := range urls[1:] {
		if !strings.HasPrefix(u, "/assets/") {
			continue // at a fixed address: TestWebManifest and TestWebWorker
		}
		t.Run(path.Base(u), func(t *testing.T) {
			if !regexp.MustCompile(`^/assets/[0-9a-f]{16}/[a-z0-9-]+\.[a-z]+$`).MatchString(u) {
				t.Errorf("asset URL %s does not carry a content version", u)
			}
			plain := webGet(t, "GET", e.URL+u, nil)
			if plain.status != http.StatusOK {
				t.Fatalf("status = %d", plain.status)
			}
			if got, want := plain.header.Get("Content-Type"), types[path.Ext(u)]; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			if got, want := plain.header.Get("Cache-Control"), "public, max-age=31536000, immutable"; got != want {
				t.Errorf("Cache-Control = %q, want %q", got, want)
			}
			if got, want := plain.header.Get("Vary"), "Accept-Encoding"; got != want {
				t.Errorf("Vary = %q, want %q", got, want)
			}
			if got := plain.header.Get("Content-Encoding"); got != "" {
				t.Errorf("no Accept-Encoding, yet Content-Encoding = %q", got)
			}
			checkWebCSP(t, plain.header)

			zipped := webGet(t, "GET", e.URL+u, http.Header{"Accept-Encoding": {"gzip, deflate, br"}})
			if path.Ext(u) == ".png" {
				// Compressed already: sent as it is.
				if got := zipped.header.Get("Content-Encoding"); got != "" || !bytes.Equal(zipped.body, plain.body) {
					t.Errorf("a PNG was sent with Content-Encoding %q", got)
				}
				return
			}
			if got := zipped.header.Get("Content-Encoding"); got != "gzip" {
				t.Fatalf("Accept-Encoding gzip, yet Content-Encoding = %q", got)
			}
			if !bytes.Equal(gunzip(t, zipped.body), plain.body) {
				t.Error("the gzip body does not unpack to the identity body")
			}
			if len(zipped.body) >= len(plain.body) {
				t.Errorf("gzip body is %d bytes, identity %d", len(zipped.body), len(plain.body))
			}
			if zipped.header.Get("ETag") == plain.header.Get("ETag") {
				t.Error("the gzip and identity bodies share an ETag")
			}

			head := webGet(t, "HEAD", e.URL+u, http.Header{"Accept-Encoding": {"gzip"}})
			if head.status != http.StatusOK || len(head.body) != 0 {
				t.Errorf("HEAD: status %d with %d bytes, want 200 and none", head.status, len(head.body))
			}
			if got, want := head.header.Get("Content-Length"), zipped.header.Get("Content-Length"); got != want {
				t.Errorf("HEAD Content-Length = %q, GET's is %q", got, want)
			}
		})
	}

	t.Run("HEAD /", func(t *testing.T) {
		get := webGet(t, "GET", e.URL+"/", nil)
		head := webGet(t, "HEAD", e.URL+"/", nil)
		if head.status != http.StatusOK || len(head.body) != 0 {
			t.Errorf("status %d with %d bytes, want 200 and none", head.status, len(head.body))
		}
		if got, want := head.header.Get("Content-Length"), get.header.Get("Content-Length"); got != want || got == "" {
			t.Errorf("Content-Length = %q, GET's is %q", got, want)
		}
		checkWebCSP(t, head.header)
	})

	// Unknown files, other versions and escapes get the API's 404.
	version := path.Base(path.Dir(urls[1]))
	for _, p := range []string{
		"/assets/" + version + "/nope.js",
		"/assets/" + version + "/index.html",
		"/assets/0123456789abcdef/app.js",
		"/assets/" + version + "/..%2Fweb.go",
		"/assets/" + version + "/",
		"/assets/app.js",
		"/app.js",
	} {
		res := webGet(t, "GET", e.URL+p, nil)
		if res.status != http.StatusNotFound || res.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("GET %s: status %d, %s; want a 404 problem", p, res.status, res.header.Get("Content-Type"))
		}
	}
}

// TestWebEncodingNegotiation: gzip only where Accept-Encoding allows it
// (RFC 9110 §12.5.3), q=0 being a refusal.
func TestWebEncodingNegotiation(t *testing.T) {
	e := apitest.New(t)
	for header, want := range map[string]string{
		"":                   "",
		"gzip":               "gzip",
		"GZIP":               "gzip",
		"br, gzip;q=0.5":     "gzip",
		"x-gzip":             "gzip",
		"*":                  "gzip",
		"identity":           "",
		"br":                 "",
		"gzip;q=0":           "",
		"gzip; q=0.000":      "",
		"*, gzip;q=0":        "",
		"*;q=0":              "",
		"deflate, *;q=0.1":   "gzip",
		"gzip;q=0.001, br":   "gzip",
		"gzip;q=nonsense, *": "",
	} {
		h := http.Header{}
		if header != "" {
			h.Set("Accept-Encoding", header)
		}
		res := webGet(t, "GET", e.URL+"/", h)
		if got := res.header.Get("Content-Encoding"); got != want {
			t.Errorf("Accept-Encoding %q: Content-Encoding = %q, want %q", header, got, want)
		}
	}
}

// TestWebWeight: the budget, 60 KB for every file of the client
// as sent compressed. The PNG icons are not part of it: a browser fetches
// them when the app is installed or a notification shown, not on a visit;
// they have a budget of their own.
func TestWebWeight(t *testing.T) {
	const budget, iconBudget = 60 * 1024, 24 * 1024
	e := apitest.New(t)
	total, icons := 0, 0
	for _, u := range webFiles(t, e.URL) {
		res := webGet(t, "GET", e.URL+u, http.Header{"Accept-Encoding": {"gzip"}})
		if path.Ext(u) == ".png" {
			icons += len(res.body)
		} else {
			total += len(res.body)
		}
	}
	t.Logf("the web client weighs %d bytes compressed (budget %d), its icons %d (budget %d)", total, budget, icons, iconBudget)
	if total > budget {
		t.Errorf("the web client weighs %d bytes compressed, over the budget of %d", total, budget)
	}
	if icons > iconBudget {
		t.Errorf("the icons weigh %d bytes, over their budget of %d", icons, iconBudget)
	}
}
