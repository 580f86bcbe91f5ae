package http_test

import (
	"net/http"
	"testing"

	"herald/http/internal/apitest"
)

// TestWalkthrough follows the path through the API of docs/api.md's
// walkthrough: register, log in, post, search, edit, delete, log out.
func TestWalkthrough(t *testing.T) {
	e := apitest.New(t)
	e.Register("ada@example.com", "correct horse")
	token := e.Login("ada@example.com", "correct horse")

	msg := e.Post(token, "hello world")
	id := msg["id"].(float64)
	if got, want := msg["user"].(map[string]any)["email"], "ada@example.com"; got != want {
		t.Errorf("owner = %v, want %v", got, want)
	}

	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=HELLO", Token: token})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("search status = %d, want %d: %s", got, want, res.Body)
	}
	items := res.JSON(t)["items"].([]any)
	if got, want := len(items), 1; got != want {
		t.Fatalf("search found %d, want %d", got, want)
	}
	if got := items[0].(map[string]any)["id"]; got != id {
		t.Errorf("search found id %v, want %v", got, id)
	}

	res = e.Do(apitest.Request{Method: "PATCH", Path: "/api/messages/1", Token: token,
		ContentType: "application/merge-patch+json", Body: `{"content":"edited"}`})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("patch status = %d, want %d: %s", got, want, res.Body)
	}
	if got, want := res.JSON(t)["content"], "edited"; got != want {
		t.Errorf("content = %v, want %v", got, want)
	}

	res = e.Do(apitest.Request{Method: "DELETE", Path: "/api/messages/1", Token: token})
	if got, want := res.Status, http.StatusNoContent; got != want {
		t.Fatalf("delete status = %d, want %d: %s", got, want, res.Body)
	}
	res = e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: token})
	if got, want := res.Status, http.StatusNoContent; got != want {
		t.Fatalf("logout status = %d, want %d", got, want)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: token}), http.StatusUnauthorized)
}
