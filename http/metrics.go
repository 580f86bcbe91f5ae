package http

import (
	"net/http"
	"strconv"
	"time"
)

// otherMethod is the method label of every request whose method no route
// serves.
const otherMethod = "other"

// methodLabels returns the method labels the metrics may carry: the
// methods of the route table, with HEAD (served wherever GET is) and
// OPTIONS (which the router answers on every path). Any other method is
// counted as otherMethod: net/http accepts any token as a method, and a
// label taken from the request would let a client add a series, kilobytes
// long, with every request it makes.
func methodLabels(routes []route) map[string]bool {
	labels := map[string]bool{http.MethodHead: true, http.MethodOptions: true}
	for _, r := range routes {
		labels[r.method] = true
	}
	return labels
}

// observe records one answered request: by route pattern (never the raw
// path, which would make one series per message ID), method and status,
// each from a set the server fixes, whatever the client sends.
func (s *Server) observe(r *http.Request, route string, status int, took time.Duration) {
	if s.metrics == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	method := r.Method
	if !s.methodLabels[method] {
		method = otherMethod
	}
	labels := `{route="` + route + `",method="` + method + `"`
	s.metrics.GetOrCreateCounter(`herald_http_requests_total` + labels + `,status="` + strconv.Itoa(status) + `"}`).Inc()
	s.metrics.GetOrCreateHistogram(`herald_http_request_duration_seconds` + labels + `}`).Update(took.Seconds())
	if status == http.StatusTooManyRequests {
		s.metrics.GetOrCreateCounter(`herald_rate_limited_total{route="` + route + `"}`).Inc()
	}
}

// countLogin records a login's outcome: ok, failed (wrong e-mail or
// password), limited or busy.
func (s *Server) countLogin(outcome string) {
	if s.metrics != nil {
		s.metrics.GetOrCreateCounter(`herald_logins_total{outcome="` + outcome + `"}`).Inc()
	}
}
