package http_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/http/internal/apitest"
)

// withKey is the header of a request that carries the Idempotency-Key
// values v, as sent; none for none.
func withKey(v ...string) http.Header {
	if len(v) == 0 {
		return nil
	}
	return http.Header{"Idempotency-Key": v}
}

// sameAnswer fails unless res is first, to the byte: status, body,
// Location and ETag.
func sameAnswer(t *testing.T, what string, res, first *apitest.Response) {
	t.Helper()
	if res.Status != first.Status || !bytes.Equal(res.Body, first.Body) {
		t.Errorf("%s: %d %s\nwant the first answer: %d %s", what, res.Status, res.Body, first.Status, first.Body)
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if got, want := res.Header.Get(h), first.Header.Get(h); got != want {
			t.Errorf("%s: %s %q, want the first answer's %q", what, h, got, want)
		}
	}
}

// TestIdempotencyKeyRetries: a create sent again with its key and the
// same fields, however the body spells them and on either path, gets the
// first answer to the byte and stores nothing; with other fields it is a
// 422 naming the header; another account's key, or no key, creates.
func TestIdempotencyKeyRetries(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	create := func(path, token, contentType, body string, key ...string) *apitest.Response {
		t.Helper()
		return e.Do(apitest.Request{Method: "POST", Path: path, Token: token, ContentType: contentType, Body: body, Header: withKey(key...)})
	}
	const key = `"8e03978e-40d5-43e8-bc93-6894a57f9324"`
	first := create("/api/messages", ada, "application/json", `{"content":"hello, once"}`, key)
	if first.Status != http.StatusCreated || first.Header.Get("Location") == "" {
		t.Fatalf("first create: %d %s", first.Status, first.Body)
	}
	counts := e.Counts()
	multipart, multipartType := apitest.MultipartBody(t, map[string]string{"content": "hello, once"})
	for _, retry := range []struct {
		name, path, contentType, body string
	}{
		{"the same request", "/api/messages", "application/json", `{"content":"hello, once"}`},
		{"on the original path", "/api/message", "application/json", `{"content":"hello, once"}`},
		{"spaced otherwise", "/api/messages", "application/json; charset=utf-8", "{ \"content\" :\n \"hello, once\" }"},
		{"as a form", "/api/messages", "application/x-www-form-urlencoded", apitest.FormBody(map[string]string{"content": "hello, once"})},
		{"as multipart", "/api/messages", multipartType, multipart},
	} {
		sameAnswer(t, retry.name, create(retry.path, ada, retry.contentType, retry.body, key), first)
	}
	reused := create("/api/messages", ada, "application/json", `{"content":"hello, twice"}`, key)
	if p := apitest.AssertProblem(t, reused, http.StatusUnprocessableEntity); !slices.Equal(apitest.ViolationPaths(p), []string{"Idempotency-Key"}) ||
		!strings.Contains(p["detail"].(string), "Idempotency-Key") {
		t.Errorf("the key with other content: %s, want a violation naming Idempotency-Key", reused.Body)
	}
	if got := e.Counts(); got != counts {
		t.Errorf("counts after the retries = %+v, want %+v", got, counts)
	}

	// Bob's key is his, whatever ada's are; without a key, a create is a
	// create.
	if res := create("/api/messages", bob, "application/json", `{"content":"hello, once"}`, key); res.Status != http.StatusCreated ||
		res.Header.Get("Location") == first.Header.Get("Location") {
		t.Errorf("bob with ada's key: %d %s, want a message of his own", res.Status, res.Body)
	}
	if res := create("/api/messages", ada, "application/json", `{"content":"hello, once"}`); res.Status != http.StatusCreated ||
		res.Header.Get("Location") == first.Header.Get("Location") {
		t.Errorf("ada without a key: %d %s, want a new message", res.Status, res.Body)
	}

	// Deleted since, the message stays deleted, and the retry still gets
	// the first answer.
	location := first.Header.Get("Location")
	if res := e.Do(apitest.Request{Method: "DELETE", Path: location, Token: ada}); res.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", res.Status, res.Body)
	}
	sameAnswer(t, "a retry after the deletion", create("/api/messages", ada, "application/json", `{"content":"hello, once"}`, key), first)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: location, Token: ada}), http.StatusNotFound)

	// A day on, the key is new.
	e.Clock.Advance(24 * time.Hour)
	if res := create("/api/messages", ada, "application/json", `{"content":"hello, once"}`, key); res.Status != http.StatusCreated ||
		res.Header.Get("Location") == location {
		t.Errorf("the key a day on: %d %s, want a new message", res.Status, res.Body)
	}
}

// TestIdempotencyKeyEdited: a retry after the message was edited gets the
// first answer, with the first content, which the retry itself carries.
func TestIdempotencyKeyEdited(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	send := func() *apitest.Response {
		return e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
			Body: `{"content":"first draft"}`, Header: withKey(`"draft-1"`)})
	}
	first := send()
	res := e.Do(apitest.Request{Method: "PATCH", Path: first.Header.Get("Location"), Token: ada, ContentType: "application/json",
		Body: `{"content":"final version"}`})
	if res.Status != http.StatusOK {
		t.Fatalf("edit: %d %s", res.Status, res.Body)
	}
	sameAnswer(t, "a retry after the edit", send(), first)
	if got := e.Do(apitest.Request{Method: "GET", Path: first.Header.Get("Location"), Token: ada}).JSON(t)["content"]; got != "final version" {
		t.Errorf("the message after a retry holds %q, want the edit's", got)
	}
}

// TestIdempotencyKeyMalformed: a key that is not one structured-field
// string of 1 to 255 printable characters is refused with 400 naming the
// header, and nothing is stored.
func TestIdempotencyKeyMalformed(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	for _, tt := range []struct {
		name   string
		values []string
		status int
	}{
		{"a UUID in quotes", []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, http.StatusCreated},
		{"escapes", []string{`"a \"quoted\" \\ key"`}, http.StatusCreated},
		{"spaces around", []string{`  "spaced"  `}, http.StatusCreated},
		{"255 characters", []string{`"` + strings.Repeat("k", 255) + `"`}, http.StatusCreated},
		{"256 characters", []string{`"` + strings.Repeat("k", 256) + `"`}, http.StatusBadRequest},
		{"no quotes", []string{"8e03978e-40d5-43e8-bc93-6894a57f9324"}, http.StatusBadRequest},
		{"empty string", []string{`""`}, http.StatusBadRequest},
		{"unclosed", []string{`"open`}, http.StatusBadRequest},
		{"after the string", []string{`"a"b`}, http.StatusBadRequest},
		{"a parameter", []string{`"a";v=1`}, http.StatusBadRequest},
		{"a bad escape", []string{`"a\nb"`}, http.StatusBadRequest},
		{"not ASCII", []string{`"clé"`}, http.StatusBadRequest},
		{"a list", []string{`"a", "b"`}, http.StatusBadRequest},
		{"twice", []string{`"a"`, `"a"`}, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
				Body: `{"content":"with a key"}`, Header: withKey(tt.values...)})
			if tt.status == http.StatusCreated {
				if res.Status != http.StatusCreated {
					t.Fatalf("%d %s, want 201", res.Status, res.Body)
				}
				return
			}
			if p := apitest.AssertProblem(t, res, tt.status); !slices.Equal(apitest.ViolationPaths(p), []string{"Idempotency-Key"}) {
				t.Errorf("violations %v, want Idempotency-Key", apitest.ViolationPaths(p))
			}
			if got := e.Counts(); got != before {
				t.Errorf("counts %+v after a refused key, want %+v", got, before)
			}
		})
	}
}

// TestIdempotencyKeyElsewhere: a POST or PATCH that takes no key refuses
// one, before doing anything; GET and DELETE, idempotent anyway, ignore
// it.
func TestIdempotencyKeyElsewhere(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	e.Register("root@example.com", "correct horse battery")
	e.MakeAdmin("root@example.com")
	root := e.Login("root@example.com", "correct horse battery")
	msg := e.Post(ada, "to edit")
	location := msgPath(apitest.MsgID(t, msg))
	key := withKey(`"k"`)
	for _, req := range []apitest.Request{
		{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"bob@example.com","password":"correct horse battery"}`},
		{Method: "POST", Path: "/api/login", ContentType: "application/json", Body: `{"username":"ada@example.com","password":"correct horse battery"}`},
		{Method: "POST", Path: "/api/logout", Token: ada},
		{Method: "PATCH", Path: location, Token: ada, ContentType: "application/json", Body: `{"content":"edited"}`},
		{Method: "POST", Path: "/api/admin/invites", Token: root, ContentType: "application/json", Body: `{}`},
	} {
		before := e.Counts()
		req.Header = key
		res := e.Do(req)
		if p := apitest.AssertProblem(t, res, http.StatusBadRequest); !slices.Equal(apitest.ViolationPaths(p), []string{"Idempotency-Key"}) {
			t.Errorf("%s %s with a key: violations %v, want Idempotency-Key", req.Method, req.Path, apitest.ViolationPaths(p))
		}
		if got := e.Counts(); got != before {
			t.Errorf("%s %s with a key changed the counts to %+v from %+v", req.Method, req.Path, got, before)
		}
	}
	if res := e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: ada, Header: key}); res.Status != http.StatusOK {
		t.Errorf("GET /api/me with a key: %d %s", res.Status, res.Body)
	}
	if res := e.Do(apitest.Request{Method: "DELETE", Path: location, Token: ada, Header: key}); res.Status != http.StatusNoContent {
		t.Errorf("DELETE %s with a key: %d %s", location, res.Status, res.Body)
	}
}

// TestIdempotencyKeyAcrossInstances: the first answer outlives the server
// that gave it. On bbolt the server stops and a new one opens the file;
// on PostgreSQL a second instance answers while the first still runs.
func TestIdempotencyKeyAcrossInstances(t *testing.T) {
	clock := apitest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	// Opened first by the test itself, so that on PostgreSQL the database
	// standing for path outlives the subtests.
	if err := apitest.OpenStore(t, path, clock.Now).Close(); err != nil {
		t.Fatal(err)
	}
	var (
		ada   string
		first *apitest.Response
	)
	send := func(e *apitest.Env) *apitest.Response {
		return e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json",
			Body: `{"content":"said before the restart"}`, Header: withKey(`"restart-1"`)})
	}
	t.Run("first", func(t *testing.T) {
		e := apitest.NewOn(t, apitest.OpenStore(t, path, clock.Now), clock)
		ada = e.Register("ada@example.com", "correct horse battery")
		if first = send(e); first.Status != http.StatusCreated {
			t.Fatalf("first create: %d %s", first.Status, first.Body)
		}
		if apitest.OnPostgres(t) {
			other := apitest.NewOn(t, apitest.OpenStore(t, path, clock.Now), clock)
			sameAnswer(t, "the retry to another instance", send(other), first)
		}
	})
	t.Run("after a restart", func(t *testing.T) {
		e := apitest.NewOn(t, apitest.OpenStore(t, path, clock.Now), clock)
		sameAnswer(t, "the retry after a restart", send(e), first)
		if c := e.Counts(); c.Messages != 1 {
			t.Errorf("%d messages, want the one", c.Messages)
		}
	})
}
