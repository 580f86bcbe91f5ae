package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// openAPIFile is the document the server embeds and serves at /api/docs.json;
// TestDocsJSON proves the two are the same bytes.
const openAPIFile = "openapi.json"

// apiContract is openapi.json loaded, validated and routed.
type apiContract struct {
	router  routers.Router
	problem *openapi3.SchemaRef // for answers to paths the document lacks
}

// loadedContract loads the document once per test binary: every HTTP
// exchange of every test is checked against it, and parsing it each time
// would cost more than the exchanges themselves.
var loadedContract = sync.OnceValues(func() (*apiContract, error) {
	return loadContract(openAPIFile)
})

func loadContract(path string) (*apiContract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", path, err)
	}
	// The document's server is "/", relative to wherever Herald runs; the
	// tests' servers listen on random ports, so match operations by path.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing %s: %w", path, err)
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil {
		return nil, fmt.Errorf("%s has no Problem schema", path)
	}
	return &apiContract{router: router, problem: problem}, nil
}

// contractOptions are the validator's settings. IncludeResponseStatus makes
// an undocumented status a failure, not a pass.
func contractOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		// Defaults would be written into the request's query; the request
		// checked must be the one that was sent.
		SkipSettingDefaults: true,
		AuthenticationFunc:  bearerPresent,
	}
}

// bearerPresent satisfies the Bearer scheme when the request carries a
// bearer token at all. Whether the server accepts that token is the server's
// business: a refused one must get a documented 401, which the response
// check covers.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return in.NewError(fmt.Errorf("unexpected security scheme %q", in.SecuritySchemeName))
	}
	scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// checkContract reports, without stopping the test, an exchange that breaks
// openapi.json. e.do calls it for every request, so every HTTP test in the
// package also tests the document. It uses Errorf so that tests sending
// requests from several goroutines may call it.
func (e *env) checkContract(sent *http.Request, body string, res *response) {
	e.t.Helper()
	if err := validateExchange(sent, body, res); err != nil {
		e.t.Errorf("%s %s -> %d breaks openapi.json: %v\nresponse body: %s",
			sent.Method, sent.URL.RequestURI(), res.Status, err, truncate(res.Body, 500))
	}
}

// validateExchange checks one request and its response against the document.
// The response must always be one the document describes: a documented
// status with its headers and body. Tests send malformed requests on purpose,
// so a request the document forbids is not itself an error, but the server
// must then have refused it with a 4xx: a server that accepts what its
// contract forbids is lying in one place or the other.
func validateExchange(sent *http.Request, body string, res *response) error {
	c, err := loadedContract()
	if err != nil {
		return err
	}
	ctx := context.Background()
	// A fresh request: the body of the one sent has been read, and the
	// validator reads and may rewrite what it is given.
	req := sent.Clone(ctx)
	req.Body, req.GetBody = http.NoBody, nil
	if body != "" {
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
	}

	route, pathParams, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return checkUnrouted(c, res, http.StatusNotFound)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if err := checkUnrouted(c, res, http.StatusMethodNotAllowed); err != nil {
			return err
		}
		if res.Header.Get("Allow") == "" {
			return errors.New("405 without an Allow header")
		}
		return nil
	case err != nil:
		return fmt.Errorf("finding the operation: %w", err)
	}

	opts := contractOptions()
	reqIn := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams,
		Route:      route,
		Options:    opts,
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, reqIn); reqErr != nil && (res.Status < 400 || res.Status > 499) {
		return fmt.Errorf("the document forbids this request, yet the server answered %d instead of a 4xx: %w", res.Status, reqErr)
	}
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 res.Status,
		Header:                 res.Header,
		Options:                opts,
	}
	resIn.SetBodyBytes(res.Body)
	if err := openapi3filter.ValidateResponse(ctx, resIn); err != nil {
		return fmt.Errorf("response of operation %s: %w", route.Operation.OperationID, err)
	}
	return nil
}

// checkUnrouted checks the answer to a path or method the document does not
// have: it has no operation to hold a documented response, so it must be
// the router's own refusal, a problem document with the given status.
func checkUnrouted(c *apiContract, res *response, status int) error {
	if res.Status != status {
		return fmt.Errorf("the document has no such operation, yet the server answered %d instead of %d", res.Status, status)
	}
	if got, want := res.Header.Get("Content-Type"), "application/problem+json"; got != want {
		return fmt.Errorf("Content-Type = %q, want %q", got, want)
	}
	value, err := decodeJSONValue(res.Body)
	if err != nil {
		return err
	}
	if err := c.problem.Value.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("body is not a Problem: %w", err)
	}
	return nil
}

func decodeJSONValue(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return v, nil
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}

// TestContractCatchesViolations proves the checker is not toothless: an
// undocumented status, a missing required header, a wrong body and an
// accepted forbidden request must each be reported.
func TestContractCatchesViolations(t *testing.T) {
	get := func(path, token string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	jsonHeader := func(ct string, extra ...string) http.Header {
		h := http.Header{"Content-Type": {ct}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	message := `{"id":7,"content":"hi","user":{"email":"ada@example.com"},"createdAt":"2026-01-02T15:04:05.000000Z","updatedAt":"2026-01-02T15:04:05.000000Z"}`
	problem := func(status int) string {
		return fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d}`, http.StatusText(status), status)
	}

	tests := []struct {
		name    string
		req     *http.Request
		res     *response
		wantErr bool
	}{
		{"documented", get("/api/messages/7", "t"),
			&response{Status: 200, Header: jsonHeader("application/json", "ETag", `"7-1"`), Body: []byte(message)}, false},
		{"undocumented status", get("/api/messages/7", "t"),
			&response{Status: 418, Header: jsonHeader("application/problem+json"), Body: []byte(problem(418))}, true},
		{"missing required ETag", get("/api/messages/7", "t"),
			&response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(message)}, true},
		{"leaked field", get("/api/me", "t"),
			&response{Status: 200, Header: jsonHeader("application/json"),
				Body: []byte(`{"id":1,"email":"a@b.c","roles":[],"createdAt":"2026-01-02T15:04:05Z","passwordHash":"x"}`)}, true},
		{"error that is not a problem", get("/api/messages/7", "t"),
			&response{Status: 404, Header: jsonHeader("text/plain"), Body: []byte("not found")}, true},
		{"forbidden request accepted", get("/api/messages/7", ""),
			&response{Status: 200, Header: jsonHeader("application/json", "ETag", `"7-1"`), Body: []byte(message)}, true},
		{"forbidden request refused", get("/api/messages/7", ""),
			&response{Status: 401, Header: jsonHeader("application/problem+json", "WWW-Authenticate", `Bearer realm="herald"`), Body: []byte(problem(401))}, false},
		{"bad limit accepted", get("/api/messages?limit=101", "t"),
			&response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(`{"items":[],"next":null}`)}, true},
		{"unknown path answered", get("/api/nope", "t"),
			&response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(`{}`)}, true},
		{"unknown path refused", get("/api/nope", "t"),
			&response{Status: 404, Header: jsonHeader("application/problem+json"), Body: []byte(problem(404))}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateExchange(tt.req, "", tt.res)
			if got, want := err != nil, tt.wantErr; got != want {
				t.Errorf("error = %v, want error: %v", err, want)
			}
		})
	}
}

// TestDocsJSON: the served document is the checked one, byte for byte.
func TestDocsJSON(t *testing.T) {
	e := newEnv(t)
	res := e.do(request{Method: "GET", Path: "/api/docs.json"})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("status = %d, want %d", got, want)
	}
	if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	file, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Body, file) {
		t.Errorf("served document differs from %s", openAPIFile)
	}
	if got, want := res.JSON(t)["openapi"], "3.1.0"; got != want {
		t.Errorf("openapi = %v, want %v", got, want)
	}
}

// TestDocsPage: the page works offline, so nothing in it may point at
// another host, and it is configured to read our document and keep a
// pasted token.
func TestDocsPage(t *testing.T) {
	e := newEnv(t)
	res := e.do(request{Method: "GET", Path: "/api/docs"})
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
	script := e.do(request{Method: "GET", Path: "/api/docs/herald-docs.js"})
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
	assertProblem(t, e.do(request{Method: "GET", Path: "/api/docs/"}), http.StatusNotFound)
}

// TestDocsPageRunsNoInlineScript: the web client keeps its token in the
// browser's storage, on the same origin as the documentation page, so the
// page's Content-Security-Policy lets no script run but this origin's
// files, and the page holds no script of its own for it to refuse.
func TestDocsPageRunsNoInlineScript(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{"/api/docs", "/api/docs/herald-docs.js", "/api/docs/swagger-ui-bundle.js"} {
		res := e.do(request{Method: "GET", Path: path})
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
	page := string(e.do(request{Method: "GET", Path: "/api/docs"}).Body)
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
	e := newEnv(t)
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
			res := e.do(request{Method: "GET", Path: "/api/docs/" + asset})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, truncate(res.Body, 200))
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
			assertProblem(t, e.do(request{Method: "GET", Path: path}), http.StatusNotFound)
		})
	}
}
