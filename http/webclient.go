package http

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/http/web"
)

// The web client (package web): its page at /, its files under
// /assets/{version}/{file}, and the installable app's manifest and service
// worker, at addresses of their own (a worker's scope is the directory it
// is served from).
const (
	webIndexPath    = "/"
	webAssetsPath   = "/assets/:version/:file"
	webManifestPath = "/manifest.webmanifest"
	webWorkerPath   = "/sw.js"
)

// webRoutes answers the web client's routes.
type webRoutes struct{ client *web.Client }

// page answers GET /.
func (wr webRoutes) page(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	wr.client.ServePage(w, r)
	return nil
}

// manifest answers GET /manifest.webmanifest.
func (wr webRoutes) manifest(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	wr.client.ServeManifest(w, r)
	return nil
}

// worker answers GET /sw.js.
func (wr webRoutes) worker(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	wr.client.ServeWorker(w, r)
	return nil
}

// asset answers GET /assets/{version}/{file}.
func (wr webRoutes) asset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if !wr.client.ServeAsset(w, r, ps.ByName("version"), ps.ByName("file")) {
		return routeNotFound(r)
	}
	return nil
}
