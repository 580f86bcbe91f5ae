package http_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// Helpers of this file carry the acct prefix so they cannot collide with
// helpers other test files of the package define.

// acctTimeRE matches the API's timestamps: RFC 3339 in UTC with a six-digit
// fraction.
var acctTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)

// acctTime checks that v is an API timestamp and returns it parsed.
func acctTime(t *testing.T, name string, v any) time.Time {
	t.Helper()
	s, ok := v.(string)
	if !ok || !acctTimeRE.MatchString(s) {
		t.Fatalf("%s = %#v, want RFC 3339 UTC with a six-digit fraction", name, v)
	}
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s = %q: %v", name, s, err)
	}
	return tm
}

// acctKeys returns the sorted keys of a decoded JSON object.
func acctKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// acctRegister registers over JSON, fails the test unless it answers 201, and
// returns the decoded body.
func acctRegister(t *testing.T, e *apitest.Env, email, password string) map[string]any {
	t.Helper()
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"email": email, "password": password})})
	if res.Status != http.StatusCreated {
		t.Fatalf("register %q: status %d: %s", email, res.Status, res.Body)
	}
	return res.JSON(t)
}

// acctLogin sends a JSON login and returns the response, whatever it is.
func acctLogin(t *testing.T, e *apitest.Env, username, password string) *apitest.Response {
	t.Helper()
	return e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"username": username, "password": password})})
}

// acctMustLogin logs in over JSON and returns the new token.
func acctMustLogin(t *testing.T, e *apitest.Env, username, password string) string {
	t.Helper()
	res := acctLogin(t, e, username, password)
	if res.Status != http.StatusOK {
		t.Fatalf("login %q: status %d: %s", username, res.Status, res.Body)
	}
	token, _ := res.JSON(t)["token"].(string)
	return token
}

// acctAssertNoLogin checks that the credentials of a refused registration do
// not work: nothing was stored under them.
func acctAssertNoLogin(t *testing.T, e *apitest.Env, email, password string) {
	t.Helper()
	res := acctLogin(t, e, email, password)
	if res.Status == http.StatusOK {
		t.Errorf("login with the refused credentials %q / %q succeeded: %s", email, password, res.Body)
	}
}

// acctAssertUnchanged checks that the store holds what it held before.
func acctAssertUnchanged(t *testing.T, e *apitest.Env, before bolt.Counts) {
	t.Helper()
	if got := e.Counts(); got != before {
		t.Errorf("store changed: counts = %+v, want %+v", got, before)
	}
}

// acctMe calls GET /api/me with an Authorization header of the caller's
// choosing ("" sends none).
func acctMe(t *testing.T, e *apitest.Env, authorization string) *apitest.Response {
	t.Helper()
	req := apitest.Request{Method: "GET", Path: "/api/me"}
	if authorization != "" {
		req.Header = http.Header{"Authorization": {authorization}}
	}
	return e.Do(req)
}

// acctAssertInvalidToken checks a 401 for a presented but unusable token.
func acctAssertInvalidToken(t *testing.T, res *apitest.Response) {
	t.Helper()
	apitest.AssertProblem(t, res, http.StatusUnauthorized)
	challenge := res.Header.Get("WWW-Authenticate")
	if !strings.HasPrefix(challenge, "Bearer ") || !strings.Contains(challenge, `error="invalid_token"`) {
		t.Errorf(`WWW-Authenticate = %q, want a Bearer challenge with error="invalid_token"`, challenge)
	}
}

// acctMultipart builds a multipart/form-data body in the given field order,
// optionally sending one field as a file part.
func acctMultipart(t *testing.T, fields [][2]string, fileField string) (body, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range fields {
		var w io.Writer
		var err error
		if f[0] == fileField {
			w, err = mw.CreateFormFile(f[0], f[0]+".txt")
		} else {
			w, err = mw.CreateFormField(f[0])
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(w, f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String(), mw.FormDataContentType()
}

// acctEmailOfBytes builds a valid address of exactly n bytes whose local
// part is made of multi-byte characters.
func acctEmailOfBytes(t *testing.T, n int) string {
	t.Helper()
	const domain = "@example.com"
	local := n - len(domain)
	s := strings.Repeat("é", local/2) + strings.Repeat("a", local%2) + domain // é is 2 bytes
	if len(s) != n {
		t.Fatalf("built a %d-byte address, want %d", len(s), n)
	}
	return s
}

func TestRegister_Created(t *testing.T) {
	e := apitest.New(t)
	mpBody, mpType := acctMultipart(t, [][2]string{{"email", "mp@example.com"}, {"password", "correct horse"}}, "")
	fileBody, fileType := acctMultipart(t, [][2]string{{"email", "file@example.com"}, {"password", "correct horse"}}, "password")
	tests := []struct {
		name, contentType, body string
		sentEmail, password     string
		wantEmail               string
	}{
		{
			name: "JSON", contentType: "application/json",
			body:      `{"email":"ada@example.com","password":"correct horse"}`,
			sentEmail: "ada@example.com", password: "correct horse", wantEmail: "ada@example.com",
		},
		{
			name: "JSON trimmed, letter case kept", contentType: "application/json",
			body:      `{"email":"  Grace.Hopper@Example.COM\t\n","password":"correct horse"}`,
			sentEmail: "  Grace.Hopper@Example.COM\t\n", password: "correct horse", wantEmail: "Grace.Hopper@Example.COM",
		},
		{
			name: "JSON with charset", contentType: "application/json; charset=utf-8",
			body:      `{"email":"charset@example.com","password":"correct horse"}`,
			sentEmail: "charset@example.com", password: "correct horse", wantEmail: "charset@example.com",
		},
		{
			name: "JSON media type in upper case", contentType: "Application/JSON",
			body:      `{"password":"correct horse","email":"upper@example.com"}`,
			sentEmail: "upper@example.com", password: "correct horse", wantEmail: "upper@example.com",
		},
		{
			name: "form", contentType: "application/x-www-form-urlencoded",
			body:      apitest.FormBody(map[string]string{"email": " Form@Example.com ", "password": "pass wörd+&="}),
			sentEmail: " Form@Example.com ", password: "pass wörd+&=", wantEmail: "Form@Example.com",
		},
		{
			name: "multipart", contentType: mpType, body: mpBody,
			sentEmail: "mp@example.com", password: "correct horse", wantEmail: "mp@example.com",
		},
		{
			name: "multipart with a file part", contentType: fileType, body: fileBody,
			sentEmail: "file@example.com", password: "correct horse", wantEmail: "file@example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: tt.contentType, Body: tt.body})
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			body := res.JSON(t)
			if got, want := strings.Join(acctKeys(body), ","), "createdAt,email,expiresAt,handle,id,name,roles,token"; got != want {
				t.Errorf("keys = %s, want %s", got, want)
			}
			if id, ok := body["id"].(float64); !ok || id < 1 || id != float64(int64(id)) {
				t.Errorf("id = %#v, want a positive integer", body["id"])
			}
			if got, want := body["email"], tt.wantEmail; got != want {
				t.Errorf("email = %#v, want %q", got, want)
			}
			roles, _ := body["roles"].([]any)
			if got, want := len(roles), 1; got != want {
				t.Fatalf("roles = %#v, want [ROLE_USER]", body["roles"])
			}
			if got, want := roles[0], "ROLE_USER"; got != want {
				t.Errorf("roles[0] = %#v, want %q", got, want)
			}
			created := acctTime(t, "createdAt", body["createdAt"])
			if got, want := created, e.Clock.Now(); !got.Equal(want) {
				t.Errorf("createdAt = %v, want the clock's %v", got, want)
			}
			expires := acctTime(t, "expiresAt", body["expiresAt"])
			if got, want := expires.Sub(created), 30*24*time.Hour; got != want {
				t.Errorf("expiresAt - createdAt = %v, want %v", got, want)
			}
			token, _ := body["token"].(string)
			if !strings.HasPrefix(token, "herald_") || !auth.WellFormedToken(token) {
				t.Errorf("token = %q, want a well-formed herald_ token", token)
			}
			for _, secret := range []string{tt.password, "argon2", "$argon"} {
				if bytes.Contains(res.Body, []byte(secret)) {
					t.Errorf("response contains %q: %s", secret, res.Body)
				}
			}
			if got, want := e.Counts(), (bolt.Counts{Users: before.Users + 1, Tokens: before.Tokens + 1, Messages: before.Messages}); got != want {
				t.Errorf("counts = %+v, want %+v", got, want)
			}

			// The token works, and the password was stored as sent.
			me := acctMe(t, e, "Bearer "+token)
			if got, want := me.Status, http.StatusOK; got != want {
				t.Fatalf("GET /api/me with the new token: status %d, want %d: %s", got, want, me.Body)
			}
			if got, want := me.JSON(t)["email"], tt.wantEmail; got != want {
				t.Errorf("me email = %#v, want %q", got, want)
			}
			acctMustLogin(t, e, tt.wantEmail, tt.password)
		})
	}
}

func TestRegister_TokenTTL(t *testing.T) {
	e := apitest.New(t, apitest.WithTokenTTL(2*time.Hour))
	body := acctRegister(t, e, "ada@example.com", "correct horse")
	created := acctTime(t, "createdAt", body["createdAt"])
	if got, want := acctTime(t, "expiresAt", body["expiresAt"]).Sub(created), 2*time.Hour; got != want {
		t.Errorf("register: expiresAt - createdAt = %v, want %v", got, want)
	}

	e.Clock.Advance(10 * time.Minute)
	res := acctLogin(t, e, "ada@example.com", "correct horse")
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("login status = %d, want %d: %s", got, want, res.Body)
	}
	if got, want := acctTime(t, "expiresAt", res.JSON(t)["expiresAt"]), e.Clock.Now().Add(2*time.Hour); !got.Equal(want) {
		t.Errorf("login expiresAt = %v, want %v", got, want)
	}
}

func TestRegister_TimestampPrecision(t *testing.T) {
	e := apitest.New(t)
	e.Clock.Advance(1234567 * time.Nanosecond) // 1.234567 ms: the store keeps microseconds
	body := acctRegister(t, e, "ada@example.com", "correct horse")
	if got, want := body["createdAt"], "2026-01-02T15:04:05.001234Z"; got != want {
		t.Errorf("createdAt = %#v, want %q", got, want)
	}
	if got, want := body["expiresAt"], "2026-02-01T15:04:05.001234Z"; got != want {
		t.Errorf("expiresAt = %#v, want %q", got, want)
	}
}

// TestRegister_Boundaries registers values at the edges of the field rules
// that must be accepted.
func TestRegister_Boundaries(t *testing.T) {
	e := apitest.New(t)
	tests := []struct {
		name, email, password string
	}{
		{"e-mail of 254 bytes of multi-byte characters", acctEmailOfBytes(t, 254), "correct horse"},
		{"e-mail of 254 bytes, ASCII", strings.Repeat("a", 254-len("@example.com")) + "@example.com", "correct horse"},
		{"e-mail with non-ASCII domain", "josé@exämple.com", "correct horse"},
		{"password of 8 ASCII characters", "eight@example.com", "12345678"},
		{"password of 8 multi-byte characters (24 bytes)", "cjk@example.com", "密码密码密码密码"},
		{"password of 8 four-byte characters", "emoji@example.com", "🔑🔑🔑🔑🔑🔑🔑🔑"},
		{"password of 1024 bytes", "long@example.com", strings.Repeat("p", 1024)},
		{"password of 1024 bytes of multi-byte characters", "longmb@example.com", strings.Repeat("日", 341) + "a"},
		{"password with surrounding spaces", "spaces@example.com", "  correct horse  "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := acctRegister(t, e, tt.email, tt.password)
			if got, want := body["email"], tt.email; got != want {
				t.Errorf("email = %#v, want %q", got, want)
			}
			acctMustLogin(t, e, tt.email, tt.password)
		})
	}
	// A password is kept exactly as sent: no trimming at registration or login.
	if res := acctLogin(t, e, "spaces@example.com", "correct horse"); res.Status == http.StatusOK {
		t.Errorf("login with the trimmed password succeeded; passwords must be compared as sent")
	}
}

func TestRegister_Invalid(t *testing.T) {
	e := apitest.New(t)
	const form = "application/x-www-form-urlencoded"
	const pw = "correct horse"
	js := func(v map[string]any) string { return apitest.JSONBody(t, v) }
	tests := []struct {
		name            string
		contentType     string
		body            string
		email, password string // the would-be credentials
		want            []string
	}{
		{name: "missing e-mail", body: js(map[string]any{"password": pw}), password: pw, want: []string{"email"}},
		{name: "null e-mail", body: js(map[string]any{"email": nil, "password": pw}), password: pw, want: []string{"email"}},
		{name: "empty e-mail", body: js(map[string]any{"email": "", "password": pw}), password: pw, want: []string{"email"}},
		{name: "blank e-mail", body: js(map[string]any{"email": " \t\n ", "password": pw}), email: " \t\n ", password: pw, want: []string{"email"}},
		{name: "no @", email: "ada.example.com", password: pw, want: []string{"email"}},
		{name: "empty local part", email: "@example.com", password: pw, want: []string{"email"}},
		{name: "empty domain", email: "ada@", password: pw, want: []string{"email"}},
		{name: "only @", email: "@", password: pw, want: []string{"email"}},
		{name: "two @", email: "ada@lovelace@example.com", password: pw, want: []string{"email"}},
		{name: "double @", email: "ada@@example.com", password: pw, want: []string{"email"}},
		{name: "space in local part", email: "ada lovelace@example.com", password: pw, want: []string{"email"}},
		{name: "space in domain", email: "ada@exam ple.com", password: pw, want: []string{"email"}},
		{name: "tab inside", email: "ada\t@example.com", password: pw, want: []string{"email"}},
		{name: "newline inside", email: "ada\n@example.com", password: pw, want: []string{"email"}},
		{name: "NUL inside", email: "ada\x00@example.com", password: pw, want: []string{"email"}},
		{name: "no-break space inside", email: "ada\u00a0@example.com", password: pw, want: []string{"email"}},
		{name: "e-mail of 255 bytes of multi-byte characters", email: acctEmailOfBytes(t, 255), password: pw, want: []string{"email"}},
		{name: "e-mail of 255 bytes, ASCII", email: strings.Repeat("a", 255-len("@example.com")) + "@example.com", password: pw, want: []string{"email"}},
		{name: "e-mail not UTF-8 (form)", contentType: form, body: "email=%FF%FEada%40example.com&password=correct+horse",
			email: "\xff\xfeada@example.com", password: pw, want: []string{"email"}},
		{name: "missing password", body: js(map[string]any{"email": "ada@example.com"}), email: "ada@example.com", want: []string{"password"}},
		{name: "null password", body: js(map[string]any{"email": "ada@example.com", "password": nil}), email: "ada@example.com", want: []string{"password"}},
		{name: "empty password", email: "ada@example.com", password: "", want: []string{"password"}},
		{name: "password of 7 characters", email: "ada@example.com", password: "seven77", want: []string{"password"}},
		{name: "password of 7 multi-byte characters (21 bytes)", email: "ada@example.com", password: "密码密码密码密", want: []string{"password"}},
		{name: "password of 1025 bytes", email: "ada@example.com", password: strings.Repeat("p", 1025), want: []string{"password"}},
		{name: "password of 1025 bytes of multi-byte characters", email: "ada@example.com", password: strings.Repeat("日", 341) + "ab", want: []string{"password"}},
		{name: "password not UTF-8 (form)", contentType: form, body: "email=ada%40example.com&password=%FF%FF%FF%FF%FF%FF%FF%FF",
			email: "ada@example.com", password: "\xff\xff\xff\xff\xff\xff\xff\xff", want: []string{"password"}},
		{name: "both missing", body: `{}`, want: []string{"email", "password"}},
		{name: "both null", body: `{"email":null,"password":null}`, want: []string{"email", "password"}},
		{name: "both bad", email: "nobody", password: "short", want: []string{"email", "password"}},
		{name: "both missing (form)", contentType: form, body: "", want: []string{"email", "password"}},
		{name: "both empty (form)", contentType: form, body: "email=&password=", want: []string{"email", "password"}},
		{name: "short password (form)", contentType: form, body: "email=ada%40example.com&password=seven77",
			email: "ada@example.com", password: "seven77", want: []string{"password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, body := tt.contentType, tt.body
			if ct == "" {
				ct = "application/json"
			}
			if body == "" && ct == "application/json" {
				body = apitest.JSONBody(t, map[string]string{"email": tt.email, "password": tt.password})
			}
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: ct, Body: body})
			p := apitest.AssertProblem(t, res, http.StatusUnprocessableEntity)
			if got, want := strings.Join(apitest.ViolationPaths(p), ","), strings.Join(tt.want, ","); got != want {
				t.Errorf("violation paths = %q, want %q: %s", got, want, res.Body)
			}
			for _, v := range p["violations"].([]any) {
				if msg, _ := v.(map[string]any)["message"].(string); msg == "" {
					t.Errorf("violation without a message: %s", res.Body)
				}
			}
			if tt.password != "" && len(tt.password) < 200 && bytes.Contains(res.Body, []byte(tt.password)) {
				t.Errorf("problem echoes the password: %s", res.Body)
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, tt.email, tt.password)
		})
	}
}

func TestRegister_DuplicateEmail(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "ada@example.com", "correct horse")
	mpBody, mpType := acctMultipart(t, [][2]string{{"email", "Ada@Example.Com"}, {"password", "other password"}}, "")
	tests := []struct {
		name, contentType, body string
	}{
		{"same", "application/json", `{"email":"ada@example.com","password":"other password"}`},
		{"upper case", "application/json", `{"email":"ADA@EXAMPLE.COM","password":"other password"}`},
		{"surrounding spaces", "application/json", `{"email":"  ada@example.com \t","password":"other password"}`},
		{"mixed case and spaces (form)", "application/x-www-form-urlencoded", "email=+aDa%40eXample.com+&password=other+password"},
		{"mixed case (multipart)", mpType, mpBody},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, http.StatusConflict)
			if detail, _ := p["detail"].(string); detail == "" {
				t.Errorf("409 without a detail: %s", res.Body)
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, "ada@example.com", "other password")
			acctMustLogin(t, e, "ada@example.com", "correct horse")
		})
	}
}

func TestLogin_OK(t *testing.T) {
	e := apitest.New(t)
	first := acctRegister(t, e, "Ada@Example.com", "correct horse")["token"].(string)
	mpBody, mpType := acctMultipart(t, [][2]string{{"username", "ada@example.com"}, {"password", "correct horse"}}, "")
	tests := []struct {
		name, contentType, body string
	}{
		{"JSON, e-mail as registered", "application/json", `{"username":"Ada@Example.com","password":"correct horse"}`},
		{"JSON, lower case", "application/json", `{"username":"ada@example.com","password":"correct horse"}`},
		{"JSON, upper case with spaces", "application/json", `{"username":"  ADA@EXAMPLE.COM\t","password":"correct horse"}`},
		{"JSON with charset", "application/json; charset=utf-8", `{"password":"correct horse","username":"ada@example.com"}`},
		{"form", "application/x-www-form-urlencoded", "username=+ADA%40example.com+&password=correct+horse"},
		{"multipart", mpType, mpBody},
	}
	tokens := []string{first}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: tt.contentType, Body: tt.body})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			body := res.JSON(t)
			if got, want := strings.Join(acctKeys(body), ","), "expiresAt,token"; got != want {
				t.Errorf("keys = %s, want %s", got, want)
			}
			token, _ := body["token"].(string)
			if !strings.HasPrefix(token, "herald_") || !auth.WellFormedToken(token) {
				t.Errorf("token = %q, want a well-formed herald_ token", token)
			}
			if slices.Contains(tokens, token) {
				t.Errorf("login returned a token issued before")
			}
			tokens = append(tokens, token)
			if got, want := acctTime(t, "expiresAt", body["expiresAt"]), e.Clock.Now().Add(30*24*time.Hour); !got.Equal(want) {
				t.Errorf("expiresAt = %v, want %v", got, want)
			}
			if bytes.Contains(res.Body, []byte("correct horse")) {
				t.Errorf("response contains the password: %s", res.Body)
			}
			if got, want := e.Counts(), (bolt.Counts{Users: before.Users, Tokens: before.Tokens + 1, Messages: before.Messages}); got != want {
				t.Errorf("counts = %+v, want %+v", got, want)
			}
		})
	}
	// Every token issued along the way still works.
	for i, token := range tokens {
		if res := acctMe(t, e, "Bearer "+token); res.Status != http.StatusOK {
			t.Errorf("token %d: GET /api/me status %d, want 200: %s", i, res.Status, res.Body)
		}
	}
}

func TestLogin_BadCredentials(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "ada@example.com", "correct horse")
	tests := []struct {
		name, body string
	}{
		{"wrong password", `{"username":"ada@example.com","password":"wrong horse"}`},
		{"unknown e-mail", `{"username":"nobody@example.com","password":"correct horse"}`},
		{"password in another letter case", `{"username":"ada@example.com","password":"CORRECT HORSE"}`},
		{"password with a trailing space", `{"username":"ada@example.com","password":"correct horse "}`},
		{"password longer than any stored one", apitest.JSONBody(t, map[string]string{"username": "ada@example.com", "password": strings.Repeat("x", 1025)})},
		{"e-mail that is not an address", `{"username":"ada","password":"correct horse"}`},
	}
	var firstBody []byte
	var firstChallenge string
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json", Body: tt.body})
			apitest.AssertProblem(t, res, http.StatusUnauthorized)
			challenge := res.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", challenge)
			}
			if i == 0 {
				firstBody, firstChallenge = res.Body, challenge
			} else {
				if !bytes.Equal(res.Body, firstBody) {
					t.Errorf("body differs from the wrong-password answer:\n got %s\nwant %s", res.Body, firstBody)
				}
				if challenge != firstChallenge {
					t.Errorf("WWW-Authenticate = %q, differs from the wrong-password answer %q", challenge, firstChallenge)
				}
			}
			if bytes.Contains(res.Body, []byte("horse")) {
				t.Errorf("problem echoes the password: %s", res.Body)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
}

func TestLogin_MissingFields(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "ada@example.com", "correct horse")
	tests := []struct {
		name, contentType, body string
		want                    []string
	}{
		{"missing username", "application/json", `{"password":"correct horse"}`, []string{"username"}},
		{"null username", "application/json", `{"username":null,"password":"correct horse"}`, []string{"username"}},
		{"blank username", "application/json", `{"username":"  \t ","password":"correct horse"}`, []string{"username"}},
		{"missing password", "application/json", `{"username":"ada@example.com"}`, []string{"password"}},
		{"empty password", "application/json", `{"username":"ada@example.com","password":""}`, []string{"password"}},
		{"both missing", "application/json", `{}`, []string{"username", "password"}},
		{"both missing (form)", "application/x-www-form-urlencoded", "", []string{"username", "password"}},
		{"missing password (form)", "application/x-www-form-urlencoded", "username=ada%40example.com", []string{"password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, http.StatusUnprocessableEntity)
			if got, want := strings.Join(apitest.ViolationPaths(p), ","), strings.Join(tt.want, ","); got != want {
				t.Errorf("violation paths = %q, want %q", got, want)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
}

func TestMe(t *testing.T) {
	e := apitest.New(t)
	reg := acctRegister(t, e, " Ada@Example.com ", "correct horse")
	token := reg["token"].(string)
	res := acctMe(t, e, "Bearer "+token)
	if got, want := res.Status, http.StatusOK; got != want {
		t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
	}
	if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	me := res.JSON(t)
	if got, want := strings.Join(acctKeys(me), ","), "createdAt,email,handle,id,name,roles"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	for _, k := range []string{"id", "email", "createdAt"} {
		if got, want := me[k], reg[k]; got != want {
			t.Errorf("%s = %#v, want %#v as at registration", k, got, want)
		}
	}
	if got, want := me["email"], "Ada@Example.com"; got != want {
		t.Errorf("email = %#v, want %q", got, want)
	}
	if roles, _ := me["roles"].([]any); len(roles) != 1 || roles[0] != "ROLE_USER" {
		t.Errorf("roles = %#v, want [ROLE_USER]", me["roles"])
	}
	for _, secret := range []string{token, "correct horse", "argon2"} {
		if bytes.Contains(res.Body, []byte(secret)) {
			t.Errorf("GET /api/me body contains %q: %s", secret, res.Body)
		}
	}

	// Each account sees itself.
	other := acctRegister(t, e, "grace@example.com", "correct horse")["token"].(string)
	if got, want := acctMe(t, e, "Bearer "+other).JSON(t)["email"], "grace@example.com"; got != want {
		t.Errorf("second account's email = %#v, want %q", got, want)
	}
}

func TestAuthorizationHeader(t *testing.T) {
	e := apitest.New(t)
	token := acctRegister(t, e, "ada@example.com", "correct horse")["token"].(string)
	unknown, _, err := auth.MintToken()
	if err != nil {
		t.Fatal(err)
	}
	// Same shape as a real token, last checksum character changed.
	last := token[len(token)-1]
	swap := byte('A')
	if last == 'A' {
		swap = 'B'
	}
	badChecksum := token[:len(token)-1] + string(swap)
	// Same checksum, one character of the random part changed.
	badBody := token[:len("herald_")] + string(swap) + token[len("herald_")+1:]
	if badBody == token {
		badBody = token[:len("herald_")] + "C" + token[len("herald_")+1:]
	}

	// RFC 6750 §3.1: a request with no credentials, or with an unsupported
	// scheme, gets a bare challenge; a presented bearer token that does not
	// work gets error="invalid_token".
	const bare = `Bearer realm="herald"`
	tests := []struct {
		name          string
		authorization string
		wantStatus    int
		wantChallenge string // exact, or "invalid" for an invalid_token challenge
	}{
		{"valid", "Bearer " + token, http.StatusOK, ""},
		{"lower-case scheme", "bearer " + token, http.StatusOK, ""},
		{"upper-case scheme", "BEARER " + token, http.StatusOK, ""},
		{"two spaces after the scheme", "Bearer  " + token, http.StatusOK, ""},
		{"no header", "", http.StatusUnauthorized, bare},
		{"scheme only", "Bearer", http.StatusUnauthorized, bare},
		{"Basic scheme", "Basic YWRhQGV4YW1wbGUuY29tOmNvcnJlY3QgaG9yc2U=", http.StatusUnauthorized, bare},
		{"token without a scheme", token, http.StatusUnauthorized, bare},
		{"other scheme with the token", "Token " + token, http.StatusUnauthorized, bare},
		{"garbage", "Bearer garbage", http.StatusUnauthorized, "invalid"},
		{"well-formed but unknown", "Bearer " + unknown, http.StatusUnauthorized, "invalid"},
		{"broken checksum", "Bearer " + badChecksum, http.StatusUnauthorized, "invalid"},
		{"random part changed", "Bearer " + badBody, http.StatusUnauthorized, "invalid"},
		{"prefix missing", "Bearer " + strings.TrimPrefix(token, "herald_"), http.StatusUnauthorized, "invalid"},
		{"prefix in upper case", "Bearer HERALD_" + strings.TrimPrefix(token, "herald_"), http.StatusUnauthorized, "invalid"},
		{"trailing characters", "Bearer " + token + "x", http.StatusUnauthorized, "invalid"},
		{"truncated", "Bearer " + token[:len(token)-1], http.StatusUnauthorized, "invalid"},
		{"two tokens", "Bearer " + token + " " + token, http.StatusUnauthorized, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := acctMe(t, e, tt.authorization)
			if tt.wantStatus == http.StatusOK {
				if got, want := res.Status, http.StatusOK; got != want {
					t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
				}
				if got, want := res.JSON(t)["email"], "ada@example.com"; got != want {
					t.Errorf("email = %#v, want %q", got, want)
				}
				return
			}
			if tt.wantChallenge == "invalid" {
				acctAssertInvalidToken(t, res)
			} else {
				apitest.AssertProblem(t, res, tt.wantStatus)
				if got, want := res.Header.Get("WWW-Authenticate"), tt.wantChallenge; got != want {
					t.Errorf("WWW-Authenticate = %q, want %q", got, want)
				}
			}
			if bytes.Contains(res.Body, []byte(token)) || bytes.Contains(res.Body, []byte(unknown)) {
				t.Errorf("problem echoes the presented token: %s", res.Body)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
}

func TestTokenExpiry(t *testing.T) {
	e := apitest.New(t, apitest.WithTokenTTL(time.Hour))
	reg := acctRegister(t, e, "ada@example.com", "correct horse")
	token := reg["token"].(string)
	if got, want := acctTime(t, "expiresAt", reg["expiresAt"]).Sub(acctTime(t, "createdAt", reg["createdAt"])), time.Hour; got != want {
		t.Fatalf("expiresAt - createdAt = %v, want %v", got, want)
	}

	e.Clock.Advance(time.Hour - time.Second)
	if res := acctMe(t, e, "Bearer "+token); res.Status != http.StatusOK {
		t.Fatalf("one second before expiry: status %d, want 200: %s", res.Status, res.Body)
	}
	fresh := acctMustLogin(t, e, "ada@example.com", "correct horse")

	e.Clock.Advance(time.Second)
	acctInvalidEverywhere(t, e, token)
	// A token issued later runs on its own clock.
	if res := acctMe(t, e, "Bearer "+fresh); res.Status != http.StatusOK {
		t.Errorf("later token: status %d, want 200: %s", res.Status, res.Body)
	}
	e.Clock.Advance(time.Hour)
	acctInvalidEverywhere(t, e, fresh)
	// Logging in again is how a client recovers.
	if res := acctMe(t, e, "Bearer "+acctMustLogin(t, e, "ada@example.com", "correct horse")); res.Status != http.StatusOK {
		t.Errorf("token after re-login: status %d, want 200: %s", res.Status, res.Body)
	}
}

// acctInvalidEverywhere checks that token is refused by every protected route
// and that the refusals change nothing.
func acctInvalidEverywhere(t *testing.T, e *apitest.Env, token string) {
	t.Helper()
	before := e.Counts()
	for _, req := range []apitest.Request{
		{Method: "GET", Path: "/api/me"},
		{Method: "POST", Path: "/api/logout"},
		{Method: "POST", Path: "/api/messages", ContentType: "application/json", Body: `{"content":"hello"}`},
		{Method: "POST", Path: "/api/message", ContentType: "application/json", Body: `{"content":"hello"}`},
		{Method: "GET", Path: "/api/messages"},
		{Method: "GET", Path: "/api/messages/1"},
		{Method: "PATCH", Path: "/api/messages/1", ContentType: "application/merge-patch+json", Body: `{"content":"edited"}`},
		{Method: "DELETE", Path: "/api/messages/1"},
	} {
		req.Token = token
		res := e.Do(req)
		if res.Status != http.StatusUnauthorized {
			t.Errorf("%s %s: status %d, want 401: %s", req.Method, req.Path, res.Status, res.Body)
			continue
		}
		acctAssertInvalidToken(t, res)
	}
	acctAssertUnchanged(t, e, before)
}

func TestLogout(t *testing.T) {
	e := apitest.New(t)
	phone := acctRegister(t, e, "ada@example.com", "correct horse")["token"].(string)
	laptop := acctMustLogin(t, e, "ada@example.com", "correct horse")
	grace := acctRegister(t, e, "grace@example.com", "correct horse")["token"].(string)
	msg := e.Post(laptop, "before logout")

	before := e.Counts()
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: phone})
	if got, want := res.Status, http.StatusNoContent; got != want {
		t.Fatalf("logout status = %d, want %d: %s", got, want, res.Body)
	}
	if len(res.Body) != 0 {
		t.Errorf("204 with a body: %q", res.Body)
	}
	if got, want := e.Counts(), (bolt.Counts{Users: before.Users, Tokens: before.Tokens - 1, Messages: before.Messages}); got != want {
		t.Errorf("counts = %+v, want %+v", got, want)
	}

	acctInvalidEverywhere(t, e, phone)

	// The same user's other token, and other users' tokens, still work.
	for name, token := range map[string]string{"other token of the same user": laptop, "another user": grace} {
		if res := acctMe(t, e, "Bearer "+token); res.Status != http.StatusOK {
			t.Errorf("%s: GET /api/me status %d, want 200: %s", name, res.Status, res.Body)
		}
	}
	res = e.Do(apitest.Request{Method: "GET", Path: fmt.Sprint("/api/messages/", msg["id"]), Token: laptop})
	if got, want := res.Status, http.StatusOK; got != want {
		t.Errorf("GET own message with the other token: status %d, want %d: %s", got, want, res.Body)
	}
	e.Post(laptop, "after logout")

	// Logging out again with the revoked token, or with none, is refused.
	before = e.Counts()
	acctAssertInvalidToken(t, e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: phone}))
	res = e.Do(apitest.Request{Method: "POST", Path: "/api/logout"})
	apitest.AssertProblem(t, res, http.StatusUnauthorized)
	if got, want := res.Header.Get("WWW-Authenticate"), `Bearer realm="herald"`; got != want {
		t.Errorf("WWW-Authenticate = %q, want %q", got, want)
	}
	acctAssertUnchanged(t, e, before)

	// Logging in again after logging out gives a working token.
	if res := acctMe(t, e, "Bearer "+acctMustLogin(t, e, "ada@example.com", "correct horse")); res.Status != http.StatusOK {
		t.Errorf("token after logout and login: status %d, want 200", res.Status)
	}
}

// TestSecretsNotInDatabaseFile reads the bbolt file byte for byte after a
// session and checks that no password or token was ever written in clear.
func TestSecretsNotInDatabaseFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs apitest.SyncBuffer
	srv := httptest.NewServer(heraldhttp.NewServer(db, auth.NewHasher(apitest.FastParams, 2),
		heraldhttp.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	e := &apitest.Env{T: t, URL: srv.URL, DB: db, Clock: &apitest.Clock{}, Logs: &logs}

	const (
		email     = "leak.check@example.com"
		password  = "Tr0ub4dor&3 leak-check password"
		wrong     = "wrong-password-leak-check"
		content   = "a message body that is fine to store"
		password2 = "S3cond passw0rd leak-check"
	)
	tokens := []string{acctRegister(t, e, email, password)["token"].(string)}
	tokens = append(tokens, acctMustLogin(t, e, email, password), acctMustLogin(t, e, " LEAK.CHECK@example.com ", password))
	e.Post(tokens[1], content)
	tokens = append(tokens, acctRegister(t, e, "second@example.com", password2)["token"].(string))
	if res := e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: tokens[2]}); res.Status != http.StatusNoContent {
		t.Fatalf("logout: status %d", res.Status)
	}
	if res := acctLogin(t, e, email, wrong); res.Status != http.StatusUnauthorized {
		t.Fatalf("wrong login: status %d", res.Status)
	}

	srv.Close()
	if err := db.Check(); err != nil {
		t.Errorf("bbolt check: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	// The file is the one written: the e-mail and the message are in it.
	for _, want := range []string{email, content} {
		if !bytes.Contains(file, []byte(want)) {
			t.Fatalf("database file does not contain %q; is it the right file?", want)
		}
	}
	secrets := map[string]string{"password": password, "second password": password2, "wrong password": wrong}
	for i, token := range tokens {
		name := fmt.Sprintf("token %d", i)
		random := strings.TrimPrefix(token, auth.TokenPrefix)[:43] // the base64url of 32 random bytes
		raw, err := base64.RawURLEncoding.DecodeString(random)
		if err != nil {
			t.Fatal(err)
		}
		secrets[name] = token
		secrets[name+" without its prefix"] = random
		secrets[name+" as raw bytes"] = string(raw)
	}
	for name, secret := range secrets {
		if bytes.Contains(file, []byte(secret)) {
			t.Errorf("database file contains the %s in clear", name)
		}
	}
}

// TestLogsHoldNoSecrets runs requests that carry secrets, good and bad, and
// checks that the access log names the requests but none of their contents.
func TestLogsHoldNoSecrets(t *testing.T) {
	e := apitest.New(t, apitest.WithMaxBody(2048))
	const (
		email    = "logged.user@example.com"
		password = "log-check passw0rd"
		content  = "log-check message content"
		term     = "logcheckterm"
	)
	tokens := []string{acctRegister(t, e, email, password)["token"].(string)}
	tokens = append(tokens, acctMustLogin(t, e, email, password))
	e.Post(tokens[1], content+" "+term)
	e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=" + term, Token: tokens[1]})
	e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: tokens[0]})

	// Refused requests, each carrying something that must not be logged.
	const (
		wrongPassword = "wrong-log-check-password"
		shortPassword = "short7x"
		unknownField  = "logcheckunknownfield"
		rejectedEmail = "rejected.user@example.com"
		garbageToken  = "logcheckgarbagetoken"
		xmlContent    = "logcheckxmlcontent"
	)
	unknown, _, _ := auth.MintToken()
	acctLogin(t, e, email, wrongPassword)
	acctLogin(t, e, rejectedEmail, password)
	e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"email": rejectedEmail, "password": shortPassword})})
	e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"email": rejectedEmail, "password": password, unknownField: "x"})})
	e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"email": email, "password": password})}) // 409
	e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/xml", Body: "<x>" + xmlContent + "</x>"})
	e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: apitest.JSONBody(t, map[string]string{"email": rejectedEmail, "password": strings.Repeat(password, 200)})}) // 413
	e.Do(apitest.Request{Method: "GET", Path: "/api/me", Header: http.Header{"Authorization": {"Bearer " + garbageToken}}})
	e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: unknown})
	e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: tokens[0]})
	e.Do(apitest.Request{Method: "GET", Path: "/api/me", Token: tokens[0]})

	logs := e.Logs.String()
	if !strings.Contains(logs, "/api/register") || !strings.Contains(logs, "/api/login") {
		t.Fatalf("the log does not record the requests:\n%s", logs)
	}
	secrets := map[string]string{
		"password": password, "wrong password": wrongPassword, "short password": shortPassword,
		"e-mail": email, "rejected e-mail": rejectedEmail, "unknown field name": unknownField,
		"message content": content, "search term": term, "XML body": xmlContent,
		"garbage token": garbageToken, "unknown token": unknown,
	}
	for i, token := range tokens {
		secrets[fmt.Sprintf("token %d", i)] = token
	}
	for name, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("the log contains the %s %q", name, secret)
		}
	}
}

func TestRouter_NotFound(t *testing.T) {
	e := apitest.New(t)
	token := acctRegister(t, e, "ada@example.com", "correct horse")["token"].(string)
	for _, req := range []apitest.Request{
		{Method: "GET", Path: "/index.html"},
		{Method: "GET", Path: "/api"},
		{Method: "GET", Path: "/api/"},
		{Method: "GET", Path: "/api/nope"},
		{Method: "POST", Path: "/api/registe", ContentType: "application/json", Body: `{"email":"x@example.com","password":"correct horse"}`},
		{Method: "POST", Path: "/api/register/", ContentType: "application/json", Body: `{"email":"x@example.com","password":"correct horse"}`},
		{Method: "POST", Path: "/API/REGISTER", ContentType: "application/json", Body: `{"email":"x@example.com","password":"correct horse"}`},
		{Method: "GET", Path: "/api/me/", Token: token},
		{Method: "GET", Path: "/api/users/1", Token: token},
	} {
		t.Run(req.Method+" "+req.Path, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(req)
			p := apitest.AssertProblem(t, res, http.StatusNotFound)
			if detail, _ := p["detail"].(string); detail == "" {
				t.Errorf("404 without a detail: %s", res.Body)
			}
			if loc := res.Header.Get("Location"); loc != "" {
				t.Errorf("404 with a Location (a redirect guess): %q", loc)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
}

func TestRouter_MethodNotAllowed(t *testing.T) {
	e := apitest.New(t)
	token := acctRegister(t, e, "ada@example.com", "correct horse")["token"].(string)
	tests := []struct {
		method, path string
		allow        string // must appear in Allow
	}{
		{"GET", "/api/register", "POST"},
		{"PUT", "/api/register", "POST"},
		{"DELETE", "/api/register", "POST"},
		{"PATCH", "/api/register", "POST"},
		{"GET", "/api/login", "POST"},
		{"POST", "/api/me", "GET"},
		{"PUT", "/api/me", "DELETE"},
		{"GET", "/api/logout", "POST"},
		{"GET", "/api/me/password", "POST"},
		{"POST", "/api/me/tokens", "GET"},
		{"GET", "/api/me/tokens/0123456789abcdef", "DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: tt.method, Path: tt.path, Token: token, ContentType: "application/json",
				Body: `{"email":"x@example.com","password":"correct horse"}`})
			apitest.AssertProblem(t, res, http.StatusMethodNotAllowed)
			allow := res.Header.Get("Allow")
			methods := strings.Split(strings.ReplaceAll(allow, " ", ""), ",")
			if !slices.Contains(methods, tt.allow) {
				t.Errorf("Allow = %q, want it to list %s", allow, tt.allow)
			}
			if slices.Contains(methods, tt.method) {
				t.Errorf("Allow = %q lists the refused method %s", allow, tt.method)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
	// The token survived the refused logout and me calls.
	if res := acctMe(t, e, "Bearer "+token); res.Status != http.StatusOK {
		t.Errorf("token after 405s: status %d, want 200", res.Status)
	}
}

// TestNosniffOnEveryResponse sends one request of each outcome and checks
// the headers every response carries.
func TestNosniffOnEveryResponse(t *testing.T) {
	e := apitest.New(t, apitest.WithMaxBody(2048))
	token := acctRegister(t, e, "ada@example.com", "correct horse")["token"].(string)
	mpBody, mpType := acctMultipart(t, [][2]string{{"username", "ada@example.com"}, {"password", "correct horse"}}, "")
	tests := []struct {
		name string
		req  apitest.Request
		want int
	}{
		{"register", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"b@example.com","password":"correct horse"}`}, 201},
		{"login", apitest.Request{Method: "POST", Path: "/api/login", ContentType: mpType, Body: mpBody}, 200},
		{"me", apitest.Request{Method: "GET", Path: "/api/me", Token: token}, 200},
		{"healthz", apitest.Request{Method: "GET", Path: "/healthz"}, 200},
		{"malformed", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{`}, 400},
		{"no token", apitest.Request{Method: "GET", Path: "/api/me"}, 401},
		{"bad token", apitest.Request{Method: "GET", Path: "/api/me", Token: "herald_nope"}, 401},
		{"bad login", apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json", Body: `{"username":"ada@example.com","password":"wrong horse"}`}, 401},
		{"no route", apitest.Request{Method: "GET", Path: "/nope"}, 404},
		{"wrong method", apitest.Request{Method: "GET", Path: "/api/register"}, 405},
		{"duplicate", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"ADA@example.com","password":"correct horse"}`}, 409},
		{"too large", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"` + strings.Repeat("a", 3000) + `"}`}, 413},
		{"media type", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "text/plain", Body: "hi"}, 415},
		{"invalid", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{}`}, 422},
		{"tokens", apitest.Request{Method: "GET", Path: "/api/me/tokens", Token: token}, 200},
		{"search", apitest.Request{Method: "GET", Path: "/api/messages", Token: token}, 200},
		{"logout", apitest.Request{Method: "POST", Path: "/api/logout", Token: token}, 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.Do(tt.req)
			if got, want := res.Status, tt.want; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			if got, want := res.Header.Get("X-Content-Type-Options"), "nosniff"; got != want {
				t.Errorf("X-Content-Type-Options = %q, want %q", got, want)
			}
			if got, want := res.Header.Get("Cache-Control"), "no-store"; got != want {
				t.Errorf("Cache-Control = %q, want %q", got, want)
			}
			if cookie := res.Header.Get("Set-Cookie"); cookie != "" {
				t.Errorf("stateless API set a cookie: %q", cookie)
			}
			// No version banner for scanners to match against.
			for _, banner := range []string{"Server", "X-Powered-By"} {
				if v := res.Header.Get(banner); v != "" {
					t.Errorf("%s = %q, want none", banner, v)
				}
			}
		})
	}
}

// An e-mail holding U+0000 names no account, on every store (PostgreSQL's
// text cannot hold one, and refuses a parameter that does): a search by
// it finds nothing, a login with it is refused as any unknown address is,
// and an administrator's search of accounts by it finds none.
func TestAnEmailWithNULNamesNoAccount(t *testing.T) {
	e := apitest.New(t)
	tok := e.Register("ada@example.com", "correct horse")
	e.Post(tok, "hello world")
	e.Register("root@example.com", "correct horse")
	e.MakeAdmin("root@example.com")
	root := e.Login("root@example.com", "correct horse")
	nul := url.QueryEscape("ada\x00@example.com")
	for _, c := range []struct {
		name   string
		req    apitest.Request
		status int
		empty  string // the JSON field that must be an empty list
	}{
		{"search by owner", apitest.Request{Method: "GET", Path: "/api/messages?owner=" + nul, Token: tok}, http.StatusOK, "items"},
		{"search by owner, with words", apitest.Request{Method: "GET", Path: "/api/messages?q=hello&owner=" + nul, Token: tok}, http.StatusOK, "items"},
		{"login", apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
			Body: `{"username": "ada\u0000@example.com", "password": "correct horse"}`}, http.StatusUnauthorized, ""},
		{"register", apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
			Body: `{"email": "ada\u0000@example.com", "password": "correct horse"}`}, http.StatusUnprocessableEntity, ""},
		{"accounts matching", apitest.Request{Method: "GET", Path: "/api/admin/users?q=" + url.QueryEscape("ada\x00"), Token: root}, http.StatusOK, "items"},
		{"accounts matching, not an administrator", apitest.Request{Method: "GET", Path: "/api/admin/users?q=" + url.QueryEscape("ada\x00"), Token: tok}, http.StatusForbidden, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := e.Do(c.req)
			if res.Status != c.status {
				t.Fatalf("status %d, want %d: %s", res.Status, c.status, res.Body)
			}
			if c.empty == "" {
				return
			}
			var body map[string]any
			if err := json.Unmarshal(res.Body, &body); err != nil {
				t.Fatal(err)
			}
			if items, ok := body[c.empty].([]any); !ok || len(items) != 0 {
				t.Errorf("%s = %v, want an empty list: %s", c.empty, body[c.empty], res.Body)
			}
			if next, ok := body["next"]; ok && next != nil {
				t.Errorf("next = %v, want null", next)
			}
		})
	}
}

// TestRegistrationModes: open takes anyone; closed nobody; invite whoever
// holds a working invitation, each use counted, with one answer for an
// unknown, used up, revoked or expired one, which counts like a failed
// login against the address.
func TestRegistrationModes(t *testing.T) {
	t.Run("open", func(t *testing.T) {
		e := apitest.New(t)
		if res := e.RegisterWith("ada@example.com", "herald_invite_ignored"); res.Status != http.StatusCreated {
			t.Errorf("open registration with an invite field: %d %s", res.Status, res.Body)
		}
	})
	t.Run("closed", func(t *testing.T) {
		e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationClosed))
		p := apitest.AssertProblem(t, e.RegisterWith("ada@example.com", ""), http.StatusForbidden)
		if !strings.Contains(p["detail"].(string), "closed") {
			t.Errorf("detail %q does not say registration is closed", p["detail"])
		}
		if c := e.Counts(); c.Users != 0 {
			t.Errorf("%d accounts after a closed registration", c.Users)
		}
	})
	t.Run("invite", func(t *testing.T) {
		e := apitest.New(t, apitest.WithRegistration(heraldhttp.RegistrationInvite))
		e.MakeFirstAdmin("root@example.com")
		root := e.Login("root@example.com", pw)
		p := apitest.AssertProblem(t, e.RegisterWith("ada@example.com", ""), http.StatusForbidden)
		if !strings.Contains(p["detail"].(string), "invitation") {
			t.Errorf("detail %q does not say an invitation is needed", p["detail"])
		}
		two := e.Invite(root, `{"maxUses": 2}`)
		if two["uses"] != 0.0 || two["maxUses"] != 2.0 || !strings.HasPrefix(two["code"].(string), auth.InvitePrefix) ||
			!strings.HasSuffix(two["url"].(string), "/#invite="+two["code"].(string)) {
			t.Errorf("invitation = %v", two)
		}
		for _, email := range []string{"ada@example.com", "bob@example.com"} {
			if res := e.RegisterWith(email, two["code"].(string)); res.Status != http.StatusCreated {
				t.Fatalf("%s with an invitation: %d %s", email, res.Status, res.Body)
			}
		}
		bad := func(name, code string) {
			t.Helper()
			p := apitest.AssertProblem(t, e.RegisterWith("carol@example.com", code), http.StatusUnprocessableEntity)
			if got := apitest.ViolationPaths(p); !slices.Equal(got, []string{"invite"}) {
				t.Errorf("%s: violations %v, want invite", name, got)
			}
		}
		bad("used up", two["code"].(string))
		bad("unknown", mintCode(t, auth.InvitePrefix))
		bad("not a code", "come in")
		revoked := e.Invite(root, "")
		if res := e.Do(apitest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/admin/invites/%v", revoked["id"]), Token: root}); res.Status != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", res.Status, res.Body)
		}
		bad("revoked", revoked["code"].(string))
		soon := e.Invite(root, apitest.JSONBody(t, map[string]string{"expiresAt": e.Clock.Now().Add(time.Hour).Format(time.RFC3339)}))
		e.Clock.Advance(time.Hour)
		bad("expired", soon["code"].(string))
		list := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/invites", Token: root}).JSON(t)["items"].([]any)
		if len(list) != 2 || strings.Contains(fmt.Sprint(list), "herald_invite_") {
			t.Errorf("invitations %v, want the two left, without codes", list)
		}
		// Guessing codes is guessing: 20 failures from one address (the
		// hour that expired the last one gave them all back), then 429.
		for range 19 {
			bad("guess", mintCode(t, auth.InvitePrefix))
		}
		res := e.RegisterWith("carol@example.com", mintCode(t, auth.InvitePrefix))
		if p := apitest.AssertProblem(t, res, http.StatusTooManyRequests); res.Header.Get("Retry-After") == "" {
			t.Errorf("guessing invitations: %v without Retry-After", p)
		}
	})
}
