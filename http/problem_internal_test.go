package http

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"herald/model"
)

// TestOutcomeUnknownProblem: a write whose outcome is unknown is a 503
// with Retry-After and a problem of its own type, whose title and detail
// are the same whichever store met it (a store's own detail and the
// failure under it are for the log), and are the ones the OpenAPI
// document shows. A refusal for the database out of reach shows the
// store's detail, never the failure under it.
func TestOutcomeUnknownProblem(t *testing.T) {
	p, header, known := problemFor(&model.Error{Kind: model.ErrOutcomeUnknown, RetryAfter: 3 * time.Second,
		Detail: "the commit of the write did not end in time", Cause: io.ErrUnexpectedEOF})
	if !known || p.Status != http.StatusServiceUnavailable || p.Type != outcomeUnknownType ||
		p.Title != outcomeUnknownTitle || p.Detail != outcomeUnknownDetail || header.Get("Retry-After") != "3" {
		t.Errorf("a write whose outcome is unknown: %+v, Retry-After %q", p, header.Get("Retry-After"))
	}
	example, ok := loadEmbeddedDocument(t).Components.Examples["OutcomeUnknown"]
	if !ok || example.Value == nil {
		t.Fatal("openapi.json has no OutcomeUnknown example")
	}
	shown, _ := example.Value.Value.(map[string]any)
	if shown["type"] != p.Type || shown["title"] != p.Title || shown["detail"] != p.Detail || shown["status"] != float64(p.Status) {
		t.Errorf("openapi.json shows %v, the server answers %+v", shown, p)
	}

	const detail = "the database cannot be reached now; try again shortly"
	p, header, known = problemFor(&model.Error{Kind: model.ErrUnavailable, RetryAfter: 2 * time.Second, Detail: detail,
		Cause: errors.New("read unix @->/tmp/.s.PGSQL.5432: read: connection reset by peer")})
	if !known || p.Status != http.StatusServiceUnavailable || p.Type != "about:blank" || p.Detail != detail || header.Get("Retry-After") != "2" {
		t.Errorf("the database out of reach: %+v, Retry-After %q", p, header.Get("Retry-After"))
	}
}
