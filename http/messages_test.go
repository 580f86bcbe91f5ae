package http_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	"herald/http/internal/apitest"
)

// Helpers for the message and search tests. Names carry a msg prefix so they
// cannot collide with helpers in the package's other test files.

const msgPassword = "correct horse battery"

// msgTimeLayout is the API's timestamp form: RFC 3339, UTC, six-digit fraction.
const msgTimeLayout = "2006-01-02T15:04:05.000000Z07:00"

var msgTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)

// msgUser registers email and returns its token.
func msgUser(e *apitest.Env, email string) string {
	e.T.Helper()
	return e.Register(email, msgPassword)
}

// msgEnvFor returns a copy of e that reports to t, so helpers called inside
// a subtest fail that subtest rather than its parent.
func msgEnvFor(e *apitest.Env, t *testing.T) *apitest.Env {
	c := *e
	c.T = t
	return &c
}

// msgBody is a request body with its media type.
type msgBody struct{ ct, body string }

func msgJSON(body string) msgBody { return msgBody{"application/json", body} }
func msgForm(body string) msgBody { return msgBody{"application/x-www-form-urlencoded", body} }
func msgMerge(body string) msgBody {
	return msgBody{"application/merge-patch+json", body}
}

// msgContentJSON is {"content": s} as JSON.
func msgContentJSON(t *testing.T, s string) msgBody {
	return msgJSON(apitest.JSONBody(t, map[string]string{"content": s}))
}

func msgMultipart(t *testing.T, fields map[string]string) msgBody {
	body, ct := apitest.MultipartBody(t, fields)
	return msgBody{ct, body}
}

// msgEncoding is one media type the message endpoints take bodies in.
type msgEncoding struct {
	name   string
	encode func(t *testing.T, fields map[string]string) msgBody
}

var msgCreateEncodings = []msgEncoding{
	{"json", func(t *testing.T, f map[string]string) msgBody { return msgJSON(apitest.JSONBody(t, f)) }},
	{"form", func(_ *testing.T, f map[string]string) msgBody { return msgForm(apitest.FormBody(f)) }},
	{"multipart", msgMultipart},
}

// PATCH also takes JSON merge patches.
var msgPatchEncodings = append(slices.Clone(msgCreateEncodings),
	msgEncoding{"merge-patch", func(t *testing.T, f map[string]string) msgBody { return msgMerge(apitest.JSONBody(t, f)) }})

func msgPath(id uint64) string { return fmt.Sprintf("/api/messages/%d", id) }

// msgFormatTime is t as the API writes it.
func msgFormatTime(t time.Time) string {
	return t.UTC().Truncate(time.Microsecond).Format(msgTimeLayout)
}

// assertMessageJSON checks the message shape: exactly id, content, user
// {id, email, handle, name}, createdAt, updatedAt, replyTo, replies and
// mentions, with well-formed timestamps.
func assertMessageJSON(t *testing.T, m map[string]any, content, email string) {
	t.Helper()
	if got, want := slices.Sorted(maps.Keys(m)), []string{"content", "createdAt", "id", "mentions", "replies", "replyTo", "updatedAt", "user"}; !slices.Equal(got, want) {
		t.Errorf("message keys = %v, want %v", got, want)
	}
	apitest.MsgID(t, m)
	if got, want := m["content"], content; got != want {
		t.Errorf("content = %.80q, want %.80q", got, want)
	}
	user, ok := m["user"].(map[string]any)
	if !ok {
		t.Fatalf("user = %#v, want an object", m["user"])
	}
	if got, want := slices.Sorted(maps.Keys(user)), []string{"email", "handle", "id", "name"}; !slices.Equal(got, want) {
		t.Errorf("user keys = %v, want %v", got, want)
	}
	if _, ok := m["mentions"].([]any); !ok {
		t.Errorf("mentions = %#v, want an array", m["mentions"])
	}
	if got, want := user["email"], email; got != want {
		t.Errorf("user.email = %v, want %v", got, want)
	}
	for _, k := range []string{"createdAt", "updatedAt"} {
		s, _ := m[k].(string)
		if !msgTimeRE.MatchString(s) {
			t.Errorf("%s = %q, want RFC 3339 UTC with a six-digit fraction", k, m[k])
		}
	}
}

// msgState is what a refused write must leave exactly as it was.
type msgState struct {
	Content, Owner, CreatedAt, UpdatedAt, ETag string
}

// readMsgState GETs the message at path.
func readMsgState(e *apitest.Env, token, path string) msgState {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: "GET", Path: path, Token: token})
	if res.Status != http.StatusOK {
		e.T.Fatalf("GET %s: status %d: %s", path, res.Status, res.Body)
	}
	m := res.JSON(e.T)
	s := msgState{ETag: res.Header.Get("ETag")}
	s.Content, _ = m["content"].(string)
	s.CreatedAt, _ = m["createdAt"].(string)
	s.UpdatedAt, _ = m["updatedAt"].(string)
	if u, ok := m["user"].(map[string]any); ok {
		s.Owner, _ = u["email"].(string)
	}
	if s.ETag == "" {
		e.T.Errorf("GET %s: no ETag", path)
	}
	return s
}

// assertMsgUnchanged checks that the message at path still reads as before.
func assertMsgUnchanged(e *apitest.Env, token, path string, before msgState) {
	e.T.Helper()
	if got, want := readMsgState(e, token, path), before; got != want {
		e.T.Errorf("message changed by a refused request:\n got %+v\nwant %+v", got, want)
	}
}

// assertCountsSame checks that a refused request stored nothing.
func assertCountsSame(e *apitest.Env, before bolt.Counts) {
	e.T.Helper()
	if got, want := e.Counts(), before; got != want {
		e.T.Errorf("store counts = %+v, want unchanged %+v", got, want)
	}
}

// assertViolation checks that a problem names field, both as a violation's
// propertyPath and in its detail.
func assertViolation(t *testing.T, p map[string]any, field string) {
	t.Helper()
	if field == "" {
		return
	}
	if got := apitest.ViolationPaths(p); !slices.Contains(got, field) {
		t.Errorf("violation paths = %v, want one for %q", got, field)
	}
	detail, _ := p["detail"].(string)
	if _, isValidation := p["violations"]; !isValidation || p["status"] != float64(http.StatusUnprocessableEntity) {
		if !strings.Contains(detail, field) {
			t.Errorf("detail = %q, want it to name %q", detail, field)
		}
	}
}

// assertChallenge checks an RFC 6750 WWW-Authenticate header on a 401.
func assertChallenge(t *testing.T, res *apitest.Response) {
	t.Helper()
	if got := res.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", got)
	}
}

func TestMessageCreate(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	var lastID uint64
	for _, path := range []string{"/api/message", "/api/messages"} {
		for _, enc := range msgCreateEncodings {
			t.Run(strings.TrimPrefix(path, "/api/")+"/"+enc.name, func(t *testing.T) {
				e := msgEnvFor(e, t)
				// A clock with nanoseconds: the API shows microseconds.
				e.Clock.Advance(time.Second + 123456789*time.Nanosecond)
				content := "hello from " + enc.name + ": <b>&amp;</b> ✓ 😀"
				in := enc.encode(t, map[string]string{"content": content})
				before := e.Counts()

				res := e.Do(apitest.Request{Method: "POST", Path: path, Token: token, ContentType: in.ct, Body: in.body})
				if got, want := res.Status, http.StatusCreated; got != want {
					t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
				}
				if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
					t.Errorf("Content-Type = %q, want %q", got, want)
				}
				m := res.JSON(t)
				assertMessageJSON(t, m, content, "ada@example.com")
				id := apitest.MsgID(t, m)
				if id <= lastID {
					t.Errorf("id = %d, want greater than the previous %d", id, lastID)
				}
				lastID = id
				if got, want := res.Header.Get("Location"), msgPath(id); got != want {
					t.Errorf("Location = %q, want %q", got, want)
				}
				etag := res.Header.Get("ETag")
				if !strings.HasPrefix(etag, `"`) || !strings.HasSuffix(etag, `"`) || len(etag) < 3 {
					t.Errorf("ETag = %q, want a strong entity tag", etag)
				}
				if got, want := m["createdAt"], m["updatedAt"]; got != want {
					t.Errorf("createdAt = %v, want it equal to updatedAt %v", got, want)
				}
				if got, want := m["createdAt"], msgFormatTime(e.Clock.Now()); got != want {
					t.Errorf("createdAt = %v, want %v", got, want)
				}
				after := e.Counts()
				if got, want := after.Messages, before.Messages+1; got != want {
					t.Errorf("messages stored = %d, want %d", got, want)
				}
				if got, want := after.Users, before.Users; got != want {
					t.Errorf("users = %d, want %d", got, want)
				}

				// The Location answers with the same representation and tag.
				got := e.Do(apitest.Request{Method: "GET", Path: res.Header.Get("Location"), Token: token})
				if got.Status != http.StatusOK {
					t.Fatalf("GET Location: status %d: %s", got.Status, got.Body)
				}
				if !reflect.DeepEqual(got.JSON(t), m) {
					t.Errorf("GET Location = %s, want %s", got.Body, res.Body)
				}
				if got, want := got.Header.Get("ETag"), etag; got != want {
					t.Errorf("GET ETag = %q, want %q", got, want)
				}
			})
		}
	}
}

// The owner is always the caller: a client that tries to set user, id or the
// timestamps is refused with 400 naming the field, and nothing is stored.
func TestMessageCreateReadOnlyFields(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	msgUser(e, "eve@example.com")

	cases := []struct {
		name  string
		in    msgBody
		field string
	}{
		{"json user object", msgJSON(`{"content":"hi","user":{"email":"eve@example.com"}}`), "user"},
		{"json user string", msgJSON(`{"content":"hi","user":"eve@example.com"}`), "user"},
		{"json user null", msgJSON(`{"content":"hi","user":null}`), "user"},
		{"json id number", msgJSON(`{"content":"hi","id":1}`), "id"},
		{"json id string", msgJSON(`{"content":"hi","id":"1"}`), "id"},
		{"json createdAt", msgJSON(`{"content":"hi","createdAt":"2020-01-01T00:00:00Z"}`), "createdAt"},
		{"json updatedAt", msgJSON(`{"content":"hi","updatedAt":"2020-01-01T00:00:00Z"}`), "updatedAt"},
		{"form user", msgForm("content=hi&user=eve%40example.com"), "user"},
		{"form id", msgForm("content=hi&id=7"), "id"},
		{"multipart user", msgMultipart(t, map[string]string{"content": "hi", "user": "eve@example.com"}), "user"},
		{"multipart id", msgMultipart(t, map[string]string{"content": "hi", "id": "7"}), "id"},
	}
	for _, path := range []string{"/api/message", "/api/messages"} {
		for _, tc := range cases {
			t.Run(strings.TrimPrefix(path, "/api/")+"/"+tc.name, func(t *testing.T) {
				e := msgEnvFor(e, t)
				before := e.Counts()
				res := e.Do(apitest.Request{Method: "POST", Path: path, Token: token, ContentType: tc.in.ct, Body: tc.in.body})
				p := apitest.AssertProblem(t, res, http.StatusBadRequest)
				assertViolation(t, p, tc.field)
				assertCountsSame(e, before)
			})
		}
	}
}

func TestMessageCreateContentRules(t *testing.T) {
	e := apitest.New(t, apitest.WithMaxBody(64<<10))
	token := msgUser(e, "ada@example.com")

	cases := []struct {
		name   string
		in     msgBody
		status int
		field  string // refusals: the field named
	}{
		{"missing", msgJSON(`{}`), http.StatusUnprocessableEntity, "content"},
		{"null", msgJSON(`{"content":null}`), http.StatusUnprocessableEntity, "content"},
		{"empty", msgJSON(`{"content":""}`), http.StatusUnprocessableEntity, "content"},
		{"ascii spaces", msgContentJSON(t, " \t\r\n "), http.StatusUnprocessableEntity, "content"},
		{"unicode spaces", msgContentJSON(t, "\u00a0\u3000\u2003"), http.StatusUnprocessableEntity, "content"},
		{"missing form", msgForm(""), http.StatusUnprocessableEntity, "content"},
		{"empty form", msgForm("content="), http.StatusUnprocessableEntity, "content"},
		{"empty multipart", msgMultipart(t, map[string]string{"content": ""}), http.StatusUnprocessableEntity, "content"},
		{"one character", msgContentJSON(t, "x"), http.StatusCreated, ""},
		{"whitespace kept as sent", msgContentJSON(t, "  indented\n\tsecond line  \n"), http.StatusCreated, ""},
		{"10000 two-byte characters", msgContentJSON(t, strings.Repeat("é", 10000)), http.StatusCreated, ""},
		{"10000 emoji", msgContentJSON(t, strings.Repeat("😀", 10000)), http.StatusCreated, ""},
		{"10000 ascii form", msgForm(apitest.FormBody(map[string]string{"content": strings.Repeat("a", 10000)})), http.StatusCreated, ""},
		{"10000 multipart", msgMultipart(t, map[string]string{"content": strings.Repeat("日", 10000)}), http.StatusCreated, ""},
		{"10001 two-byte characters", msgContentJSON(t, strings.Repeat("é", 10001)), http.StatusUnprocessableEntity, "content"},
		{"10001 emoji", msgContentJSON(t, strings.Repeat("😀", 10001)), http.StatusUnprocessableEntity, "content"},
		{"10001 ascii multipart", msgMultipart(t, map[string]string{"content": strings.Repeat("a", 10001)}), http.StatusUnprocessableEntity, "content"},
		{"invalid UTF-8 form", msgForm("content=%FF%FEhello"), http.StatusUnprocessableEntity, "content"},
		{"invalid UTF-8 multipart", msgMultipart(t, map[string]string{"content": "hi \xc3\x28 there"}), http.StatusUnprocessableEntity, "content"},
		{"content not a string", msgJSON(`{"content":42}`), http.StatusBadRequest, "content"},
		{"content an object", msgJSON(`{"content":{"text":"hi"}}`), http.StatusBadRequest, "content"},
		{"unknown field json", msgJSON(`{"content":"hi","colour":"red"}`), http.StatusBadRequest, "colour"},
		{"unknown field form", msgForm("content=hi&colour=red"), http.StatusBadRequest, "colour"},
		{"unknown field multipart", msgMultipart(t, map[string]string{"content": "hi", "colour": "red"}), http.StatusBadRequest, "colour"},
		{"repeated form field", msgForm("content=a&content=b"), http.StatusBadRequest, "content"},
		{"malformed JSON", msgJSON(`{"content":`), http.StatusBadRequest, ""},
		{"JSON array", msgJSON(`["hi"]`), http.StatusBadRequest, ""},
		{"JSON null", msgJSON(`null`), http.StatusBadRequest, ""},
		{"two JSON objects", msgJSON(`{"content":"a"}{"content":"b"}`), http.StatusBadRequest, ""},
		{"empty JSON body", msgJSON(""), http.StatusBadRequest, ""},
		{"text/plain", msgBody{"text/plain", "hello"}, http.StatusUnsupportedMediaType, ""},
		{"no Content-Type", msgBody{"", `{"content":"hi"}`}, http.StatusUnsupportedMediaType, ""},
		{"merge patch is for PATCH only", msgMerge(`{"content":"hi"}`), http.StatusUnsupportedMediaType, ""},
		{"body over the limit", msgContentJSON(t, strings.Repeat("a", 70<<10)), http.StatusRequestEntityTooLarge, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: token, ContentType: tc.in.ct, Body: tc.in.body})
			if tc.status != http.StatusCreated {
				p := apitest.AssertProblem(t, res, tc.status)
				assertViolation(t, p, tc.field)
				assertCountsSame(e, before)
				return
			}
			if got, want := res.Status, tc.status; got != want {
				t.Fatalf("status = %d, want %d: %.300s", got, want, res.Body)
			}
			m := res.JSON(t)
			// What was sent is what is stored and shown, unaltered.
			sent := decodeSentContent(t, tc.in)
			assertMessageJSON(t, m, sent, "ada@example.com")
			if got, want := readMsgState(e, token, msgPath(apitest.MsgID(t, m))).Content, sent; got != want {
				t.Errorf("stored content = %.40q (%d bytes), want %.40q (%d bytes)", got, len(got), want, len(want))
			}
			if got, want := e.Counts().Messages, before.Messages+1; got != want {
				t.Errorf("messages = %d, want %d", got, want)
			}
		})
	}
}

// decodeSentContent recovers the content field a test body carries.
func decodeSentContent(t *testing.T, in msgBody) string {
	t.Helper()
	req, err := http.NewRequest("POST", "/", strings.NewReader(in.body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", in.ct)
	if in.ct == "application/json" {
		var v struct{ Content string }
		if err := json.Unmarshal([]byte(in.body), &v); err != nil {
			t.Fatal(err)
		}
		return v.Content
	}
	if err := req.ParseMultipartForm(1 << 20); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		t.Fatal(err)
	}
	if err := req.ParseForm(); err != nil {
		t.Fatal(err)
	}
	return req.FormValue("content")
}

func TestMessageCreateAuth(t *testing.T) {
	e := apitest.New(t)
	revoked := msgUser(e, "ada@example.com")
	if res := e.Do(apitest.Request{Method: "POST", Path: "/api/logout", Token: revoked}); res.Status != http.StatusNoContent {
		t.Fatalf("logout: status %d: %s", res.Status, res.Body)
	}
	unknown, _, err := auth.MintToken()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		authorization string
		invalidToken  bool // the challenge says error="invalid_token"
	}{
		{"no token", "", false},
		{"empty bearer", "Bearer ", false},
		{"basic scheme", "Basic YWRhQGV4YW1wbGUuY29tOmNvcnJlY3QgaG9yc2U=", false},
		{"garbage token", "Bearer not-a-token", true},
		{"unknown token", "Bearer " + unknown, true},
		{"revoked token", "Bearer " + revoked, true},
	}
	for _, path := range []string{"/api/message", "/api/messages"} {
		for _, tc := range cases {
			t.Run(strings.TrimPrefix(path, "/api/")+"/"+tc.name, func(t *testing.T) {
				e := msgEnvFor(e, t)
				before := e.Counts()
				h := http.Header{}
				if tc.authorization != "" {
					h.Set("Authorization", tc.authorization)
				}
				res := e.Do(apitest.Request{Method: "POST", Path: path, Header: h,
					ContentType: "application/json", Body: `{"content":"hi"}`})
				apitest.AssertProblem(t, res, http.StatusUnauthorized)
				assertChallenge(t, res)
				if got := res.Header.Get("WWW-Authenticate"); tc.invalidToken != strings.Contains(got, `error="invalid_token"`) {
					t.Errorf("WWW-Authenticate = %q, invalid_token expected: %v", got, tc.invalidToken)
				}
				assertCountsSame(e, before)
			})
		}
	}
}

func TestMessageGet(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	other := msgUser(e, "bob@example.com")
	res := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: token,
		ContentType: "application/json", Body: `{"content":"hello"}`})
	if res.Status != http.StatusCreated {
		t.Fatalf("create: status %d: %s", res.Status, res.Body)
	}
	created := res.JSON(t)
	path := msgPath(apitest.MsgID(t, created))

	for name, tok := range map[string]string{"owner": token, "other user": other} {
		t.Run(name, func(t *testing.T) {
			got := msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: path, Token: tok})
			if got.Status != http.StatusOK {
				t.Fatalf("status = %d, want 200: %s", got.Status, got.Body)
			}
			if got, want := got.Header.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			if got, want := got.Header.Get("ETag"), res.Header.Get("ETag"); got != want || got == "" {
				t.Errorf("ETag = %q, want %q", got, want)
			}
			if !reflect.DeepEqual(got.JSON(t), created) {
				t.Errorf("body = %s, want %s", got.Body, res.Body)
			}
		})
	}

	for _, id := range []string{"999", "abc", "0", "-1", "+1", "1.0", "0x1", "1e0", "18446744073709551616", "%20"} {
		t.Run("not found/"+id, func(t *testing.T) {
			res := msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: "/api/messages/" + id, Token: token})
			apitest.AssertProblem(t, res, http.StatusNotFound)
		})
	}

	t.Run("no token", func(t *testing.T) {
		res := msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: path})
		apitest.AssertProblem(t, res, http.StatusUnauthorized)
		assertChallenge(t, res)
	})
	t.Run("no token, missing message", func(t *testing.T) {
		// Authentication comes first: no one learns which IDs exist.
		res := msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: "/api/messages/999"})
		apitest.AssertProblem(t, res, http.StatusUnauthorized)
	})
}

func TestMessagePatch(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	for _, enc := range msgPatchEncodings {
		t.Run(enc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			created := e.Post(token, "before "+enc.name)
			path := msgPath(apitest.MsgID(t, created))
			before := readMsgState(e, token, path)
			e.Clock.Advance(90*time.Second + 500*time.Microsecond)
			counts := e.Counts()

			in := enc.encode(t, map[string]string{"content": "after " + enc.name})
			res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token, ContentType: in.ct, Body: in.body})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
			m := res.JSON(t)
			assertMessageJSON(t, m, "after "+enc.name, "ada@example.com")
			if got, want := apitest.MsgID(t, m), apitest.MsgID(t, created); got != want {
				t.Errorf("id = %d, want %d", got, want)
			}
			if got, want := m["createdAt"], before.CreatedAt; got != want {
				t.Errorf("createdAt = %v, want unchanged %v", got, want)
			}
			if got, want := m["updatedAt"], msgFormatTime(e.Clock.Now()); got != want {
				t.Errorf("updatedAt = %v, want %v", got, want)
			}
			if m["updatedAt"].(string) <= before.UpdatedAt {
				t.Errorf("updatedAt = %v, want later than %v", m["updatedAt"], before.UpdatedAt)
			}
			etag := res.Header.Get("ETag")
			if etag == "" || etag == before.ETag {
				t.Errorf("ETag = %q, want a new tag (was %q)", etag, before.ETag)
			}
			after := readMsgState(e, token, path)
			want := msgState{Content: "after " + enc.name, Owner: "ada@example.com",
				CreatedAt: before.CreatedAt, UpdatedAt: m["updatedAt"].(string), ETag: etag}
			if after != want {
				t.Errorf("GET after PATCH = %+v, want %+v", after, want)
			}
			assertCountsSame(e, counts)
		})
	}
}

// A PATCH that changes nothing succeeds and leaves updatedAt and the ETag.
func TestMessagePatchNoChange(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	path := msgPath(apitest.MsgID(t, e.Post(token, "same")))
	cases := []struct {
		name string
		in   msgBody
	}{
		{"empty json object", msgJSON(`{}`)},
		{"empty merge patch", msgMerge(`{}`)},
		{"empty form", msgForm("")},
		{"same content json", msgJSON(`{"content":"same"}`)},
		{"same content multipart", msgMultipart(t, map[string]string{"content": "same"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			before := readMsgState(e, token, path)
			counts := e.Counts()
			e.Clock.Advance(time.Minute)
			res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token, ContentType: tc.in.ct, Body: tc.in.body})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			m := res.JSON(t)
			assertMessageJSON(t, m, "same", "ada@example.com")
			if got, want := m["updatedAt"], before.UpdatedAt; got != want {
				t.Errorf("updatedAt = %v, want unchanged %v", got, want)
			}
			if got, want := res.Header.Get("ETag"), before.ETag; got != want {
				t.Errorf("ETag = %q, want unchanged %q", got, want)
			}
			assertMsgUnchanged(e, token, path, before)
			assertCountsSame(e, counts)
		})
	}
}

// msgRefusal is a request that must be refused without touching the message.
type msgRefusal struct {
	name   string
	token  string
	header http.Header
	in     msgBody
	status int
	field  string
}

func TestMessagePatchRefused(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "bob@example.com")
	path := msgPath(apitest.MsgID(t, e.Post(ada, "original")))
	stale := readMsgState(e, ada, path).ETag
	e.Clock.Advance(time.Second)
	if res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"current"}`}); res.Status != http.StatusOK {
		t.Fatalf("setup patch: status %d: %s", res.Status, res.Body)
	}
	current := readMsgState(e, ada, path).ETag
	otherTag := readMsgState(e, ada, msgPath(apitest.MsgID(t, e.Post(ada, "another")))).ETag
	e.Clock.Advance(time.Second)

	valid := msgJSON(`{"content":"hijacked"}`)
	ifMatch := func(v ...string) http.Header { return http.Header{"If-Match": v} }
	cases := []msgRefusal{
		{name: "content null", token: ada, in: msgJSON(`{"content":null}`), status: 422, field: "content"},
		{name: "content null merge patch", token: ada, in: msgMerge(`{"content":null}`), status: 422, field: "content"},
		{name: "content empty", token: ada, in: msgJSON(`{"content":""}`), status: 422, field: "content"},
		{name: "content empty form", token: ada, in: msgForm("content="), status: 422, field: "content"},
		{name: "content spaces", token: ada, in: msgContentJSON(t, "\u00a0 \u3000\t"), status: 422, field: "content"},
		{name: "content too long", token: ada, in: msgContentJSON(t, strings.Repeat("é", 10001)), status: 422, field: "content"},
		{name: "content invalid UTF-8", token: ada, in: msgForm("content=%C3%28"), status: 422, field: "content"},
		{name: "content not a string", token: ada, in: msgJSON(`{"content":["a"]}`), status: 400, field: "content"},
		{name: "read-only id", token: ada, in: msgJSON(`{"content":"x","id":2}`), status: 400, field: "id"},
		{name: "read-only user", token: ada, in: msgJSON(`{"user":{"email":"bob@example.com"}}`), status: 400, field: "user"},
		{name: "read-only user merge patch", token: ada, in: msgMerge(`{"user":null}`), status: 400, field: "user"},
		{name: "read-only createdAt", token: ada, in: msgForm("createdAt=2020-01-01T00%3A00%3A00Z"), status: 400, field: "createdAt"},
		{name: "read-only updatedAt", token: ada, in: msgMultipart(t, map[string]string{"updatedAt": "2020-01-01T00:00:00Z"}), status: 400, field: "updatedAt"},
		{name: "unknown field", token: ada, in: msgJSON(`{"content":"x","pinned":"yes"}`), status: 400, field: "pinned"},
		{name: "malformed JSON", token: ada, in: msgJSON(`{"content":"x"`), status: 400},
		{name: "text/plain", token: ada, in: msgBody{"text/plain", "x"}, status: 415},
		{name: "no Content-Type", token: ada, in: msgBody{"", `{"content":"x"}`}, status: 415},
		{name: "not the owner", token: bob, in: valid, status: 403},
		{name: "not the owner, empty patch", token: bob, in: msgJSON(`{}`), status: 403},
		{name: "not the owner, current If-Match", token: bob, in: valid, header: ifMatch(current), status: 403},
		{name: "no token", in: valid, status: 401},
		{name: "bad token", token: "herald_not_a_real_token", in: valid, status: 401},
		{name: "stale If-Match", token: ada, in: valid, header: ifMatch(stale), status: 412},
		{name: "weak If-Match", token: ada, in: valid, header: ifMatch("W/" + current), status: 412},
		{name: "If-Match of another message", token: ada, in: valid, header: ifMatch(otherTag), status: 412},
		{name: "If-Match list without current", token: ada, in: valid, header: ifMatch(`"x", ` + stale), status: 412},
		{name: "If-Match unquoted", token: ada, in: valid, header: ifMatch(strings.Trim(current, `"`)), status: 412},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			before := readMsgState(e, ada, path)
			counts := e.Counts()
			res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: tc.token, Header: tc.header,
				ContentType: tc.in.ct, Body: tc.in.body})
			p := apitest.AssertProblem(t, res, tc.status)
			assertViolation(t, p, tc.field)
			if tc.status == http.StatusUnauthorized {
				assertChallenge(t, res)
			}
			assertMsgUnchanged(e, ada, path, before)
			assertCountsSame(e, counts)
		})
	}
}

func TestMessagePatchNotFound(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	e.Post(token, "exists")
	for _, id := range []string{"999", "abc", "0", "-1"} {
		t.Run(id, func(t *testing.T) {
			e := msgEnvFor(e, t)
			counts := e.Counts()
			res := e.Do(apitest.Request{Method: "PATCH", Path: "/api/messages/" + id, Token: token,
				ContentType: "application/json", Body: `{"content":"new"}`})
			apitest.AssertProblem(t, res, http.StatusNotFound)
			assertCountsSame(e, counts)
		})
	}
}

func TestMessagePatchIfMatch(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	path := msgPath(apitest.MsgID(t, e.Post(token, "v0")))
	cases := []struct {
		name  string
		match func(current string) []string
	}{
		{"current", func(c string) []string { return []string{c} }},
		{"star", func(string) []string { return []string{"*"} }},
		{"list with current", func(c string) []string { return []string{`"x", ` + c} }},
		{"list without spaces", func(c string) []string { return []string{`"x",` + c + `,"y"`} }},
		{"second header line", func(c string) []string { return []string{`"x"`, c} }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			before := readMsgState(e, token, path)
			e.Clock.Advance(time.Second)
			content := fmt.Sprintf("v%d", i+1)
			res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token,
				Header:      http.Header{"If-Match": tc.match(before.ETag)},
				ContentType: "application/json", Body: apitest.JSONBody(t, map[string]string{"content": content})})
			if got, want := res.Status, http.StatusOK; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			after := readMsgState(e, token, path)
			if got, want := after.Content, content; got != want {
				t.Errorf("content = %q, want %q", got, want)
			}
			if after.ETag == before.ETag {
				t.Errorf("ETag unchanged (%q) after an edit", after.ETag)
			}
			if got, want := res.Header.Get("ETag"), after.ETag; got != want {
				t.Errorf("PATCH ETag = %q, want the new tag %q", got, want)
			}
		})
	}
}

// Two editors holding the same ETag: the first write wins, the second gets
// 412 and does not overwrite it.
func TestMessagePatchLostUpdate(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	path := msgPath(apitest.MsgID(t, e.Post(token, "draft")))
	tag := readMsgState(e, token, path).ETag

	first := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token, Header: http.Header{"If-Match": {tag}},
		ContentType: "application/json", Body: `{"content":"first editor"}`})
	if got, want := first.Status, http.StatusOK; got != want {
		t.Fatalf("first editor: status %d, want %d: %s", got, want, first.Body)
	}
	before := readMsgState(e, token, path)
	counts := e.Counts()
	second := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token, Header: http.Header{"If-Match": {tag}},
		ContentType: "application/json", Body: `{"content":"second editor"}`})
	apitest.AssertProblem(t, second, http.StatusPreconditionFailed)
	assertMsgUnchanged(e, token, path, before)
	assertCountsSame(e, counts)
	if got, want := before.Content, "first editor"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
}

func TestMessageDelete(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	keep := e.Post(token, "keep this zebra")
	gone := e.Post(token, "delete this zebra")
	path := msgPath(apitest.MsgID(t, gone))
	before := readMsgState(e, token, path)
	counts := e.Counts()

	res := e.Do(apitest.Request{Method: "DELETE", Path: path, Token: token})
	if got, want := res.Status, http.StatusNoContent; got != want {
		t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
	}
	if len(res.Body) != 0 {
		t.Errorf("body = %q, want empty", res.Body)
	}
	if got, want := res.Header.Get("ETag"), before.ETag; got != want {
		t.Errorf("ETag = %q, want the deleted message's %q", got, want)
	}
	if got, want := e.Counts().Messages, counts.Messages-1; got != want {
		t.Errorf("messages = %d, want %d", got, want)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: path, Token: token}), http.StatusNotFound)

	res = e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=zebra", Token: token})
	if res.Status != http.StatusOK {
		t.Fatalf("search: status %d: %s", res.Status, res.Body)
	}
	if got, want := searchIDs(t, res), []uint64{apitest.MsgID(t, keep)}; !slices.Equal(got, want) {
		t.Errorf("search after delete = %v, want %v", got, want)
	}

	t.Run("twice", func(t *testing.T) {
		e := msgEnvFor(e, t)
		counts := e.Counts()
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: path, Token: token}), http.StatusNotFound)
		assertCountsSame(e, counts)
	})
	t.Run("PATCH after delete", func(t *testing.T) {
		e := msgEnvFor(e, t)
		counts := e.Counts()
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token,
			ContentType: "application/json", Body: `{"content":"back"}`}), http.StatusNotFound)
		assertCountsSame(e, counts)
	})
}

func TestMessageDeleteIfMatch(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	for name, match := range map[string]func(string) string{
		"current":           func(c string) string { return c },
		"star":              func(string) string { return "*" },
		"list with current": func(c string) string { return `"nope", ` + c },
	} {
		t.Run(name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			path := msgPath(apitest.MsgID(t, e.Post(token, "bye")))
			tag := readMsgState(e, token, path).ETag
			res := e.Do(apitest.Request{Method: "DELETE", Path: path, Token: token, Header: http.Header{"If-Match": {match(tag)}}})
			if got, want := res.Status, http.StatusNoContent; got != want {
				t.Fatalf("status = %d, want %d: %s", got, want, res.Body)
			}
			apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: path, Token: token}), http.StatusNotFound)
		})
	}
}

func TestMessageDeleteRefused(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "bob@example.com")
	path := msgPath(apitest.MsgID(t, e.Post(ada, "original")))
	stale := readMsgState(e, ada, path).ETag
	e.Clock.Advance(time.Second)
	if res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: ada, ContentType: "application/json", Body: `{"content":"current"}`}); res.Status != http.StatusOK {
		t.Fatalf("setup patch: status %d: %s", res.Status, res.Body)
	}
	current := readMsgState(e, ada, path).ETag
	ifMatch := func(v string) http.Header { return http.Header{"If-Match": {v}} }

	cases := []msgRefusal{
		{name: "not the owner", token: bob, status: 403},
		{name: "not the owner, current If-Match", token: bob, header: ifMatch(current), status: 403},
		{name: "no token", status: 401},
		{name: "bad token", token: "herald_not_a_real_token", status: 401},
		{name: "stale If-Match", token: ada, header: ifMatch(stale), status: 412},
		{name: "weak If-Match", token: ada, header: ifMatch("W/" + current), status: 412},
		{name: "If-Match list without current", token: ada, header: ifMatch(`"a", "b"`), status: 412},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			before := readMsgState(e, ada, path)
			counts := e.Counts()
			res := e.Do(apitest.Request{Method: "DELETE", Path: path, Token: tc.token, Header: tc.header})
			apitest.AssertProblem(t, res, tc.status)
			if tc.status == http.StatusUnauthorized {
				assertChallenge(t, res)
			}
			assertMsgUnchanged(e, ada, path, before)
			assertCountsSame(e, counts)
		})
	}
	for _, id := range []string{"999", "abc", "0", "-1"} {
		t.Run("not found/"+id, func(t *testing.T) {
			e := msgEnvFor(e, t)
			counts := e.Counts()
			apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: "/api/messages/" + id, Token: ada}), http.StatusNotFound)
			assertCountsSame(e, counts)
		})
	}
}

func TestMessageRouting(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	e.Post(token, "hello")

	methodCases := []struct {
		method, path string
		allow        []string // must be listed
		exactly      string   // when set, the whole Allow header
	}{
		{"PUT", "/api/messages/1", []string{"GET", "PATCH", "DELETE"}, ""},
		{"POST", "/api/messages/1", []string{"GET", "PATCH", "DELETE"}, ""},
		{"PUT", "/api/messages", []string{"GET", "POST"}, ""},
		{"DELETE", "/api/messages", []string{"GET", "POST"}, ""},
		{"GET", "/api/message", []string{"POST"}, ""},
		// The stream is served through /api/messages/:id (httprouter cannot
		// hold both), yet answers for its own methods only.
		{"PATCH", "/api/messages/stream", nil, "GET, HEAD, OPTIONS"},
		{"DELETE", "/api/messages/stream", nil, "GET, HEAD, OPTIONS"},
		{"POST", "/api/messages/stream", nil, "GET, HEAD, OPTIONS"},
	}
	for _, tc := range methodCases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			e := msgEnvFor(e, t)
			counts := e.Counts()
			res := e.Do(apitest.Request{Method: tc.method, Path: tc.path, Token: token,
				ContentType: "application/json", Body: `{"content":"x"}`})
			apitest.AssertProblem(t, res, http.StatusMethodNotAllowed)
			allow := strings.Split(res.Header.Get("Allow"), ",")
			for i := range allow {
				allow[i] = strings.TrimSpace(allow[i])
			}
			for _, m := range tc.allow {
				if !slices.Contains(allow, m) {
					t.Errorf("Allow = %q, want it to list %s", res.Header.Get("Allow"), m)
				}
			}
			if slices.Contains(allow, tc.method) {
				t.Errorf("Allow = %q lists the refused method %s", res.Header.Get("Allow"), tc.method)
			}
			if tc.exactly != "" && res.Header.Get("Allow") != tc.exactly {
				t.Errorf("Allow = %q, want %q", res.Header.Get("Allow"), tc.exactly)
			}
			assertCountsSame(e, counts)
		})
	}
	for _, path := range []string{"/api/nope", "/api/messages/1/extra", "/api/messages/", "/api", "/index.html"} {
		t.Run("404 "+path, func(t *testing.T) {
			apitest.AssertProblem(t, msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: path, Token: token}), http.StatusNotFound)
		})
	}
}

// Two users: each one's messages show its own e-mail, and neither can
// change the other's.
func TestMessageTwoUsers(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "Bob@Example.com")
	adaMsg := e.Post(ada, "from ada")
	bobMsg := e.Post(bob, "from bob")
	if got, want := adaMsg["user"].(map[string]any)["email"], "ada@example.com"; got != want {
		t.Errorf("ada's message owner = %v, want %v", got, want)
	}
	if got, want := bobMsg["user"].(map[string]any)["email"], "Bob@Example.com"; got != want {
		t.Errorf("bob's message owner = %v, want %v", got, want)
	}

	for _, tok := range []string{ada, bob} {
		res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages", Token: tok})
		if res.Status != http.StatusOK {
			t.Fatalf("search: status %d: %s", res.Status, res.Body)
		}
		owners := map[uint64]string{}
		for _, it := range searchItems(t, res) {
			owners[apitest.MsgID(t, it)] = it["user"].(map[string]any)["email"].(string)
		}
		want := map[uint64]string{apitest.MsgID(t, adaMsg): "ada@example.com", apitest.MsgID(t, bobMsg): "Bob@Example.com"}
		if !maps.Equal(owners, want) {
			t.Errorf("search owners = %v, want %v", owners, want)
		}
	}

	adaPath := msgPath(apitest.MsgID(t, adaMsg))
	before := readMsgState(e, ada, adaPath)
	counts := e.Counts()
	p := apitest.AssertProblem(t, e.Do(apitest.Request{Method: "PATCH", Path: adaPath, Token: bob,
		ContentType: "application/json", Body: `{"content":"from bob now"}`}), http.StatusForbidden)
	if d, _ := p["detail"].(string); strings.Contains(d, "from ada") {
		t.Errorf("403 detail leaks content: %q", d)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: adaPath, Token: bob}), http.StatusForbidden)
	assertMsgUnchanged(e, ada, adaPath, before)
	assertCountsSame(e, counts)

	// And the other way round.
	bobPath := msgPath(apitest.MsgID(t, bobMsg))
	bobBefore := readMsgState(e, bob, bobPath)
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: bobPath, Token: ada}), http.StatusForbidden)
	assertMsgUnchanged(e, bob, bobPath, bobBefore)
	assertCountsSame(e, counts)
}
