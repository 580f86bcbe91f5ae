package http

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"herald/http/stream"
)

// streamParams are the parameters a stream takes.
var streamParams = []string{"lastEventId", "owner", "q"}

// streamMessages serves GET /api/messages/stream: its parameters are read
// and its caller authenticated here, with search's rules, and the hub
// serves it (package stream).
func (s *Server) streamMessages(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	if err := checkParamNames(params, "the stream", streamParams); err != nil {
		return err
	}
	var req stream.Request
	if req.Filter.Terms, err = parseQueryTerms(params); err != nil {
		return err
	}
	if req.Filter.Owner, err = parseOwner(params); err != nil {
		return err
	}
	// The header is what a reconnecting EventSource sends, newer than the
	// parameter in the URL it was first opened with.
	resume, name := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if resume == "" {
		resume, name = params.Get("lastEventId"), "lastEventId"
	}
	if resume != "" {
		n, err := strconv.ParseUint(resume, 10, 64)
		if err != nil {
			return badRequest(name, "%s must be the id of an event this stream sent", name)
		}
		req.From = &n
	}
	if req.User, req.Token, err = s.store.Authenticate(r.Context(), caller(r).tokenHash); err != nil {
		return err
	}
	noteCaller(r, req.User)
	return s.streams.Serve(w, r, req)
}
