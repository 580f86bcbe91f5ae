// Package web is Herald's web client: one page at / and its modules,
// style and icons under /assets/{version}/{file}, the app's manifest at
// /manifest.webmanifest and its service worker at /sw.js, compiled into the
// binary so that it works offline and `go install` needs no build step, and
// served with their caching, compression and content policy. Package http
// routes the four paths here. The client's tests drive it in Chromium
// against a real server.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
)

// The client's files: every file of this directory but its Go code. The
// PNG icons are rendered from icon.svg by tools/icons.sh.
//
//go:embed *.html *.js *.css *.svg *.png *.webmanifest
var webFiles embed.FS

// The assets carry a version, a hash of their contents, in their URL
// (/assets/{version}/{file}): the modules import each other by relative
// URL ("./api.js"), so one version segment in index.html versions them
// all, with no rewriting of JavaScript.
const webVersionMark = "{{version}}" // replaced in the three files below at construction

// The files at fixed addresses, outside /assets/: the page, the manifest a
// browser installs the app from, and the service worker, whose address is
// its identity (a new address would be a second worker) and whose scope
// is the directory it is served from, so it must be at the root.
const (
	webIndexFile    = "index.html"
	webManifestFile = "manifest.webmanifest"
	webWorkerFile   = "sw.js"
)

// webShellMark is replaced in sw.js by the space-separated addresses of the
// app shell, which the worker keeps for when the network is gone: the page,
// the manifest and every versioned asset.
const webShellMark = "{{shell}}"

// webCSP allows nothing but this origin's own files: no inline script or
// style, no other host, no plugins, no framing. Every user-supplied string
// is rendered as text, and this is the second line of defence should one
// ever reach the page as markup. The app's manifest and service worker
// are this origin's files too, which default-src 'none' would refuse.
const webCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; manifest-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'self'; " +
	"frame-ancestors 'none'"

// Caching. index.html, the manifest and sw.js are revalidated on every
// visit (an ETag makes that a 304 of a few bytes), so a new binary's page
// is seen at once and its new worker installed. The page names its assets
// by content hash, so an asset URL always means the same bytes, and the
// browser may keep them for a year without asking again.
const (
	webIndexCacheControl = "no-cache"
	webAssetCacheControl = "public, max-age=31536000, immutable"
)

// webAsset is one file, ready to send in either encoding.
type webAsset struct {
	contentType string
	plain, gz   []byte // gz is nil when compression would not make it smaller
	etag        string // of plain; the gzip variant is a different representation and gets its own
}

// Client serves the embedded client. Compressing at construction costs
// a few milliseconds once and spares every response the work.
type Client struct {
	version                 string
	index, manifest, worker *webAsset
	assets                  map[string]*webAsset
}

// New reads the embedded files, versions and compresses them.
func New() *Client {
	files := webFiles
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // the embed patterns guarantee the directory
	}
	wc := &Client{assets: make(map[string]*webAsset)}
	fixed := make(map[string][]byte)
	// The version covers every file, the three at fixed addresses too:
	// any change makes a new sw.js, which is how browsers learn that the
	// shell they keep offline is out of date.
	sum := sha256.New()
	for _, e := range entries {
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic(err)
		}
		sum.Write([]byte(e.Name()))
		sum.Write([]byte{0})
		sum.Write(b)
		sum.Write([]byte{0})
		switch e.Name() {
		case webIndexFile, webManifestFile, webWorkerFile:
			fixed[e.Name()] = b
		default:
			wc.assets[e.Name()] = newWebAsset(e.Name(), b)
		}
	}
	wc.version = hex.EncodeToString(sum.Sum(nil))[:16]
	versioned := func(name string) []byte {
		return bytes.ReplaceAll(fixed[name], []byte(webVersionMark), []byte(wc.version))
	}
	wc.index = newWebAsset(webIndexFile, versioned(webIndexFile))
	wc.manifest = newWebAsset(webManifestFile, versioned(webManifestFile))
	shell := []string{"/", "/manifest.webmanifest"}
	for _, name := range slices.Sorted(maps.Keys(wc.assets)) {
		shell = append(shell, "/assets/"+wc.version+"/"+name)
	}
	wc.worker = newWebAsset(webWorkerFile, bytes.ReplaceAll(versioned(webWorkerFile), []byte(webShellMark), []byte(strings.Join(shell, " "))))
	return wc
}

func newWebAsset(name string, b []byte) *webAsset {
	a := &webAsset{contentType: webContentType(name), plain: b}
	h := sha256.Sum256(b)
	a.etag = `"` + hex.EncodeToString(h[:16]) + `"`
	if path.Ext(name) == ".png" {
		return a // compressed already: gzip would win a few bytes at most
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level never errs
	_, _ = zw.Write(b)                                       // writes to a bytes.Buffer do not fail
	_ = zw.Close()
	if buf.Len() < len(b) {
		a.gz = buf.Bytes()
	}
	return a
}

// webContentType names the types explicitly: mime.TypeByExtension reads the
// host's mime.types, and a module served with another type is refused.
func webContentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".webmanifest":
		return "application/manifest+json"
	}
	return "application/octet-stream"
}

// ServePage answers GET /.
func (wc *Client) ServePage(w http.ResponseWriter, r *http.Request) {
	wc.index.serve(w, r, webIndexCacheControl)
}

// ServeManifest answers GET /manifest.webmanifest.
func (wc *Client) ServeManifest(w http.ResponseWriter, r *http.Request) {
	wc.manifest.serve(w, r, webIndexCacheControl)
}

// ServeWorker answers GET /sw.js. Browsers look for a new worker at least
// once a day and on navigations whatever its caching says, but no-cache
// keeps any proxy from holding an old one.
func (wc *Client) ServeWorker(w http.ResponseWriter, r *http.Request) {
	wc.worker.serve(w, r, webIndexCacheControl)
}

// ServeAsset answers GET /assets/{version}/{file}. It reports false, and
// writes nothing, when there is no such file or version is not the
// current one: the caller answers 404 as to any unknown path, rather than
// with today's bytes, which would be cached for a year under a URL that
// promised other ones.
func (wc *Client) ServeAsset(w http.ResponseWriter, r *http.Request, version, file string) bool {
	a := wc.assets[file]
	if a == nil || version != wc.version {
		return false
	}
	a.serve(w, r, webAssetCacheControl)
	return true
}

func (a *webAsset) serve(w http.ResponseWriter, r *http.Request, cacheControl string) {
	h := w.Header()
	h.Set("Content-Security-Policy", webCSP)
	h.Set("Cache-Control", cacheControl) // replaces ServeHTTP's no-store
	h.Set("Referrer-Policy", "no-referrer")
	// Caches must key on the encoding even for an identity answer, or a
	// gzip body could be handed to a client that cannot read it.
	h.Set("Vary", "Accept-Encoding")
	body, etag := a.plain, a.etag
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gzip"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	if etagListMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// acceptsGzip reports whether an Accept-Encoding value (RFC 9110 §12.5.3)
// allows gzip: named, or covered by "*", with a q-value above zero.
func acceptsGzip(header string) bool {
	gzip, star := -1, -1 // -1: not mentioned; 0: refused; 1: accepted
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		ok := 1
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			if strings.EqualFold(k, "q") {
				if q, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || q <= 0 {
					ok = 0
				}
			}
		}
		switch strings.ToLower(strings.TrimSpace(coding)) {
		case "gzip", "x-gzip":
			gzip = ok
		case "*":
			star = ok
		}
	}
	if gzip >= 0 {
		return gzip == 1
	}
	return star == 1
}

// etagListMatches is If-None-Match's weak comparison (RFC 9110 §13.1.2).
func etagListMatches(header, etag string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}
