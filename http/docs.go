package http

import (
	_ "embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
	"github.com/swaggest/swgui"
	swaggerui "github.com/swaggest/swgui/v5/static"
	"github.com/swaggest/swgui/v5emb"
)

// openAPIDocument is the API description served at /api/docs.json. It is
// written by hand so that it reads, diffs and lints like any OpenAPI file;
// openapi_test.go fails when it and routes() disagree, and every HTTP test
// validates its exchanges against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// Paths of the API description and of the page that shows it.
const (
	docsJSONPath = "/api/docs.json"
	docsPagePath = "/api/docs"
)

// docsCSP keeps the documentation page to this origin whatever its scripts
// try: the page must work offline, so any outside request is a bug, and the
// browser refuses it instead of hanging on it. Swagger UI needs inline
// styles, its bootstrap script is inline, and its icons are data: URIs.
const docsCSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; " +
	"style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveOpenAPI answers GET /api/docs.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	writeBody(w, "application/json", http.StatusOK, openAPIDocument)
	return nil
}

// docsUI serves Swagger UI from assets compiled into the binary, so the page
// works with no internet access (on a Raspberry Pi behind no uplink, say).
type docsUI struct {
	ui http.Handler
}

func newDocsUI() *docsUI {
	return &docsUI{ui: v5emb.NewHandlerWithConfig(swgui.Config{
		Title:       "Herald API",
		SwaggerJSON: docsJSONPath,
		// Assets live under /api/docs/; the page itself is /api/docs, which
		// swgui also answers, since the router never redirects.
		BasePath: docsPagePath + "/",
		SettingsUI: map[string]string{
			// A pasted token survives a reload, so trying several
			// operations does not mean pasting it again each time.
			"persistAuthorization": "true",
			// Swagger UI would send the document to validator.swagger.io
			// for a badge; the page must not talk to any outside host.
			"validatorUrl": "null",
			// Show the schemas section: it is the reference for the bodies.
			"defaultModelsExpandDepth": "1",
			"displayRequestDuration":   "true",
		},
	})}
}

// page answers GET /api/docs.
func (d *docsUI) page(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	w.Header().Set("Content-Security-Policy", docsCSP)
	d.ui.ServeHTTP(w, r)
	return nil
}

// asset answers GET /api/docs/:asset with one of Swagger UI's files. Unknown
// names get the API's own 404 rather than the file server's plain text.
func (d *docsUI) asset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	name := ps.ByName("asset")
	if !docsAssetExists(name) {
		return routeNotFound(r)
	}
	w.Header().Set("Content-Security-Policy", docsCSP)
	// The assets change only with the binary; a day's caching spares a
	// Raspberry Pi from sending megabytes of JavaScript on every visit.
	w.Header().Set("Cache-Control", "public, max-age=86400")
	d.ui.ServeHTTP(w, r)
	return nil
}

// docsAssetExists reports whether Swagger UI ships name. Most files are
// stored gzip-compressed (the file server decompresses for clients that need
// it); the stored .gz names are not themselves names the page asks for.
func docsAssetExists(name string) bool {
	if strings.HasSuffix(name, ".gz") {
		return false
	}
	for _, n := range []string{name, name + ".gz"} {
		if fi, err := fs.Stat(swaggerui.FS, n); err == nil && !fi.IsDir() {
			return true
		}
	}
	return false
}
