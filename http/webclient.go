package http

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/http/web"
)

// The web client (package web): its page at / and its files under
// /assets/{version}/{file}.
const (
	webIndexPath  = "/"
	webAssetsPath = "/assets/:version/:file"
)

// webRoutes answers the web client's routes.
type webRoutes struct{ client *web.Client }

// page answers GET /.
func (wr webRoutes) page(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	wr.client.ServePage(w, r)
	return nil
}

// asset answers GET /assets/{version}/{file}.
func (wr webRoutes) asset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if !wr.client.ServeAsset(w, r, ps.ByName("version"), ps.ByName("file")) {
		return routeNotFound(r)
	}
	return nil
}
