package http_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// TestRegisterHandleAndName: registration takes a handle (any case,
// stored lower-case) and a name; without them the handle is made from
// the e-mail and the account is named by it. A taken handle is a 409
// naming handle; a malformed handle or a blank name a 422 naming it.
func TestRegisterHandleAndName(t *testing.T) {
	e := apitest.New(t)
	register := func(body string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/register", ContentType: "application/json", Body: body})
	}
	for _, tc := range []struct {
		body, handle, name string
	}{
		{`{"email":"ada@example.com","password":"correct horse battery"}`, "ada", "ada"},
		{`{"email":"ada@example.org","password":"correct horse battery","name":" Ada Lovelace "}`, "ada2", "Ada Lovelace"},
		{`{"email":"countess@example.com","password":"correct horse battery","handle":"Lovelace","name":"Ada, Countess"}`, "lovelace", "Ada, Countess"},
	} {
		res := register(tc.body)
		if res.Status != http.StatusCreated {
			t.Fatalf("%s: %d %s", tc.body, res.Status, res.Body)
		}
		if m := res.JSON(t); m["handle"] != tc.handle || m["name"] != tc.name {
			t.Errorf("%s: handle %v, name %v; want %s, %s", tc.body, m["handle"], m["name"], tc.handle, tc.name)
		}
	}
	for _, tc := range []struct {
		body   string
		status int
		field  string
	}{
		{`{"email":"other@example.com","password":"correct horse battery","handle":"ADA2"}`, http.StatusConflict, "handle"},
		{`{"email":"other@example.com","password":"correct horse battery","handle":"2ada"}`, http.StatusUnprocessableEntity, "handle"},
		{`{"email":"other@example.com","password":"correct horse battery","handle":"a"}`, http.StatusUnprocessableEntity, "handle"},
		{`{"email":"other@example.com","password":"correct horse battery","handle":"ada-l"}`, http.StatusUnprocessableEntity, "handle"},
		{`{"email":"other@example.com","password":"correct horse battery","name":"   "}`, http.StatusUnprocessableEntity, "name"},
		{`{"email":"other@example.com","password":"correct horse battery","name":""}`, http.StatusUnprocessableEntity, "name"},
		{`{"email":"other@example.com","password":"correct horse battery","name":"` + strings.Repeat("n", 65) + `"}`, http.StatusUnprocessableEntity, "name"},
		{`{"email":"other@example.com","password":"correct horse battery","name":"a\u202eb"}`, http.StatusUnprocessableEntity, "name"},
	} {
		p := apitest.AssertProblem(t, register(tc.body), tc.status)
		if got := apitest.ViolationPaths(p); !slices.Equal(got, []string{tc.field}) {
			t.Errorf("%s: violations %q, want %s", tc.body, got, tc.field)
		}
	}
}

// TestUpdateProfile: PATCH /api/me changes the handle and the name, as
// JSON or as a merge patch; the user JSON it answers is /api/me's from
// then on. A taken handle is a 409 naming it, a removed field or a
// malformed value a 422 naming it, and nothing changes.
func TestUpdateProfile(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	e.Register("bob@example.com", "correct horse battery")
	patch := func(contentType, body string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPatch, Path: "/api/me", Token: ada, ContentType: contentType, Body: body})
	}
	res := patch("application/json", `{"handle":"Lovelace","name":"Ada Lovelace"}`)
	if res.Status != http.StatusOK {
		t.Fatalf("PATCH /api/me: %d %s", res.Status, res.Body)
	}
	if m := res.JSON(t); m["handle"] != "lovelace" || m["name"] != "Ada Lovelace" || m["email"] != "ada@example.com" {
		t.Errorf("PATCH /api/me answered %s", res.Body)
	}
	res = patch("application/merge-patch+json", `{"name":"Ada"}`)
	if m := res.JSON(t); res.Status != http.StatusOK || m["handle"] != "lovelace" || m["name"] != "Ada" {
		t.Errorf("a merge patch of the name: %d %s", res.Status, res.Body)
	}
	for _, tc := range []struct {
		contentType, body string
		status            int
		field             string
	}{
		{"application/json", `{"handle":"BOB"}`, http.StatusConflict, "handle"},
		{"application/json", `{"handle":"9lives"}`, http.StatusUnprocessableEntity, "handle"},
		{"application/merge-patch+json", `{"handle":null}`, http.StatusUnprocessableEntity, "handle"},
		{"application/merge-patch+json", `{"name":null}`, http.StatusUnprocessableEntity, "name"},
		{"application/json", `{"name":" "}`, http.StatusUnprocessableEntity, "name"},
	} {
		p := apitest.AssertProblem(t, patch(tc.contentType, tc.body), tc.status)
		if got := apitest.ViolationPaths(p); !slices.Equal(got, []string{tc.field}) {
			t.Errorf("%s: violations %q, want %s", tc.body, got, tc.field)
		}
	}
	me := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me", Token: ada}).JSON(t)
	if me["handle"] != "lovelace" || me["name"] != "Ada" {
		t.Errorf("/api/me after the refusals: %v", me)
	}
}

// TestProfile: GET /api/users/{handle} answers the account's id, handle,
// name and creation time, and nothing else (no e-mail), in any letter
// case of the handle; 404 for a handle nobody has; 401 without a token.
func TestProfile(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	res := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/users/ADA", Token: bob})
	if res.Status != http.StatusOK {
		t.Fatalf("GET /api/users/ADA: %d %s", res.Status, res.Body)
	}
	m := res.JSON(t)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"createdAt", "handle", "id", "name"}) || m["handle"] != "ada" || m["name"] != "ada" {
		t.Errorf("profile %s, want id, handle, name and createdAt of ada", res.Body)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/users/nobody", Token: ada}), http.StatusNotFound)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/users/ada"}), http.StatusUnauthorized)
}
