package http_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"herald/http/internal/apitest"
)

// internalDetail matches what an error chain looks like when it leaks into
// a detail: a Go error kind at the end, a package name, a format-verb
// accident or a nil.
var internalDetail = regexp.MustCompile(`(?i):\s*(not found|conflict|forbidden|unauthorized|invalid|precondition failed)$|bolt|bbolt|%!|<nil>|\berr\b|herald/`)

// TestErrorDetailsAreForPeople walks every error row of the contract and
// checks that the problem's detail is a sentence for the client: present,
// free of internals, and for some rows exactly the sentence promised.
func TestErrorDetailsAreForPeople(t *testing.T) {
	e := apitest.New(t, apitest.WithMaxBody(2048))
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	m := e.Post(ada, "ada's message")
	path := msgPath(apitest.MsgID(t, m))
	loggedOut := e.Login("ada@example.com", "correct horse battery")
	e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: loggedOut})

	rows := []struct {
		name   string
		req    apitest.Request
		status int
		detail string // exact detail when the contract promises one, else ""
	}{
		{"malformed body", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":`}, 400, ""},
		{"bad parameter", apitest.Request{Method: "GET", Path: "/api/messages?limit=0", Token: ada}, 400, ""},
		{"unknown field", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"x","colour":"red"}`}, 400, ""},
		{"read-only field", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"x","user":{}}`}, 400, ""},
		{"cursor of another search", apitest.Request{Method: "GET", Path: "/api/messages?q=other&cursor=AgAAAAAAAAAHq5s2c0lG7hI", Token: ada}, 400, ""},
		{"no token", apitest.Request{Method: "GET", Path: "/api/me"}, 401, ""},
		{"unknown token", apitest.Request{Method: "GET", Path: "/api/me", Token: "herald_" + strings.Repeat("A", 43)}, 401, ""},
		{"malformed token", apitest.Request{Method: "GET", Path: "/api/me", Token: "not-a-token"}, 401, "the bearer token is malformed"},
		{"revoked token", apitest.Request{Method: "GET", Path: path, Token: loggedOut}, 401, "the bearer token is unknown or was revoked"},
		{"wrong password", apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json", Body: `{"username":"ada@example.com","password":"wrong password"}`}, 401, "e-mail or password is incorrect"},
		{"unknown e-mail", apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json", Body: `{"username":"nobody@example.com","password":"wrong password"}`}, 401, "e-mail or password is incorrect"},
		{"not the owner", apitest.Request{Method: "DELETE", Path: path, Token: bob}, 403, "message " + strings.TrimPrefix(path, "/api/messages/") + " belongs to another user; only its owner or an administrator may delete it"},
		{"no such message", apitest.Request{Method: "GET", Path: "/api/messages/999", Token: ada}, 404, "message 999 does not exist"},
		{"not a message ID", apitest.Request{Method: "GET", Path: "/api/messages/abc", Token: ada}, 404, ""},
		{"no such route", apitest.Request{Method: "GET", Path: "/api/nothing"}, 404, ""},
		{"method not allowed", apitest.Request{Method: "PUT", Path: "/api/messages"}, 405, ""},
		{"e-mail taken", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"Ada@Example.com","password":"correct horse battery"}`}, 409, "the e-mail Ada@Example.com is already registered"},
		{"If-Match mismatch", apitest.Request{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"y"}`, Header: http.Header{"If-Match": {`"1-99"`}}}, 412, ""},
		{"body too large", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"` + strings.Repeat("x", 4096) + `"}`}, 413, "request body is larger than 2048 bytes"},
		{"unsupported content type", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "text/plain", Body: "hello"}, 415, ""},
		{"invalid field", apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"   "}`}, 422, ""},
		{"missing e-mail", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"password":"correct horse battery"}`}, 422, ""},
	}
	// An expired token: a second server whose tokens live a minute.
	short := apitest.New(t, apitest.WithTokenTTL(time.Minute))
	expiring := short.Register("old@example.com", "correct horse battery")
	short.Clock.Advance(time.Minute)
	res := short.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: expiring})
	if p := apitest.AssertProblem(t, res, 401); p["detail"] != "the bearer token has expired; log in again" {
		t.Errorf("expired token: detail = %q", p["detail"])
	}

	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			res := e.Do(row.req)
			p := apitest.AssertProblem(t, res, row.status)
			detail, _ := p["detail"].(string)
			switch {
			case detail == "":
				t.Errorf("detail is empty")
			case internalDetail.MatchString(detail):
				t.Errorf("detail %q reads like an internal error", detail)
			case row.detail != "" && detail != row.detail:
				t.Errorf("detail = %q, want %q", detail, row.detail)
			}
		})
	}
}
