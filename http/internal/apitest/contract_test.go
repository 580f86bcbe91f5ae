package apitest

import (
	"fmt"
	"net/http"
	"testing"
)

// TestContractCatchesViolations proves the checker is not toothless: an
// undocumented status, a missing required header, a wrong body and an
// accepted forbidden request must each be reported.
func TestContractCatchesViolations(t *testing.T) {
	get := func(path, token string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	jsonHeader := func(ct string, extra ...string) http.Header {
		h := http.Header{"Content-Type": {ct}}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	message := `{"id":7,"content":"hi","user":{"id":1,"email":"ada@example.com","handle":"ada","name":"Ada"},` +
		`"createdAt":"2026-01-02T15:04:05.000000Z","updatedAt":"2026-01-02T15:04:05.000000Z","replyTo":null,"replies":0,"mentions":[]}`
	problem := func(status int) string {
		return fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d}`, http.StatusText(status), status)
	}

	tests := []struct {
		name    string
		req     *http.Request
		res     *Response
		wantErr bool
	}{
		{"documented", get("/api/messages/7", "t"),
			&Response{Status: 200, Header: jsonHeader("application/json", "ETag", `"7-1"`), Body: []byte(message)}, false},
		{"undocumented status", get("/api/messages/7", "t"),
			&Response{Status: 418, Header: jsonHeader("application/problem+json"), Body: []byte(problem(418))}, true},
		{"missing required ETag", get("/api/messages/7", "t"),
			&Response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(message)}, true},
		{"leaked field", get("/api/me", "t"),
			&Response{Status: 200, Header: jsonHeader("application/json"),
				Body: []byte(`{"id":1,"email":"a@b.c","roles":[],"createdAt":"2026-01-02T15:04:05Z","passwordHash":"x"}`)}, true},
		{"error that is not a problem", get("/api/messages/7", "t"),
			&Response{Status: 404, Header: jsonHeader("text/plain"), Body: []byte("not found")}, true},
		{"forbidden Request accepted", get("/api/messages/7", ""),
			&Response{Status: 200, Header: jsonHeader("application/json", "ETag", `"7-1"`), Body: []byte(message)}, true},
		{"forbidden Request refused", get("/api/messages/7", ""),
			&Response{Status: 401, Header: jsonHeader("application/problem+json", "WWW-Authenticate", `Bearer realm="herald"`), Body: []byte(problem(401))}, false},
		{"bad limit accepted", get("/api/messages?limit=101", "t"),
			&Response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(`{"items":[],"next":null}`)}, true},
		{"unknown path answered", get("/api/nope", "t"),
			&Response{Status: 200, Header: jsonHeader("application/json"), Body: []byte(`{}`)}, true},
		{"unknown path refused", get("/api/nope", "t"),
			&Response{Status: 404, Header: jsonHeader("application/problem+json"), Body: []byte(problem(404))}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateExchange(tt.req, "", tt.res)
			if got, want := err != nil, tt.wantErr; got != want {
				t.Errorf("error = %v, want error: %v", err, want)
			}
		})
	}
}
