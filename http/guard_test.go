package http_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// TestWriteLimits: by default an account gets 60 writes at once, then one
// every 5 seconds; beyond, 429 with Retry-After; administrators are not
// limited; creates, edits and deletes all count.
func TestWriteLimits(t *testing.T) {
	e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{WritesPerAccount: auth.WritesPerAccount()}))
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	first := e.Post(ada, "first")
	for i := range 58 {
		e.Post(ada, fmt.Sprint("message ", i))
	}
	path := messagePath(apitest.MsgID(t, first))
	if res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"edited"}`}); res.Status != http.StatusOK {
		t.Fatalf("the 60th write: %d %s", res.Status, res.Body)
	}
	for _, req := range []apitest.Request{
		{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"61st"}`},
		{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"again"}`},
		{Method: "DELETE", Path: path, Token: ada},
	} {
		res := e.Do(req)
		apitest.AssertProblem(t, res, http.StatusTooManyRequests)
		if got := res.Header.Get("Retry-After"); got != "5" {
			t.Errorf("%s: Retry-After %q, want 5", req.Method, got)
		}
	}
	e.Clock.Advance(5 * time.Second)
	e.Post(ada, "one more after 5 s")
	for i := range 100 {
		e.Post(root, fmt.Sprint("an administrator's ", i))
	}
}
