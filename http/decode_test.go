package http_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// Helpers of this file carry the dec prefix so they cannot collide with
// helpers other test files of the package define.

const (
	decForm = "application/x-www-form-urlencoded"
	decJSON = "application/json"
	// decBoundary is the boundary of the hand-written multipart bodies.
	decBoundary = "decBoundary42"
	decMPType   = "multipart/form-data; boundary=" + decBoundary
)

// decPart is one hand-written multipart part with a Content-Disposition of
// the given parameters.
func decPart(disposition, value string) string {
	return "--" + decBoundary + "\r\nContent-Disposition: form-data; " + disposition + "\r\n\r\n" + value + "\r\n"
}

// decMultipart joins parts and the close delimiter.
func decMultipart(parts ...string) string {
	return strings.Join(parts, "") + "--" + decBoundary + "--\r\n"
}

// decSend posts body to path. With chunked, the body is sent with
// Transfer-Encoding: chunked and no Content-Length, so the server cannot
// know its size before reading it.
func decSend(t *testing.T, e *apitest.Env, path, contentType, body string, chunked bool) *apitest.Response {
	t.Helper()
	var r io.Reader = strings.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length from net/http
	}
	req, err := http.NewRequest("POST", e.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if chunked {
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
	} else if req.ContentLength != int64(len(body)) {
		t.Fatalf("Content-Length = %d, want %d", req.ContentLength, len(body))
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := http.DefaultClient.Do(req)
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

// decPad pads a JSON body with trailing whitespace, which the decoder
// skips, to exactly n bytes.
func decPad(t *testing.T, body string, n int, pad string) string {
	t.Helper()
	if len(body) > n {
		t.Fatalf("body is %d bytes, more than %d", len(body), n)
	}
	return body + strings.Repeat(pad, n-len(body))
}

// TestDecode_FieldNames: unknown fields, read-only fields, values that are
// not strings and repeated fields are refused with a 400 naming the field,
// before anything is stored, in every media type.
func TestDecode_FieldNames(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "grace@example.com", "correct horse") // for the login cases
	const creds = `"email":"ada@example.com","password":"correct horse"`
	const login = `"username":"grace@example.com","password":"correct horse"`
	tests := []struct {
		name, path, contentType, body string
		field                         string
		kind                          string // a word the detail must contain
	}{
		// Register, JSON.
		{"unknown field", "/api/register", decJSON, `{` + creds + `,"nickname":"Ada"}`, "nickname", "unknown"},
		{"login's field on register", "/api/register", decJSON, `{` + creds + `,"username":"ada"}`, "username", "unknown"},
		{"field name in another letter case", "/api/register", decJSON, `{"Email":"ada@example.com","password":"correct horse"}`, "Email", "unknown"},
		{"field name with a space", "/api/register", decJSON, `{"email ":"ada@example.com","password":"correct horse"}`, "email ", "unknown"},
		{"unknown field with a non-string value", "/api/register", decJSON, `{` + creds + `,"admin":true}`, "admin", "unknown"},
		{"user is unknown here", "/api/register", decJSON, `{` + creds + `,"user":{"email":"x"}}`, "user", "unknown"},
		{"id", "/api/register", decJSON, `{` + creds + `,"id":3}`, "id", "read-only"},
		{"id as string", "/api/register", decJSON, `{` + creds + `,"id":"3"}`, "id", "read-only"},
		{"id null", "/api/register", decJSON, `{` + creds + `,"id":null}`, "id", "read-only"},
		{"roles", "/api/register", decJSON, `{` + creds + `,"roles":["ROLE_ADMIN"]}`, "roles", "read-only"},
		{"createdAt", "/api/register", decJSON, `{` + creds + `,"createdAt":"2020-01-01T00:00:00.000000Z"}`, "createdAt", "read-only"},
		{"token", "/api/register", decJSON, `{` + creds + `,"token":"herald_x"}`, "token", "read-only"},
		{"expiresAt", "/api/register", decJSON, `{` + creds + `,"expiresAt":"2099-01-01T00:00:00.000000Z"}`, "expiresAt", "read-only"},
		{"read-only field alone", "/api/register", decJSON, `{"id":3}`, "id", "read-only"},
		{"e-mail as number", "/api/register", decJSON, `{"email":5,"password":"correct horse"}`, "email", "string"},
		{"e-mail as array", "/api/register", decJSON, `{"email":["ada@example.com"],"password":"correct horse"}`, "email", "string"},
		{"e-mail as object", "/api/register", decJSON, `{"email":{"address":"ada@example.com"},"password":"correct horse"}`, "email", "string"},
		{"password as bool", "/api/register", decJSON, `{"email":"ada@example.com","password":true}`, "password", "string"},
		{"password as number", "/api/register", decJSON, `{"email":"ada@example.com","password":12345678}`, "password", "string"},
		{"invalid UTF-8 e-mail (JSON)", "/api/register", decJSON, "{\"email\":\"m7\xff@b.c\",\"password\":\"correct horse\"}", "email", "UTF-8"},
		{"repeated e-mail (JSON)", "/api/register", decJSON, `{"email":"ada@example.com","password":"correct horse","email":"eve@example.com"}`, "email", "more than once"},
		{"repeated unknown key (JSON)", "/api/register", decJSON, `{"email":"ada@example.com","password":"correct horse","x":1,"x":2}`, "x", "more than once"},
		// Register, form.
		{"unknown field (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&role=admin", "role", "unknown"},
		{"read-only field (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&id=1", "id", "read-only"},
		{"roles (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&roles=ROLE_ADMIN", "roles", "read-only"},
		{"repeated e-mail (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&email=eve%40example.com", "email", "more than once"},
		{"repeated password (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&password=correct+horse", "password", "more than once"},
		{"repeated empty value (form)", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&email=", "email", "more than once"},
		// Register, multipart.
		{"unknown field (multipart)", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`name="nickname"`, "Ada")), "nickname", "unknown"},
		{"read-only field (multipart)", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`name="token"`, "herald_x")), "token", "read-only"},
		{"repeated field (multipart)", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`name="email"`, "eve@example.com")), "email", "more than once"},
		{"repeated field as file (multipart)", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`name="password"; filename="p.txt"`, "correct horse")), "password", "more than once"},
		// Login.
		{"email instead of username", "/api/login", decJSON, `{"email":"grace@example.com","password":"correct horse"}`, "email", "unknown"},
		{"unknown field on login", "/api/login", decJSON, `{` + login + `,"remember":"yes"}`, "remember", "unknown"},
		{"token on login", "/api/login", decJSON, `{` + login + `,"token":"herald_x"}`, "token", "unknown"},
		{"username as number", "/api/login", decJSON, `{"username":1,"password":"correct horse"}`, "username", "string"},
		{"password as array", "/api/login", decJSON, `{"username":"grace@example.com","password":["correct horse"]}`, "password", "string"},
		{"email instead of username (form)", "/api/login", decForm, "email=grace%40example.com&password=correct+horse", "email", "unknown"},
		{"repeated username (form)", "/api/login", decForm, "username=grace%40example.com&username=grace%40example.com&password=correct+horse", "username", "more than once"},
		{"email instead of username (multipart)", "/api/login", decMPType, decMultipart(decPart(`name="email"`, "grace@example.com"), decPart(`name="password"`, "correct horse")), "email", "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: tt.path, ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, http.StatusBadRequest)
			if got, want := strings.Join(apitest.ViolationPaths(p), ","), tt.field; got != want {
				t.Errorf("violation paths = %q, want %q", got, want)
			}
			detail, _ := p["detail"].(string)
			if !strings.Contains(detail, strconv.Quote(tt.field)) || !strings.Contains(detail, tt.kind) {
				t.Errorf("detail = %q, want it to name %q and say %q", detail, tt.field, tt.kind)
			}
			acctAssertUnchanged(t, e, before)
			if tt.path == "/api/register" {
				acctAssertNoLogin(t, e, "ada@example.com", "correct horse")
			}
		})
	}
}

// TestDecode_Malformed: bodies that are not one well-formed document of the
// declared type are a 400 without a field, and store nothing.
func TestDecode_Malformed(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "grace@example.com", "correct horse")
	const creds = `{"email":"ada@example.com","password":"correct horse"}`
	tests := []struct {
		name, path, contentType, body string
	}{
		{"truncated JSON", "/api/register", decJSON, creds[:len(creds)-1]},
		{"truncated string", "/api/register", decJSON, `{"email":"ada@exa`},
		{"trailing comma", "/api/register", decJSON, `{"email":"ada@example.com","password":"correct horse",}`},
		{"single quotes", "/api/register", decJSON, `{'email':'ada@example.com','password':'correct horse'}`},
		{"unquoted names", "/api/register", decJSON, `{email:"ada@example.com",password:"correct horse"}`},
		{"JSON array", "/api/register", decJSON, `[` + creds + `]`},
		{"empty JSON array", "/api/register", decJSON, `[]`},
		{"JSON string", "/api/register", decJSON, `"ada@example.com"`},
		{"JSON number", "/api/register", decJSON, `42`},
		{"JSON null", "/api/register", decJSON, `null`},
		{"JSON true", "/api/register", decJSON, `true`},
		{"second object", "/api/register", decJSON, creds + creds},
		{"second object after space", "/api/register", decJSON, creds + "\n{}"},
		{"trailing garbage", "/api/register", decJSON, creds + " x"},
		{"trailing bracket", "/api/register", decJSON, creds + "]"},
		{"trailing null", "/api/register", decJSON, creds + " null"},
		{"empty body", "/api/register", decJSON, ""},
		{"whitespace body", "/api/register", decJSON, " \r\n\t "},
		{"form body sent as JSON", "/api/register", decJSON, "email=ada%40example.com&password=correct+horse"},
		{"bad percent escape (form)", "/api/register", decForm, "email=ada%zzexample.com&password=correct+horse"},
		{"semicolon separator (form)", "/api/register", decForm, "email=ada%40example.com;password=correct+horse"},
		{"multipart without boundary", "/api/register", "multipart/form-data", decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"))},
		{"multipart part without a name", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`filename="x.txt"`, "x"))},
		{"multipart part with empty name", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"), decPart(`name=""`, "x"))},
		{"multipart cut inside a value", "/api/register", decMPType, decPart(`name="email"`, "ada@example.com") + "--" + decBoundary + "\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\ncorrect horse"},
		{"truncated JSON on login", "/api/login", decJSON, `{"username":"grace@example.com","password":"correct horse"`},
		{"JSON array on login", "/api/login", decJSON, `[{"username":"grace@example.com","password":"correct horse"}]`},
		{"trailing data on login", "/api/login", decJSON, `{"username":"grace@example.com","password":"correct horse"}{}`},
		{"empty body on login", "/api/login", decJSON, ""},
		{"multipart without boundary on login", "/api/login", "multipart/form-data", decMultipart(decPart(`name="username"`, "grace@example.com"), decPart(`name="password"`, "correct horse"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: tt.path, ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, http.StatusBadRequest)
			if detail, _ := p["detail"].(string); detail == "" {
				t.Errorf("400 without a detail: %s", res.Body)
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, "ada@example.com", "correct horse")
		})
	}
}

// TestDecode_MultipartIncomplete: a multipart body must end with its close
// delimiter (RFC 2046 §5.1.1). A body that stops after a part's delimiter
// line or inside a part's headers, or never contains a delimiter at all, is
// malformed like a truncated JSON document: a 400, not a complete (or empty)
// form.
func TestDecode_MultipartIncomplete(t *testing.T) {
	e := apitest.New(t)
	full := func(email string) string {
		return decMultipart(decPart(`name="email"`, email), decPart(`name="password"`, "correct horse"))
	}
	tests := []struct {
		name  string
		email string
		body  func(email string) string
	}{
		{"close delimiter cut to the boundary", "cut1@example.com", func(email string) string {
			return strings.TrimSuffix(full(email), "--\r\n")
		}},
		{"close delimiter cut to one dash", "cut2@example.com", func(email string) string {
			return strings.TrimSuffix(full(email), "-\r\n")
		}},
		{"cut after a delimiter line", "cut3@example.com", func(email string) string {
			return strings.TrimSuffix(full(email), "--\r\n") + "\r\n"
		}},
		{"cut inside the next part's headers", "cut4@example.com", func(email string) string {
			return strings.TrimSuffix(full(email), "--\r\n") + "\r\nContent-Disposition: form-da"
		}},
		{"no delimiter at all", "", func(string) string { return "email=ada%40example.com&password=correct+horse" }},
		{"empty body", "", func(string) string { return "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: decMPType, Body: tt.body(tt.email)})
			apitest.AssertProblem(t, res, http.StatusBadRequest)
			acctAssertUnchanged(t, e, before)
			if tt.email != "" {
				acctAssertNoLogin(t, e, tt.email, "correct horse")
			}
		})
	}
	// The complete body is fine.
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: decMPType, Body: full("complete@example.com")})
	if got, want := res.Status, http.StatusCreated; got != want {
		t.Fatalf("complete multipart body: status %d, want %d: %s", got, want, res.Body)
	}
}

func TestDecode_UnsupportedMediaType(t *testing.T) {
	e := apitest.New(t)
	acctRegister(t, e, "grace@example.com", "correct horse")
	const creds = `{"email":"ada@example.com","password":"correct horse"}`
	const login = `{"username":"grace@example.com","password":"correct horse"}`
	tests := []struct {
		name, path, contentType, body string
		listsAccepted                 bool // the detail names what to send
	}{
		{"text/plain", "/api/register", "text/plain", creds, true},
		{"application/xml", "/api/register", "application/xml", `<user><email>ada@example.com</email></user>`, true},
		{"text/json", "/api/register", "text/json", creds, true},
		{"JSON suffix type", "/api/register", "application/vnd.herald+json", creds, true},
		{"merge patch on register", "/api/register", "application/merge-patch+json", creds, true},
		{"multipart/mixed", "/api/register", "multipart/mixed; boundary=" + decBoundary, decMultipart(decPart(`name="email"`, "ada@example.com")), true},
		{"missing Content-Type", "/api/register", "", creds, true},
		{"unparsable Content-Type", "/api/register", "application/json; charset", creds, false},
		{"Content-Type of parameters only", "/api/register", "; charset=utf-8", creds, false},
		{"multipart with empty boundary", "/api/register", "multipart/form-data; boundary=", decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse")), false},
		{"text/plain on login", "/api/login", "text/plain", login, true},
		{"missing Content-Type on login", "/api/login", "", login, true},
		{"merge patch on login", "/api/login", "application/merge-patch+json", login, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: tt.path, ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, http.StatusUnsupportedMediaType)
			detail, _ := p["detail"].(string)
			if detail == "" {
				t.Errorf("415 without a detail: %s", res.Body)
			}
			if tt.listsAccepted {
				for _, media := range []string{"application/json", "application/x-www-form-urlencoded", "multipart/form-data"} {
					if !strings.Contains(detail, media) {
						t.Errorf("detail = %q, want it to name %s", detail, media)
					}
				}
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, "ada@example.com", "correct horse")
		})
	}
}

// TestDecode_BodyTooLarge: a body over the limit is a 413 whether the server
// learns its size from Content-Length or only by reading a chunked body.
func TestDecode_BodyTooLarge(t *testing.T) {
	const limit = 2048
	e := apitest.New(t, apitest.WithMaxBody(limit))
	acctRegister(t, e, "grace@example.com", "correct horse")
	big := strings.Repeat("x", 2*limit)
	tests := []struct {
		name, path, contentType, body string
	}{
		{"JSON", "/api/register", decJSON, `{"email":"ada@example.com","password":"` + big + `"}`},
		{"JSON, one byte over", "/api/register", decJSON, decPad(t, `{"email":"ada@example.com","password":"correct horse"}`, limit+1, " ")},
		{"JSON, oversized trailing data", "/api/register", decJSON, `{"email":"ada@example.com","password":"correct horse"}` + strings.Repeat(" ", 2*limit) + "x"},
		{"form", "/api/register", decForm, "email=ada%40example.com&password=correct+horse&junk=" + big},
		{"form, one byte over", "/api/register", decForm, decPad(t, "email=ada%40example.com&password=correct+horse", limit+1, "&")},
		{"multipart", "/api/register", decMPType, decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, big))},
		{"multipart, big preamble", "/api/register", decMPType, big + "\r\n" + decMultipart(decPart(`name="email"`, "ada@example.com"), decPart(`name="password"`, "correct horse"))},
		{"unsupported type", "/api/register", "text/plain", big},
		{"login", "/api/login", decJSON, `{"username":"grace@example.com","password":"` + big + `"}`},
		{"login, padded", "/api/login", decJSON, decPad(t, `{"username":"grace@example.com","password":"correct horse"}`, limit+1, " ")},
	}
	for _, tt := range tests {
		for _, chunked := range []bool{false, true} {
			name := tt.name + ", Content-Length"
			if chunked {
				name = tt.name + ", chunked"
			}
			t.Run(name, func(t *testing.T) {
				before := e.Counts()
				res := decSend(t, e, tt.path, tt.contentType, tt.body, chunked)
				if tt.contentType == "text/plain" && chunked {
					// Nothing of a body is read before its type is checked.
					apitest.AssertProblem(t, res, http.StatusUnsupportedMediaType)
				} else {
					p := apitest.AssertProblem(t, res, http.StatusRequestEntityTooLarge)
					if detail, _ := p["detail"].(string); !strings.Contains(detail, strconv.Itoa(limit)) {
						t.Errorf("detail = %q, want it to state the limit %d", detail, limit)
					}
				}
				acctAssertUnchanged(t, e, before)
				acctAssertNoLogin(t, e, "ada@example.com", "correct horse")
			})
		}
	}
}

// TestDecode_BodyAtLimit: a body of exactly the limit is read in full.
func TestDecode_BodyAtLimit(t *testing.T) {
	const limit = 2048
	e := apitest.New(t, apitest.WithMaxBody(limit))
	tests := []struct {
		name, contentType string
		build             func(email string) string // a body of exactly limit bytes
	}{
		{"JSON", decJSON, func(email string) string {
			return decPad(t, `{"email":"`+email+`","password":"correct horse"}`, limit, " ")
		}},
		{"form", decForm, func(email string) string {
			return decPad(t, "email="+strings.Replace(email, "@", "%40", 1)+"&password=correct+horse", limit, "&")
		}},
		{"multipart", decMPType, func(email string) string {
			parts := decMultipart(decPart(`name="email"`, email), decPart(`name="password"`, "correct horse"))
			return strings.Repeat("p", limit-len(parts)-2) + "\r\n" + parts // the preamble is ignored
		}},
	}
	for i, tt := range tests {
		for _, chunked := range []bool{false, true} {
			name, email := tt.name+", Content-Length", "length"+strconv.Itoa(i)+"@example.com"
			if chunked {
				name, email = tt.name+", chunked", "chunked"+strconv.Itoa(i)+"@example.com"
			}
			t.Run(name, func(t *testing.T) {
				body := tt.build(email)
				if got, want := len(body), limit; got != want {
					t.Fatalf("body is %d bytes, want %d", got, want)
				}
				res := decSend(t, e, "/api/register", tt.contentType, body, chunked)
				if got, want := res.Status, http.StatusCreated; got != want {
					t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
				}
				acctMustLogin(t, e, email, "correct horse")
			})
		}
	}
}

// TestDecode_DefaultLimit: without configuration the limit is 64 KiB.
func TestDecode_DefaultLimit(t *testing.T) {
	e := apitest.New(t)
	const limit = 64 << 10
	at := decPad(t, `{"email":"ada@example.com","password":"correct horse"}`, limit, " ")
	over := decPad(t, `{"email":"eve@example.com","password":"correct horse"}`, limit+1, " ")
	for _, chunked := range []bool{false, true} {
		before := e.Counts()
		apitest.AssertProblem(t, decSend(t, e, "/api/register", decJSON, over, chunked), http.StatusRequestEntityTooLarge)
		acctAssertUnchanged(t, e, before)
		acctAssertNoLogin(t, e, "eve@example.com", "correct horse")
	}
	if res := decSend(t, e, "/api/register", decJSON, at, false); res.Status != http.StatusCreated {
		t.Fatalf("body of exactly 64 KiB: status %d, want 201: %s", res.Status, res.Body)
	}
}

// TestDecode_TextEncodings: field values keep their characters whichever
// media type and escaping carried them.
func TestDecode_TextEncodings(t *testing.T) {
	e := apitest.New(t)
	tests := []struct {
		name, contentType, body, email, password string
	}{
		{"JSON escapes", decJSON, `{"email":"\u0041da@example.com","password":"p\u00e4ss w\u00f6rd \ud83d\udd11"}`, "Ada@example.com", "päss wörd 🔑"},
		{"JSON raw UTF-8", decJSON, `{"email":"josé@exämple.com","password":"päss wörd 🔑"}`, "josé@exämple.com", "päss wörd 🔑"},
		{"form percent-encoded UTF-8", decForm, "email=zo%C3%AB%40example.com&password=p%C3%A4ss+w%C3%B6rd+%F0%9F%94%91", "zoë@example.com", "päss wörd 🔑"},
		{"form plus as space, %2B as plus", decForm, "email=plus%2Btag%40example.com&password=a+b%2Bc+d+e+f", "plus+tag@example.com", "a b+c d e f"},
		{"multipart raw UTF-8", decMPType, decMultipart(decPart(`name="email"`, "ünï@example.com"), decPart(`name="password"`, "päss wörd 🔑\r\nnext line")), "ünï@example.com", "päss wörd 🔑\r\nnext line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: tt.contentType, Body: tt.body})
			if got, want := res.Status, http.StatusCreated; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			if got, want := res.JSON(t)["email"], tt.email; got != want {
				t.Errorf("email = %#v, want %q", got, want)
			}
			acctMustLogin(t, e, tt.email, tt.password)
		})
	}
}

// TestDecode_JSONInvalidUTF8: encoding/json would silently turn bad bytes and
// lone surrogate escapes into U+FFFD, storing text the client never sent.
// Raw bytes that are not UTF-8 are a malformed body (400); a lone surrogate
// escape is well-formed JSON naming no character (422). A U+FFFD the client
// really sent is kept.
func TestDecode_JSONInvalidUTF8(t *testing.T) {
	e := apitest.New(t)
	token := e.Register("ada@example.com", "correct horse")
	msg := e.Post(token, "original")
	path := fmt.Sprintf("/api/messages/%v", msg["id"])
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		field                                 string
	}{
		{"create, raw bytes", "POST", "/api/messages", decJSON, "{\"content\":\"bad \xff\xfe here\"}", http.StatusBadRequest, "content"},
		{"create, lone surrogate", "POST", "/api/messages", decJSON, `{"content":"lone \udc00 surrogate"}`, http.StatusUnprocessableEntity, "content"},
		{"patch, raw bytes", "PATCH", path, "application/merge-patch+json", "{\"content\":\"x\xffy\"}", http.StatusBadRequest, "content"},
		{"patch, lone surrogate", "PATCH", path, decJSON, `{"content":"\ud800"}`, http.StatusUnprocessableEntity, "content"},
		{"register, raw bytes", "POST", "/api/register", decJSON, "{\"email\":\"m7\xff@b.c\",\"password\":\"correct horse\"}", http.StatusBadRequest, "email"},
		{"register, lone surrogate", "POST", "/api/register", decJSON, `{"email":"m7\udfff@b.c","password":"correct horse"}`, http.StatusUnprocessableEntity, "email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: tt.method, Path: tt.path, Token: token, ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, tt.status)
			if got, want := strings.Join(apitest.ViolationPaths(p), ","), tt.field; got != want {
				t.Errorf("violation paths = %q, want %q", got, want)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
	if got, want := e.Do(apitest.Request{Method: "GET", Path: path, Token: token}).JSON(t)["content"], "original"; got != want {
		t.Errorf("content after refused patches = %q, want %q", got, want)
	}
	for _, body := range []string{`{"content":"keep \ufffd"}`, `{"content":"keep \uFFFD"}`, "{\"content\":\"keep \uFFFD\"}"} {
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: token, ContentType: decJSON, Body: body})
		if got, want := res.Status, http.StatusCreated; got != want {
			t.Fatalf("%s: status = %d, want %d: %s", body, got, want, res.Body)
		}
		if got, want := res.JSON(t)["content"], "keep \uFFFD"; got != want {
			t.Errorf("%s: content = %q, want %q", body, got, want)
		}
	}
}

// Of two values that are both wrong, a JSON body is refused naming the
// same one every time: the first in name order.
func TestJSONBodyNamesTheSameBadValueEveryTime(t *testing.T) {
	e := apitest.New(t)
	for range 20 {
		res := decSend(t, e, "/api/register", decJSON, `{"password":3,"email":4}`, false)
		p := apitest.AssertProblem(t, res, http.StatusBadRequest)
		if detail, _ := p["detail"].(string); !strings.Contains(detail, `"email"`) || strings.Contains(detail, "password") {
			t.Fatalf("detail = %q, want it to name email, the first bad field by name", detail)
		}
	}
}

// TestDecode_SaysWhatToDo: the mistakes a newcomer makes with curl get an
// answer that says how to put them right: a JSON body sent without its
// Content-Type is told to send the header, malformed JSON is told where it
// goes wrong, and a body sent to an operation that takes none is refused
// rather than ignored. Nothing is stored.
func TestDecode_SaysWhatToDo(t *testing.T) {
	e := apitest.New(t)
	token := e.Register("grace@example.com", "correct horse")
	id := apitest.MsgID(t, e.Post(token, "kept"))
	msgPath := "/api/messages/" + strconv.FormatUint(id, 10)
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		detail                                string // the detail holds it
	}{
		{"curl -d: JSON sent as a form", "POST", "/api/messages", decForm, `{"content":"hi"}`, 415, "send the header Content-Type: application/json"},
		{"JSON sent as a form after spaces", "POST", "/api/messages", decForm, "\n  {\"content\": \"hi\"}", 415, "send the header Content-Type: application/json"},
		{"JSON sent as a form, malformed", "POST", "/api/messages", decForm, `{"content":"hi`, 415, "send the header Content-Type: application/json"},
		{"JSON without a Content-Type", "POST", "/api/messages", "", `{"content":"hi"}`, 415, "send the header Content-Type: application/json"},
		{"JSON as text/plain", "POST", "/api/messages", "text/plain", `{"content":"hi"}`, 415, "send the header Content-Type: application/json"},
		{"JSON with an unreadable Content-Type", "POST", "/api/messages", "application/json; charset", `{"content":"hi"}`, 415, "send the header Content-Type: application/json"},
		{"bad value", "POST", "/api/messages", decJSON, `{"content":x}`, 400, "line 1, column 12"},
		{"trailing comma on line 3", "POST", "/api/messages", decJSON, "{\n  \"content\": \"hi\",\n}", 400, "line 3, column 1"},
		{"columns count characters", "POST", "/api/messages", decJSON, `{"content":"héllo" x}`, 400, "line 1, column 20"},
		{"columns restart on each line", "POST", "/api/messages", decJSON, "{\n\"content\":\n  'hi'}", 400, "line 3, column 3"},
		{"cut short", "POST", "/api/messages", decJSON, `{"content":"hi"`, 400, "cut short: the JSON stops at line 1, column 16"},
		{"second object", "POST", "/api/messages", decJSON, `{"content":"a"} {"content":"b"}`, 400, "line 1, column 17"},
		{"empty", "POST", "/api/messages", decJSON, "  ", 400, "empty"},
		{"body to logout", "POST", "/api/logout", decJSON, `{}`, 400, "POST /api/logout takes no request body"},
		{"form body to logout", "POST", "/api/logout", decForm, `a=b`, 400, "takes no request body"},
		{"body to a delete", "DELETE", msgPath, decJSON, `{"id":1}`, 400, "DELETE " + msgPath + " takes no request body"},
		{"body to revoke every token", "DELETE", "/api/me/tokens", decJSON, `{}`, 400, "takes no request body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: tt.method, Path: tt.path, Token: token, ContentType: tt.contentType, Body: tt.body})
			p := apitest.AssertProblem(t, res, tt.status)
			if detail, _ := p["detail"].(string); !strings.Contains(detail, tt.detail) {
				t.Errorf("detail = %q, want it to hold %q", detail, tt.detail)
			}
			acctAssertUnchanged(t, e, before)
		})
	}
	// The refused logout and delete did nothing: the token works, the
	// message is there.
	if res := e.Do(apitest.Request{Method: "GET", Path: msgPath, Token: token}); res.Status != http.StatusOK {
		t.Fatalf("after the refused requests, GET %s = %d: %s", msgPath, res.Status, res.Body)
	}
}

// TestDecode_NoBodyChunked: a body of unknown length to an operation that
// takes none is refused once a byte of it arrives; an empty one is no
// body at all.
func TestDecode_NoBodyChunked(t *testing.T) {
	e := apitest.New(t)
	token := e.Register("grace@example.com", "correct horse")
	send := func(body string) *apitest.Response {
		req, err := http.NewRequest("POST", e.URL+"/api/logout", io.MultiReader(strings.NewReader(body)))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
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
	apitest.AssertProblem(t, send("x"), http.StatusBadRequest)
	if res := send(""); res.Status != http.StatusNoContent {
		t.Fatalf("logout with an empty chunked body = %d, want 204: %s", res.Status, res.Body)
	}
}
