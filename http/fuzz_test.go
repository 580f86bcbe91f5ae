package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/model"
)

// The fuzz targets drive the handler in process, without a network, over a
// real database opened once per target. Seed inputs live in
// testdata/fuzz/<FuzzName>/. Helpers carry the fz prefix so they cannot
// collide with helpers other test files of the package define.

// fzTarget is a Herald handler over its own database.
type fzTarget struct {
	srv  http.Handler
	db   *bolt.DB
	logs *apitest.SyncBuffer // warnings and errors only, shown when a response is a 5xx
}

func fzNew(f *testing.F, maxBody int64) *fzTarget {
	f.Helper()
	db, err := bolt.Open(filepath.Join(f.TempDir(), "fuzz.db"), bolt.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		if err := db.Check(); err != nil {
			f.Errorf("bbolt check: %v", err)
		}
		if err := db.Close(); err != nil {
			f.Errorf("close db: %v", err)
		}
	})
	logs := &apitest.SyncBuffer{}
	// The guessing limits are opened wide: a fuzzer is one address making
	// thousands of attempts, and should reach the code behind them.
	wide := auth.Rate{Burst: 1 << 30, Every: time.Nanosecond}
	cfg := heraldhttp.Config{
		MaxBodyBytes: maxBody,
		Logger:       slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Limits:       heraldhttp.Limits{LoginFailuresPerAccount: wide, LoginFailuresPerAddress: wide, RegistrationsPerAddress: wide, WritesPerAccount: wide},
	}
	return &fzTarget{srv: heraldhttp.NewServer(db, auth.NewHasher(apitest.FastParams, 0), cfg), db: db, logs: logs}
}

func (z *fzTarget) serve(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	z.srv.ServeHTTP(rec, r)
	return rec
}

func (z *fzTarget) counts(tb testing.TB) bolt.Counts {
	tb.Helper()
	c, err := z.db.Counts()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fzBodyRequest builds a request whose body length is unknown to the
// server, as with Transfer-Encoding: chunked, so the body limit is enforced
// while reading rather than up front from Content-Length.
func fzBodyRequest(method, path, contentType string, body []byte) *http.Request {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.ContentLength = -1
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

// check asserts what every response must be: never a 5xx, always nosniff,
// and every non-2xx a problem document whose status is the HTTP status. It
// returns the problem, or nil for a 2xx.
func (z *fzTarget) check(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if rec.Code >= 500 {
		t.Fatalf("status %d: %s\nserver log:\n%s", rec.Code, rec.Body, z.logs.String())
	}
	if got, want := rec.Header().Get("X-Content-Type-Options"), "nosniff"; got != want {
		t.Errorf("X-Content-Type-Options = %q, want %q", got, want)
	}
	if rec.Code >= 200 && rec.Code < 300 {
		return nil
	}
	if got, want := rec.Header().Get("Content-Type"), "application/problem+json"; got != want {
		t.Fatalf("status %d with Content-Type %q, want %q: %s", rec.Code, got, want, rec.Body)
	}
	var p map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("status %d: problem body is not a JSON object: %v: %s", rec.Code, err, rec.Body)
	}
	if got, want := p["status"], float64(rec.Code); got != want {
		t.Errorf("problem status = %#v, want %v", got, want)
	}
	if got, want := p["title"], http.StatusText(rec.Code); got != want {
		t.Errorf("problem title = %#v, want %q", got, want)
	}
	if typ, _ := p["type"].(string); typ == "" {
		t.Errorf("problem without a type: %s", rec.Body)
	}
	if detail, _ := p["detail"].(string); detail == "" {
		t.Errorf("problem without a detail: %s", rec.Body)
	}
	if vs, present := p["violations"]; present {
		list, ok := vs.([]any)
		if !ok || len(list) == 0 {
			t.Errorf("violations = %#v, want a non-empty list", vs)
		}
		for _, v := range list {
			m, _ := v.(map[string]any)
			if path, _ := m["propertyPath"].(string); path == "" {
				t.Errorf("violation without a propertyPath: %s", rec.Body)
			}
			if msg, _ := m["message"].(string); msg == "" {
				t.Errorf("violation without a message: %s", rec.Body)
			}
		}
	}
	return p
}

// fzWellFormed reports whether body is one complete document of the media
// type contentType names, judged with the standard library alone. It is the
// oracle for "a 2xx was decoded from a well-formed body": truncated or
// malformed bodies must be refused, never half-read.
func fzWellFormed(contentType string, body []byte) bool {
	media, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch media {
	case "application/json", "application/merge-patch+json":
		return json.Valid(body)
	case "application/x-www-form-urlencoded":
		_, err := url.ParseQuery(string(body))
		return err == nil
	case "multipart/form-data":
		boundary := params["boundary"]
		// RFC 2046 §5.1.1: the body ends with the close delimiter. The
		// reader below also returns io.EOF for some bodies cut short, so
		// look for the delimiter itself.
		if boundary == "" || !(bytes.HasPrefix(body, []byte("--"+boundary+"--")) || bytes.Contains(body, []byte("\n--"+boundary+"--"))) {
			return false
		}
		mr := multipart.NewReader(bytes.NewReader(body), boundary)
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return true
			}
			if err != nil {
				return false
			}
			if _, err := io.Copy(io.Discard, part); err != nil {
				return false
			}
		}
	}
	return false
}

// fzJSON decodes a 2xx JSON body.
func fzJSON(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if got, want := rec.Header().Get("Content-Type"), "application/json"; got != want {
		t.Fatalf("status %d with Content-Type %q, want %q", rec.Code, got, want)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("status %d: body is not a JSON object: %v: %s", rec.Code, err, rec.Body)
	}
	return m
}

// fzRegister creates an account through the handler and returns its token.
func (z *fzTarget) register(f *testing.F, email string) string {
	f.Helper()
	rec := z.serve(fzBodyRequest("POST", "/api/register", "application/json",
		[]byte(`{"email":"`+email+`","password":"correct horse"}`)))
	if rec.Code != http.StatusCreated {
		f.Fatalf("register %s: status %d: %s", email, rec.Code, rec.Body)
	}
	var body struct{ Token string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		f.Fatal(err)
	}
	return body.Token
}

func (z *fzTarget) post(f *testing.F, token, content string) {
	f.Helper()
	b, _ := json.Marshal(map[string]string{"content": content})
	r := fzBodyRequest("POST", "/api/messages", "application/json", b)
	r.Header.Set("Authorization", "Bearer "+token)
	if rec := z.serve(r); rec.Code != http.StatusCreated {
		f.Fatalf("post: status %d: %s", rec.Code, rec.Body)
	}
}

// fzPosition finds the line and column a problem's detail names.
var fzPosition = regexp.MustCompile(`at line (\d+), column (\d+)`)

// fzSaysWhere checks the refusal of a JSON body that is not valid JSON:
// a 400 naming a line and column that lie within the body (a column may
// be one past a line's last character, where a cut-short body stops).
func fzSaysWhere(t *testing.T, contentType string, body []byte, status int, p map[string]any) {
	t.Helper()
	media, _, err := mime.ParseMediaType(contentType)
	if err != nil || media != "application/json" || json.Valid(body) || len(bytes.TrimSpace(body)) == 0 {
		return
	}
	detail, _ := p["detail"].(string)
	if status != http.StatusBadRequest {
		t.Fatalf("malformed JSON %q: status %d, want 400: %s", body, status, detail)
	}
	m := fzPosition.FindStringSubmatch(detail)
	if m == nil {
		t.Fatalf("malformed JSON %q: detail %q names no line and column", body, detail)
	}
	line, _ := strconv.Atoi(m[1])
	column, _ := strconv.Atoi(m[2])
	lines := strings.Split(string(body), "\n")
	if line < 1 || line > len(lines) || column < 1 || column > utf8.RuneCountInString(lines[line-1])+1 {
		t.Fatalf("malformed JSON %q: detail %q names a place outside the body", body, detail)
	}
}

// FuzzRegisterBody sends arbitrary bodies of arbitrary declared types to
// POST /api/register.
func FuzzRegisterBody(f *testing.F) {
	z := fzNew(f, 4096)
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		before := z.counts(t)
		rec := z.serve(fzBodyRequest("POST", "/api/register", contentType, body))
		p := z.check(t, rec)
		after := z.counts(t)
		if p != nil {
			if after != before {
				t.Fatalf("refused with %d but the store changed: %+v → %+v", rec.Code, before, after)
			}
			return
		}
		if got, want := rec.Code, http.StatusCreated; got != want {
			t.Fatalf("status = %d, want %d or a problem", got, want)
		}
		if !fzWellFormed(contentType, body) {
			t.Errorf("registered from a body that is not a complete %q document: %q", contentType, body)
		}
		if want := (bolt.Counts{Users: before.Users + 1, Tokens: before.Tokens + 1, Messages: before.Messages}); after != want {
			t.Errorf("counts = %+v, want %+v", after, want)
		}
		u := fzJSON(t, rec)
		if got, want := strings.Join(acctKeys(u), ","), "createdAt,email,expiresAt,handle,id,name,roles,token"; got != want {
			t.Errorf("keys = %s, want %s", got, want)
		}
		if token, _ := u["token"].(string); !auth.WellFormedToken(token) {
			t.Errorf("token = %#v, want a well-formed token", u["token"])
		}
		if email, _ := u["email"].(string); email == "" || email != strings.TrimSpace(email) || !strings.Contains(email, "@") {
			t.Errorf("stored e-mail %q is blank, untrimmed or has no @", email)
		}
		if bytes.Contains(rec.Body.Bytes(), []byte("argon2")) {
			t.Errorf("response contains a password hash: %s", rec.Body)
		}
	})
}

// FuzzMessageBody sends arbitrary bodies of arbitrary declared types to
// message creation and, with the same input, to PATCH of an existing
// message.
func FuzzMessageBody(f *testing.F) {
	z := fzNew(f, 16<<10) // room for content over the 10,000-character limit
	token := z.register(f, "fuzz@example.com")
	z.post(f, token, "the message every PATCH edits")
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		before := z.counts(t)
		r := fzBodyRequest("POST", "/api/messages", contentType, body)
		r.Header.Set("Authorization", "Bearer "+token)
		rec := z.serve(r)
		p := z.check(t, rec)
		after := z.counts(t)
		if p != nil {
			if after != before {
				t.Fatalf("create refused with %d but the store changed: %+v → %+v", rec.Code, before, after)
			}
			fzSaysWhere(t, contentType, body, rec.Code, p)
		} else {
			if got, want := rec.Code, http.StatusCreated; got != want {
				t.Fatalf("create status = %d, want %d or a problem", got, want)
			}
			if !fzWellFormed(contentType, body) {
				t.Errorf("created from a body that is not a complete %q document: %q", contentType, body)
			}
			if want := (bolt.Counts{Users: before.Users, Tokens: before.Tokens, Messages: before.Messages + 1}); after != want {
				t.Errorf("counts = %+v, want %+v", after, want)
			}
			m := fzJSON(t, rec)
			if got, want := rec.Header().Get("Location"), fmt.Sprint("/api/messages/", m["id"]); got != want {
				t.Errorf("Location = %q, want %q", got, want)
			}
			if owner, _ := m["user"].(map[string]any); owner["email"] != "fuzz@example.com" {
				t.Errorf("owner = %#v, want fuzz@example.com", m["user"])
			}
			if content, _ := m["content"].(string); strings.TrimSpace(content) == "" {
				t.Errorf("stored blank content %q", content)
			}
		}

		before = z.counts(t)
		r = fzBodyRequest("PATCH", "/api/messages/1", contentType, body)
		r.Header.Set("Authorization", "Bearer "+token)
		rec = z.serve(r)
		p = z.check(t, rec)
		if after := z.counts(t); after != before {
			t.Fatalf("PATCH answered %d and changed the counts: %+v → %+v", rec.Code, before, after)
		}
		if p == nil {
			if got, want := rec.Code, http.StatusOK; got != want {
				t.Fatalf("PATCH status = %d, want %d or a problem", got, want)
			}
			if !fzWellFormed(contentType, body) {
				t.Errorf("patched from a body that is not a complete %q document: %q", contentType, body)
			}
			if m := fzJSON(t, rec); m["id"] != float64(1) {
				t.Errorf("PATCH answered message %#v, want 1", m["id"])
			}
		}
	})
}

// FuzzSearchQuery sends arbitrary query strings to GET /api/messages.
func FuzzSearchQuery(f *testing.F) {
	z := fzNew(f, 0)
	ada := z.register(f, "ada@example.com")
	grace := z.register(f, "Grace@Example.com")
	words := []string{"hello", "world", "Hello, World!", "naïve café", "日本語 テキスト", "go-lang", "2026", "x"}
	for i := range 25 {
		token := ada
		if i%3 == 0 {
			token = grace
		}
		z.post(f, token, fmt.Sprintf("%s message %d", words[i%len(words)], i))
	}
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest("GET", "/api/messages", nil)
		r.URL.RawQuery = rawQuery
		r.Header.Set("Authorization", "Bearer "+ada)
		rec := z.serve(r)
		p := z.check(t, rec)
		params, parseErr := url.ParseQuery(rawQuery)
		switch {
		case rec.Code == http.StatusOK:
			if parseErr != nil {
				t.Fatalf("malformed query %q answered 200", rawQuery)
			}
			z.checkPage(t, rec)
		case rec.Code == http.StatusBadRequest:
			if parseErr != nil {
				return // a query string that is not one: nothing to name
			}
			// A well-formed query refused: the problem names one of its
			// parameters.
			paths := apitest.ViolationPaths(p)
			switch {
			case len(paths) == 1:
				// JSON cannot carry a name that is not UTF-8: compare
				// names as they come out of a JSON round trip.
				detail, _ := p["detail"].(string)
				matched, inDetail := false, false
				for name := range params {
					if fzJSONString(t, name) == paths[0] {
						matched = true
						inDetail = inDetail || strings.Contains(detail, name) || strings.Contains(detail, strconv.Quote(name))
					}
				}
				if !matched {
					t.Errorf("400 names %q, not a parameter of %q", paths[0], rawQuery)
				} else if !inDetail {
					t.Errorf("detail %q does not name %q", detail, paths[0])
				}
			case len(paths) == 0:
				// Only a parameter with an empty name has no path to give;
				// the detail still shows it as "".
				detail, _ := p["detail"].(string)
				if _, ok := params[""]; !ok || !strings.Contains(detail, `""`) {
					t.Errorf("400 for %q names no parameter: %s", rawQuery, rec.Body)
				}
			default:
				t.Errorf("400 names several parameters %q for %q", paths, rawQuery)
			}
		default:
			t.Fatalf("status %d for query %q, want 200 or 400: %s", rec.Code, rawQuery, rec.Body)
		}
	})
}

// FuzzStreamRequest sends the stream's parameters and Last-Event-ID as a
// client could. A recorder has no connection to take, so what runs is all
// the stream does before its first event: it must answer 200 with an event
// stream, or a 400 naming the one thing it refused, and take q and owner
// exactly when search takes them.
func FuzzStreamRequest(f *testing.F) {
	z := fzNew(f, 0)
	ada := z.register(f, "ada@example.com")
	z.post(f, ada, "hello stream")
	f.Fuzz(func(t *testing.T, rawQuery, lastEventID string, head bool) {
		if strings.ContainsAny(lastEventID, "\r\n\x00") {
			return // net/http refuses such a header before any handler sees it
		}
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		r := httptest.NewRequest(method, "/api/messages/stream", nil)
		r.URL.RawQuery = rawQuery
		r.Header.Set("Authorization", "Bearer "+ada)
		if lastEventID != "" {
			r.Header.Set("Last-Event-ID", lastEventID)
		}
		rec := z.serve(r)
		p := z.check(t, rec)

		wantPath, want := fzStreamVerdict(t, z, ada, rawQuery, lastEventID)
		if rec.Code != want {
			t.Fatalf("%s ?%s with Last-Event-ID %q: status %d, want %d: %s", method, rawQuery, lastEventID, rec.Code, want, rec.Body)
		}
		switch {
		case want == http.StatusOK:
			if got := rec.Header().Get("Content-Type"); got != "text/event-stream" {
				t.Errorf("200 with Content-Type %q, want text/event-stream", got)
			}
		case wantPath != "":
			if paths := apitest.ViolationPaths(p); len(paths) != 1 || paths[0] != wantPath {
				t.Errorf("?%s with Last-Event-ID %q: 400 names %q, want %q", rawQuery, lastEventID, paths, wantPath)
			}
		}
	})
}

// fzStreamVerdict is what a stream request should get: its status and,
// for a 400 that can name a single culprit, the name. Search decides q and
// owner, so the two cannot drift apart.
func fzStreamVerdict(t *testing.T, z *fzTarget, token, rawQuery, lastEventID string) (string, int) {
	params, err := url.ParseQuery(rawQuery)
	if err != nil {
		return "", http.StatusBadRequest
	}
	for name, values := range params {
		if len(values) > 1 || (name != "q" && name != "owner" && name != "lastEventId") {
			return "", http.StatusBadRequest // which of several is named is FuzzSearchQuery's concern
		}
	}
	filters := url.Values{}
	for _, name := range []string{"q", "owner"} {
		if v, ok := params[name]; ok {
			filters[name] = v
		}
	}
	r := httptest.NewRequest(http.MethodGet, "/api/messages?"+filters.Encode(), nil)
	r.Header.Set("Authorization", "Bearer "+token)
	search := z.serve(r)
	if search.Code != http.StatusOK {
		var p map[string]any
		_ = json.Unmarshal(search.Body.Bytes(), &p)
		if paths := apitest.ViolationPaths(p); search.Code == http.StatusBadRequest && len(paths) == 1 {
			return paths[0], http.StatusBadRequest
		}
		t.Fatalf("search for ?%s answered %d: %s", filters.Encode(), search.Code, search.Body)
	}
	resume, name := lastEventID, "Last-Event-ID"
	if resume == "" {
		resume, name = params.Get("lastEventId"), "lastEventId"
	}
	if _, err := strconv.ParseUint(resume, 10, 64); resume != "" && err != nil {
		return name, http.StatusBadRequest
	}
	return "", http.StatusOK
}

// fzJSONString returns s as it reads back after encoding as a JSON string,
// where each byte that is not UTF-8 becomes U+FFFD.
func fzJSONString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPage asserts the shape of a search result page.
func (z *fzTarget) checkPage(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	page := fzJSON(t, rec)
	if got, want := strings.Join(acctKeys(page), ","), "items,next"; got != want {
		t.Fatalf("page keys = %s, want %s", got, want)
	}
	items, ok := page["items"].([]any)
	if !ok {
		t.Fatalf("items = %#v, want a list", page["items"])
	}
	if len(items) > 100 {
		t.Errorf("page of %d items, over the maximum limit", len(items))
	}
	var ids []float64
	for _, it := range items {
		m, _ := it.(map[string]any)
		id, _ := m["id"].(float64)
		ids = append(ids, id)
		if owner, _ := m["user"].(map[string]any); owner == nil || owner["email"] == nil {
			t.Errorf("item without an owner e-mail: %#v", it)
		}
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			t.Errorf("items not newest first: ids %v", ids)
			break
		}
	}
	link := rec.Header().Get("Link")
	switch next := page["next"].(type) {
	case nil:
		if link != "" {
			t.Errorf("Link %q on the last page", link)
		}
	case string:
		if next == "" || !strings.Contains(link, `rel="next"`) || !strings.Contains(link, "cursor="+url.QueryEscape(next)) {
			t.Errorf("next = %q with Link %q", next, link)
		}
	default:
		t.Errorf("next = %#v, want a string or null", page["next"])
	}
}

// FuzzAuthorization sends arbitrary Authorization headers to a protected
// read and a protected write: anything but the one valid token is a 401
// problem with a Bearer challenge, and nothing is stored.
func FuzzAuthorization(f *testing.F) {
	z := fzNew(f, 0)
	token := z.register(f, "ada@example.com")
	for _, seed := range []string{
		"", "Bearer", "Bearer ", "Bearer " + token, "bearer " + token, "BEARER  " + token + "  ",
		"Basic YWRhOnB3", "Bearer " + token + "x", "Bearer " + token[:len(token)-1],
		"Bearer herald_", "Bearer " + strings.Repeat("A", 4096), "Bearer\t" + token,
		"Bearer " + token + "\r\nX-Evil: 1", "Token " + token, "Bearer " + strings.ToLower(token),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		for _, r := range []*http.Request{
			httptest.NewRequest("GET", "/api/me", nil),
			fzBodyRequest("POST", "/api/messages", "application/json", []byte(`{"content":"fuzzed"}`)),
		} {
			r.Header["Authorization"] = []string{header}
			before := z.counts(t)
			rec := z.serve(r)
			p := z.check(t, rec)
			valid := false
			if scheme, rest, ok := strings.Cut(header, " "); ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(rest) == token {
				valid = true
			}
			switch {
			case valid && p != nil:
				t.Fatalf("%s %s with the valid token: %d %s", r.Method, r.URL.Path, rec.Code, rec.Body)
			case !valid && p == nil:
				t.Fatalf("%s %s with Authorization %q answered %d", r.Method, r.URL.Path, header, rec.Code)
			case !valid:
				if rec.Code != http.StatusUnauthorized || !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("Authorization %q: %d with challenge %q, want 401 Bearer", header, rec.Code, rec.Header().Get("WWW-Authenticate"))
				}
				if after := z.counts(t); after != before {
					t.Fatalf("refused request changed the store: %+v → %+v", before, after)
				}
			}
		}
	})
}

// FuzzAccountBodies sends arbitrary bodies of arbitrary declared types to
// login, password change and account deletion. None may fail inside, none
// may change the store unless it is well formed and right, and the account
// survives (its password is never the fuzzed one).
func FuzzAccountBodies(f *testing.F) {
	z := fzNew(f, 4096)
	token := z.register(f, "ada@example.com")
	for _, seed := range []struct{ ct, body string }{
		{"application/json", `{"username":"ada@example.com","password":"wrong horse"}`},
		{"application/json", `{"currentPassword":"wrong","newPassword":"a new password"}`},
		{"application/json", `{"password":"wrong"}`},
		{"application/x-www-form-urlencoded", "username=ada%40example.com&password=x"},
		{"multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"password\"\r\n\r\nwrong\r\n--X--\r\n"},
		{"application/json", `{"password":null}`},
		{"application/json", `{"password":"x","password":"y"}`},
		{"text/plain", "password=wrong"},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		for _, target := range []struct{ method, path string }{
			{"POST", "/api/login"},
			{"POST", "/api/me/password"},
			{"DELETE", "/api/me"},
		} {
			before := z.counts(t)
			r := fzBodyRequest(target.method, target.path, contentType, body)
			r.Header.Set("Authorization", "Bearer "+token)
			rec := z.serve(r)
			p := z.check(t, rec)
			if p == nil && target.path != "/api/login" {
				t.Fatalf("%s %s succeeded with a fuzzed password: %q", target.method, target.path, body)
			}
			after := z.counts(t)
			if p == nil && !fzWellFormed(contentType, body) {
				t.Errorf("%s %s accepted a body that is not a complete %q document: %q", target.method, target.path, contentType, body)
			}
			// A successful login adds a token; nothing else changes anything.
			if p != nil || target.path != "/api/login" {
				if after != before {
					t.Fatalf("%s %s answered %d and changed the store: %+v → %+v", target.method, target.path, rec.Code, before, after)
				}
			}
		}
	})
}

// FuzzAdminBodies sends arbitrary bodies of arbitrary declared types to
// the administration routes that take one, and to the password reset.
// None may fail inside, a 2xx needs a well-formed body, and the
// administrator who sends them stays one: no body can take the role from
// the last administrator or suspend them.
func FuzzAdminBodies(f *testing.F) {
	z := fzNew(f, 4096)
	root := z.register(f, "root@example.com")
	z.register(f, "ada@example.com")
	ctx := context.Background()
	for _, email := range []string{"root@example.com"} {
		u, err := z.db.UserByEmail(ctx, email)
		if err != nil {
			f.Fatal(err)
		}
		admin := true
		if _, err := z.db.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Admin: &admin}); err != nil {
			f.Fatal(err)
		}
	}
	for _, seed := range []struct{ ct, body string }{
		{"application/merge-patch+json", `{"suspended":true}`},
		{"application/merge-patch+json", `{"admin":false,"suspended":false}`},
		{"application/json", `{"admin":"yes"}`},
		{"application/json", `{"suspended":null}`},
		{"application/json", `{"maxUses":3,"expiresAt":"2026-01-09T00:00:00Z"}`},
		{"application/json", `{"maxUses":1e3}`},
		{"application/json", `{"maxUses":-1}`},
		{"application/x-www-form-urlencoded", "maxUses=2&expiresAt=2026-01-03T00%3A00%3A00Z"},
		{"application/x-www-form-urlencoded", "admin=true"},
		{"application/json", `{"code":"herald_reset_x","newPassword":"a new password"}`},
		{"multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"suspended\"\r\n\r\ntrue\r\n--X--\r\n"},
		{"application/merge-patch+json", `{"registration":"invite","writesPerAccount":"60/5s"}`},
		{"application/json", `{"writesPerAccount":"1/1ns"}`},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		for _, target := range []struct{ method, path string }{
			{"PATCH", "/api/admin/users/2"},
			{"PATCH", "/api/admin/users/1"},
			{"POST", "/api/admin/invites"},
			{"POST", "/api/password-reset"},
			{"PATCH", "/api/admin/settings"},
		} {
			r := fzBodyRequest(target.method, target.path, contentType, body)
			r.Header.Set("Authorization", "Bearer "+root)
			rec := z.serve(r)
			if p := z.check(t, rec); p == nil && !fzWellFormed(contentType, body) {
				t.Errorf("%s %s accepted a body that is not a complete %q document: %q", target.method, target.path, contentType, body)
			}
		}
		u, err := z.db.UserByEmail(ctx, "root@example.com")
		if err != nil || !u.HasRole(model.RoleAdmin) || u.Suspended {
			t.Fatalf("after %q %q the last administrator is %+v, %v", contentType, body, u, err)
		}
		// Whatever was stored, the server can read back.
		st, err := z.db.Settings(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := st[model.SettingRegistration]; ok {
			if _, err := heraldhttp.ParseRegistration(v); err != nil {
				t.Fatalf("after %q %q the stored registration is %q", contentType, body, v)
			}
		}
		if v, ok := st[model.SettingWritesPerAccount]; ok {
			if r, err := auth.ParseRate(v); err != nil || r.String() != v {
				t.Fatalf("after %q %q the stored write limit is %q", contentType, body, v)
			}
		}
	})
}
