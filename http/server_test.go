package http_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// TestHead: HEAD is answered wherever GET is (RFC 9110 §9.1), with GET's
// status and headers and no body, auth included. It is sent with the plain
// client: HEAD mirrors GET in the router and is not a documented operation.
func TestHead(t *testing.T) {
	e := apitest.New(t)
	token := e.Register("ada@example.com", "correct horse")
	e.Post(token, "hello")
	tests := []struct {
		path, token string
		status      int
	}{
		{"/healthz", "", http.StatusOK},
		{"/api/messages/1", token, http.StatusOK},
		{"/api/messages/1", "", http.StatusUnauthorized},
		{"/api/messages/2", token, http.StatusNotFound},
		{"/api/messages?limit=1", token, http.StatusOK},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(http.MethodHead, e.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tt.token != "" {
			req.Header.Set("Authorization", "Bearer "+tt.token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got, want := res.StatusCode, tt.status; got != want {
			t.Errorf("HEAD %s: status = %d, want %d", tt.path, got, want)
		}
		if tt.status == http.StatusOK && tt.path == "/api/messages/1" && res.Header.Get("ETag") == "" {
			t.Errorf("HEAD %s: no ETag", tt.path)
		}
	}
}

// TestHealthUnavailable: /healthz answers 200 only while the database is
// usable; once it is closed the answer is a 503 problem, so a supervisor
// can tell. It builds its own server because apitest.New's cleanup needs the
// database open.
func TestHealthUnavailable(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(heraldhttp.NewServer(db, auth.NewHasher(apitest.FastParams, 1), heraldhttp.Config{}))
	defer srv.Close()
	get := func() *apitest.Response {
		res, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return &apitest.Response{Status: res.StatusCode, Header: res.Header, Body: b}
	}
	if got, want := get().Status, http.StatusOK; got != want {
		t.Fatalf("open database: status = %d, want %d", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res := get()
	apitest.AssertProblem(t, res, http.StatusServiceUnavailable)
	if res.Header.Get("Retry-After") == "" {
		t.Errorf("closed database: no Retry-After")
	}
}
