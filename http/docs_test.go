package http_test

import (
	"bytes"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// TestDocsJSON: the served document is the one every exchange is
// checked against (apitest.OpenAPIFile), byte for byte.
func TestDocsJSON(t *testing.T) {
	e := apitest.New(t)
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/docs.json"})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("status = %d, want %d", got, want)
	}
	if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	path, err := apitest.OpenAPIFile()
	if err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Body, file) {
		t.Errorf("served document differs from %s", path)
	}
	if got, want := res.JSON(t)["openapi"], "3.1.0"; got != want {
		t.Errorf("openapi = %v, want %v", got, want)
	}
}

// TestDocsPage: the page works offline, so nothing in it may point at
// another host, and it is configured to read our document and keep a
// pasted token.
func TestDocsPage(t *testing.T) {
	e := apitest.New(t)
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/docs"})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("status = %d, want %d", got, want)
	}
	if got, want := res.Header.Get("Content-Type"), "text/html"; !strings.HasPrefix(got, want) {
		t.Errorf("Content-Type = %q, want %s", got, want)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("Content-Security-Policy = %q, want connect-src limited to 'self'", csp)
	}
	page := string(res.Body)
	// An absolute or protocol-relative src or href, or a known CDN, would
	// make the browser reach for another host.
	outsideHost := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|googleapis|gstatic|unpkg|jsdelivr|cdnjs|validator\.swagger\.io|petstore`)
	if m := outsideHost.FindString(page); m != "" {
		t.Errorf("page refers to another host (%q):\n%s", m, page)
	}
	for _, want := range []string{
		`src="/api/docs/swagger-ui-bundle.js"`,
		`src="/api/docs/herald-docs.js"`,
		`href="/api/docs/swagger-ui.css"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	// The script that starts Swagger UI reads our document and keeps a
	// pasted token.
	script := e.Do(apitest.Request{Method: "GET", Path: "/api/docs/herald-docs.js"})
	if got, want := script.Status, http.StatusOK; got != want {
		t.Fatalf("GET /api/docs/herald-docs.js: status = %d, want %d", got, want)
	}
	for _, want := range []string{
		`url: "/api/docs.json"`,
		`persistAuthorization: true`,
		`validatorUrl: null`,
	} {
		if !strings.Contains(string(script.Body), want) {
			t.Errorf("herald-docs.js lacks %s", want)
		}
	}
	// The router never redirects, so the trailing-slash form is not the page.
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/docs/"}), http.StatusNotFound)
}

// TestDocsPageRunsNoInlineScript: the web client keeps its token in the
// browser's storage, on the same origin as the documentation page, so the
// page's Content-Security-Policy lets no script run but this origin's
// files, and the page holds no script of its own for it to refuse.
func TestDocsPageRunsNoInlineScript(t *testing.T) {
	e := apitest.New(t)
	for _, path := range []string{"/api/docs", "/api/docs/herald-docs.js", "/api/docs/swagger-ui-bundle.js"} {
		res := e.Do(apitest.Request{Method: "GET", Path: path})
		if got, want := res.Status, http.StatusOK; got != want {
			t.Fatalf("GET %s: status = %d, want %d", path, got, want)
		}
		csp := res.Header.Get("Content-Security-Policy")
		directives := make(map[string][]string)
		for d := range strings.SplitSeq(csp, ";") {
			if fields := strings.Fields(d); len(fields) > 0 {
				directives[fields[0]] = fields[1:]
			}
		}
		// script-src-elem and script-src-attr would override script-src.
		for _, name := range []string{"script-src-elem", "script-src-attr"} {
			if v, ok := directives[name]; ok {
				t.Errorf("GET %s: Content-Security-Policy %q has %s %v", path, csp, name, v)
			}
		}
		if got, want := directives["script-src"], []string{"'self'"}; !slices.Equal(got, want) {
			t.Errorf("GET %s: Content-Security-Policy %q: script-src %v, want %v", path, csp, got, want)
		}
		if got, want := directives["default-src"], []string{"'none'"}; !slices.Equal(got, want) {
			t.Errorf("GET %s: Content-Security-Policy %q: default-src %v, want %v", path, csp, got, want)
		}
	}
	page := string(e.Do(apitest.Request{Method: "GET", Path: "/api/docs"}).Body)
	scripts := regexp.MustCompile(`(?is)<script\b([^>]*)>(.*?)</script>`).FindAllStringSubmatch(page, -1)
	if len(scripts) == 0 {
		t.Fatalf("page has no script:\n%s", page)
	}
	for _, s := range scripts {
		if !strings.Contains(s[1], "src=") || strings.TrimSpace(s[2]) != "" {
			t.Errorf("page has an inline script, which its policy refuses: %s", s[0])
		}
	}
	if m := regexp.MustCompile(`(?i)\son[a-z]+\s*=|javascript:`).FindString(page); m != "" {
		t.Errorf("page has an inline event handler or javascript: URL (%q)", m)
	}
}

// TestDocsAssets: every file the page loads is served from the binary, and
// a name that is not one of them gets the API's 404.
func TestDocsAssets(t *testing.T) {
	e := apitest.New(t)
	for asset, wantType := range map[string]string{
		"swagger-ui-bundle.js":            "application/javascript",
		"swagger-ui-standalone-preset.js": "application/javascript",
		"swagger-ui.css":                  "text/css",
		"favicon-32x32.png":               "image/png",
		"favicon-16x16.png":               "image/png",
		"herald-docs.js":                  "text/javascript",
		"herald-docs.css":                 "text/css",
	} {
		t.Run(asset, func(t *testing.T) {
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/docs/" + asset})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, apitest.Truncate(res.Body, 200))
			}
			if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, wantType) {
				t.Errorf("Content-Type = %q, want %s", got, wantType)
			}
			if got, want := res.Header.Get("Cache-Control"), "public, max-age=86400"; got != want {
				t.Errorf("Cache-Control = %q, want %q", got, want)
			}
			if len(res.Body) < 100 {
				t.Errorf("body is only %d bytes", len(res.Body))
			}
		})
	}
	// swagger-ui.css.gz is how a file is stored, not a name the page uses.
	for _, path := range []string{"/api/docs/nope.js", "/api/docs/embed.go", "/api/docs/..", "/api/docs/swagger-ui.css.gz"} {
		t.Run(path, func(t *testing.T) {
			apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: path}), http.StatusNotFound)
		})
	}
}
