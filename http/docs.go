package http

import (
	_ "embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/julienschmidt/httprouter"
	swaggerui "github.com/swaggest/swgui/v5/static"
	"github.com/vearutop/statigz"
)

// openAPIDocument is the API description served at /api/docs.json. It is
// written by hand so that it reads, diffs and lints like any OpenAPI file;
// openapi_internal_test.go fails when it and routes() disagree, and every
// HTTP test validates its exchanges against it.
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
// browser refuses it instead of hanging on it. Scripts come from this
// origin's files alone, never from the page itself: the web client, on the
// same origin, keeps its token in the browser's storage, where any script
// the page ran could read it. Swagger UI sets styles inline, and its icons
// are data: URIs.
const docsCSP = "default-src 'none'; script-src 'self'; " +
	"style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveOpenAPI answers GET /api/docs.json.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	writeBody(w, "application/json", http.StatusOK, openAPIDocument)
	return nil
}

// The page at /api/docs and the files of its own beside Swagger UI's: the
// script that starts Swagger UI and the page's style.
var (
	//go:embed docspage/index.html
	docsPage []byte
	//go:embed docspage/herald-docs.js
	docsScript []byte
	//go:embed docspage/herald-docs.css
	docsStyle []byte
)

// docsUI serves Swagger UI from assets compiled into the binary, so the page
// works with no internet access (on a Raspberry Pi behind no uplink, say).
type docsUI struct {
	index []byte // the page itself
	// own are the page's files other than Swagger UI's, by name.
	own map[string][]byte
	// swagger serves Swagger UI's files, stored gzip-compressed: a client
	// that takes gzip gets them as stored, any other decompressed.
	swagger http.Handler
}

func newDocsUI() *docsUI {
	return &docsUI{
		index:   docsPage,
		own:     map[string][]byte{"herald-docs.js": docsScript, "herald-docs.css": docsStyle},
		swagger: http.StripPrefix(docsPagePath+"/", statigz.FileServer(swaggerui.FS)),
	}
}

// page answers GET /api/docs.
func (d *docsUI) page(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) error {
	w.Header().Set("Content-Security-Policy", docsCSP)
	writeBody(w, "text/html; charset=utf-8", http.StatusOK, d.index)
	return nil
}

// asset answers GET /api/docs/:asset with one of the page's files. Unknown
// names get the API's own 404 rather than the file server's plain text.
func (d *docsUI) asset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	name := ps.ByName("asset")
	own, isOwn := d.own[name]
	if !isOwn && !swaggerAssetExists(name) {
		return routeNotFound(r)
	}
	w.Header().Set("Content-Security-Policy", docsCSP)
	// The assets change only with the binary; a day's caching spares a
	// Raspberry Pi from sending megabytes of JavaScript on every visit.
	w.Header().Set("Cache-Control", "public, max-age=86400")
	if isOwn {
		writeBody(w, mime.TypeByExtension(path.Ext(name)), http.StatusOK, own)
		return nil
	}
	d.swagger.ServeHTTP(w, r)
	return nil
}

// swaggerAssetExists reports whether Swagger UI ships name. Most files are
// stored gzip-compressed (the file server decompresses for clients that need
// it); the stored .gz names are not themselves names the page asks for.
func swaggerAssetExists(name string) bool {
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
