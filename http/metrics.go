package http

import (
	"net/http"
	"strconv"
	"time"
)

// observe records one answered request: by route pattern (never the raw
// path, which would make one series per message ID), method and status.
func (s *Server) observe(r *http.Request, route string, status int, took time.Duration) {
	if s.metrics == nil {
		return
	}
	if route == "" {
		route = "unmatched"
	}
	labels := `{route="` + route + `",method="` + r.Method + `"`
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
