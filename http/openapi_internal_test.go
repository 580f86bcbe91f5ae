package http

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// loadEmbeddedDocument parses and validates the document the server serves.
func loadEmbeddedDocument(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPIDocument)
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if got, want := doc.OpenAPIMajorMinor(), "3.1"; got != want {
		t.Fatalf("openapi.json is OpenAPI %s, want %s", got, want)
	}
	return doc
}

// openAPIPath turns an httprouter pattern into an OpenAPI path template:
// "/api/messages/:id" becomes "/api/messages/{id}".
func openAPIPath(pattern string) string {
	segments := strings.Split(pattern, "/")
	for i, s := range segments {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			segments[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(segments, "/")
}

// TestOpenAPIMatchesRoutes is the drift check: every route is documented,
// every documented operation is routed, and each says the truth about who
// may call it.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadEmbeddedDocument(t)

	documented := make(map[string]*openapi3.Operation)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = op
		}
	}
	// routes() only builds the table; it touches neither database nor hasher.
	routed := make(map[string]route)
	for _, rt := range (&Server{}).routes() {
		// The web client's page and files are for people, not API
		// operations; package web's tests cover them.
		switch rt.path {
		case webIndexPath, webAssetsPath, webManifestPath, webWorkerPath:
			continue
		}
		key := rt.method + " " + openAPIPath(rt.path)
		if _, dup := routed[key]; dup {
			t.Errorf("route %s is registered twice", key)
		}
		routed[key] = rt
	}

	for key := range routed {
		if documented[key] == nil {
			t.Errorf("route %s is not in openapi.json", key)
		}
	}
	for key := range documented {
		if _, ok := routed[key]; !ok {
			t.Errorf("openapi.json documents %s, which is not routed", key)
		}
	}

	bearerOnly := openapi3.SecurityRequirements{{"Bearer": []string{}}}
	for key, rt := range routed {
		op := documented[key]
		if op == nil {
			continue
		}
		if op.Security == nil {
			t.Errorf("%s: no security list; public operations need an explicit empty one", key)
			continue
		}
		switch rt.access {
		case public:
			if len(*op.Security) != 0 {
				t.Errorf("%s is public, but openapi.json asks for %v", key, *op.Security)
			}
		default:
			if got := *op.Security; !securityEqual(got, bearerOnly) {
				t.Errorf("%s needs a bearer token, but openapi.json asks for %v", key, got)
			}
			if r := op.Responses.Status(http.StatusUnauthorized); r == nil || r.Value.Headers["WWW-Authenticate"] == nil {
				t.Errorf("%s: no 401 with WWW-Authenticate documented", key)
			}
		}
		if rt.access == roleUser && op.Responses.Status(http.StatusForbidden) == nil {
			t.Errorf("%s requires a role, but no 403 is documented", key)
		}
		if op.Responses.Status(http.StatusInternalServerError) == nil {
			t.Errorf("%s: no 500 documented; any operation can fail unexpectedly", key)
		}
		if op.OperationID == "" {
			t.Errorf("%s has no operationId", key)
		}
		if len(op.Tags) != 1 {
			t.Errorf("%s has tags %v, want exactly one", key, op.Tags)
		} else if doc.Tags.Get(op.Tags[0]) == nil {
			t.Errorf("%s has undeclared tag %q", key, op.Tags[0])
		}
	}
}

// TestOpenAPITags: registration and login are tagged `User`;
// the other account and message operations follow the same split.
func TestOpenAPITags(t *testing.T) {
	doc := loadEmbeddedDocument(t)
	for _, tt := range []struct{ method, path, tag string }{
		{http.MethodPost, "/api/register", "User"},
		{http.MethodPost, "/api/login", "User"},
		{http.MethodGet, "/api/me", "User"},
		{http.MethodPost, "/api/logout", "User"},
		{http.MethodPost, "/api/message", "Message"},
		{http.MethodPost, "/api/messages", "Message"},
		{http.MethodGet, "/api/messages", "Message"},
		{http.MethodGet, "/api/messages/{id}", "Message"},
		{http.MethodPatch, "/api/messages/{id}", "Message"},
		{http.MethodDelete, "/api/messages/{id}", "Message"},
	} {
		item := doc.Paths.Value(tt.path)
		if item == nil || item.GetOperation(tt.method) == nil {
			t.Errorf("%s %s is not documented", tt.method, tt.path)
			continue
		}
		if got := item.GetOperation(tt.method).Tags; !slices.Equal(got, []string{tt.tag}) {
			t.Errorf("%s %s has tags %v, want [%s]", tt.method, tt.path, got, tt.tag)
		}
	}
	bearer := doc.Components.SecuritySchemes["Bearer"]
	if bearer == nil {
		t.Fatal("no Bearer security scheme")
	}
	if got, want := bearer.Value.Type+" "+bearer.Value.Scheme, "http bearer"; got != want {
		t.Errorf("Bearer scheme is %q, want %q", got, want)
	}
}

// TestOpenAPIRequestMedia: the documented bodies are those of bodyRoutes,
// the routes that do not refuse one, and every documented body accepts
// exactly the media types decodeBody does for it, so the page offers none
// that would get 415.
func TestOpenAPIRequestMedia(t *testing.T) {
	doc := loadEmbeddedDocument(t)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil {
				continue
			}
			if _, ok := bodyRoutes[[2]string{method, routerPath(path)}]; !ok {
				t.Errorf("%s %s documents a body, but the route is not in bodyRoutes: it refuses one", method, path)
			}
		}
	}
	type bodyRoute struct {
		method, path string
		spec         fieldSpec
	}
	var tests []bodyRoute
	for key, spec := range bodyRoutes {
		tests = append(tests, bodyRoute{key[0], openAPIPath(key[1]), spec})
	}
	// The bodies the page offers to try, each with an example.
	examples := map[string]bool{
		"POST /api/register": true, "POST /api/login": true, "POST /api/message": true, "POST /api/messages": true,
		"PATCH /api/messages/{id}": true,
	}
	for _, tt := range tests {
		op := doc.Paths.Value(tt.path).GetOperation(tt.method)
		if op == nil || op.RequestBody == nil {
			t.Errorf("%s %s: no request body documented", tt.method, tt.path)
			continue
		}
		var got []string
		for media, mt := range op.RequestBody.Value.Content {
			got = append(got, media)
			if examples[tt.method+" "+tt.path] && mt.Example == nil && len(mt.Examples) == 0 {
				t.Errorf("%s %s %s: no example", tt.method, tt.path, media)
			}
			if mt.Schema == nil {
				t.Errorf("%s %s %s: no schema", tt.method, tt.path, media)
				continue
			}
			var props []string
			for name := range mt.Schema.Value.Properties {
				props = append(props, name)
			}
			slices.Sort(props)
			if want := slices.Sorted(slices.Values(tt.spec.writable)); !slices.Equal(props, want) {
				t.Errorf("%s %s %s: properties %v, want the writable fields %v", tt.method, tt.path, media, props, want)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(acceptedMedia(tt.spec)))
		if !slices.Equal(got, want) {
			t.Errorf("%s %s accepts %v in openapi.json, %v in decodeBody", tt.method, tt.path, got, want)
		}
		for _, status := range []int{http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity} {
			if op.Responses.Status(status) == nil {
				t.Errorf("%s %s decodes a body but documents no %d", tt.method, tt.path, status)
			}
		}
	}
}

// routerPath turns an OpenAPI path template into an httprouter pattern:
// "/api/messages/{id}" becomes "/api/messages/:id".
func routerPath(template string) string {
	segments := strings.Split(template, "/")
	for i, s := range segments {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			segments[i] = ":" + s[1:len(s)-1]
		}
	}
	return strings.Join(segments, "/")
}

func securityEqual(a, b openapi3.SecurityRequirements) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for name, scopes := range a[i] {
			other, ok := b[i][name]
			if !ok || !slices.Equal(scopes, other) {
				return false
			}
		}
	}
	return true
}
