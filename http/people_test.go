package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/http/internal/apitest"
)

// postReply posts content as an answer to replyTo.
func postReply(e *apitest.Env, token string, replyTo uint64, content string) map[string]any {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/messages", Token: token, ContentType: "application/json",
		Body: fmt.Sprintf(`{"content":%q,"replyTo":%d}`, content, replyTo)})
	if res.Status != http.StatusCreated {
		e.T.Fatalf("reply to %d: %d %s", replyTo, res.Status, res.Body)
	}
	return res.JSON(e.T)
}

func getJSON(e *apitest.Env, token, path string) map[string]any {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: http.MethodGet, Path: path, Token: token})
	if res.Status != http.StatusOK {
		e.T.Fatalf("GET %s: %d %s", path, res.Status, res.Body)
	}
	return res.JSON(e.T)
}

func contents(items any) []string {
	var out []string
	for _, it := range items.([]any) {
		out = append(out, it.(map[string]any)["content"].(string))
	}
	return out
}

// TestMessageJSONShowsPeople: a message's user carries the owner's ID,
// e-mail, handle and name as the account has them now; replyTo, replies
// and mentions are there on create, read, search and edit.
func TestMessageJSONShowsPeople(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	m := e.Post(ada, "hello @bob and @nobody")
	user := m["user"].(map[string]any)
	if user["email"] != "ada@example.com" || user["handle"] != "ada" || user["name"] != "ada" || user["id"] == nil {
		t.Errorf("user = %v", user)
	}
	if m["replyTo"] != nil || m["replies"] != float64(0) {
		t.Errorf("a new message: replyTo %v, replies %v", m["replyTo"], m["replies"])
	}
	mentions, _ := json.Marshal(m["mentions"])
	me := getJSON(e, bob, "/api/me")
	if want := fmt.Sprintf(`[{"handle":"bob","id":%v}]`, me["id"]); string(mentions) != want {
		t.Errorf("mentions = %s, want %s", mentions, want)
	}
	id := apitest.MsgID(t, m)
	r := postReply(e, bob, id, "hi back")
	if r["replyTo"] != float64(id) {
		t.Errorf("reply's replyTo = %v, want %d", r["replyTo"], id)
	}
	res := e.Do(apitest.Request{Method: http.MethodPatch, Path: "/api/me", Token: ada, ContentType: "application/json", Body: `{"name":"Ada Lovelace","handle":"countess"}`})
	if res.Status != http.StatusOK {
		t.Fatalf("PATCH /api/me: %d %s", res.Status, res.Body)
	}
	got := getJSON(e, bob, messagePath(id))
	if u := got["user"].(map[string]any); u["name"] != "Ada Lovelace" || u["handle"] != "countess" || got["replies"] != float64(1) {
		t.Errorf("read back: user %v, replies %v", u, got["replies"])
	}
	page := getJSON(e, bob, "/api/messages?owner=ada@example.com")
	if u := page["items"].([]any)[0].(map[string]any)["user"].(map[string]any); u["name"] != "Ada Lovelace" {
		t.Errorf("search shows %v", u)
	}
}

// TestReplies: replyTo on create, refused when the message does not
// exist (422 naming replyTo) or is not an ID, read-only on PATCH; the
// replies listed oldest first with cursors bound to their thread; a
// deleted message's replies still listed; 404 for one that never was.
func TestReplies(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	root := apitest.MsgID(t, e.Post(ada, "root"))
	other := apitest.MsgID(t, e.Post(ada, "other"))
	for i := range 5 {
		postReply(e, bob, root, fmt.Sprintf("reply %d", i))
	}
	postReply(e, ada, other, "elsewhere")

	var seen []string
	path := messagePath(root) + "/replies?limit=2"
	var cursor string
	for range 10 {
		p := getJSON(e, ada, path)
		seen = append(seen, contents(p["items"])...)
		if p["next"] == nil {
			break
		}
		cursor = p["next"].(string)
		path = messagePath(root) + "/replies?limit=2&cursor=" + cursor
	}
	if want := []string{"reply 0", "reply 1", "reply 2", "reply 3", "reply 4"}; !slices.Equal(seen, want) {
		t.Errorf("replies = %q, want %q", seen, want)
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{http.MethodPost, "/api/messages", `{"content":"x","replyTo":9999}`, http.StatusUnprocessableEntity, "replyTo"},
		{http.MethodPost, "/api/messages", `{"content":"x","replyTo":0}`, http.StatusUnprocessableEntity, "replyTo"},
		{http.MethodPost, "/api/messages", `{"content":"x","replyTo":-3}`, http.StatusUnprocessableEntity, "replyTo"},
		{http.MethodPost, "/api/messages", `{"content":"x","replyTo":"seven"}`, http.StatusBadRequest, "replyTo"},
		{http.MethodPatch, messagePath(root), `{"replyTo":5}`, http.StatusBadRequest, "replyTo"},
		{http.MethodGet, messagePath(other) + "/replies?cursor=" + cursor, "", http.StatusBadRequest, "cursor"},
		{http.MethodGet, messagePath(root) + "/replies?limit=0", "", http.StatusBadRequest, "limit"},
		{http.MethodGet, messagePath(root) + "/replies?order=new", "", http.StatusBadRequest, "order"},
		{http.MethodGet, "/api/messages/9999/replies", "", http.StatusNotFound, ""},
	} {
		req := apitest.Request{Method: tc.method, Path: tc.path, Token: ada}
		if tc.body != "" {
			req.ContentType, req.Body = "application/json", tc.body
		}
		p := apitest.AssertProblem(t, e.Do(req), tc.status)
		if tc.field != "" && !slices.Contains(apitest.ViolationPaths(p), tc.field) {
			t.Errorf("%s %s %s: violations %q, want %s", tc.method, tc.path, tc.body, apitest.ViolationPaths(p), tc.field)
		}
	}

	e.Remove(ada, float64(root))
	if p := getJSON(e, ada, messagePath(root)+"/replies?limit=100"); len(p["items"].([]any)) != 5 {
		t.Errorf("a deleted message's replies: %v", p["items"])
	}
}

// TestNotificationsAPI: a mention and a reply notify, listed newest first
// with the unread count; marking up to an ID or all; unread=true; the
// paging refusals name their parameter.
func TestNotificationsAPI(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	root := apitest.MsgID(t, e.Post(ada, "a question"))
	postReply(e, bob, root, "an answer")
	look := e.Post(bob, "hey @ada, look")
	e.Post(ada, "talking to myself @ada")

	p := getJSON(e, ada, "/api/me/notifications")
	items := p["items"].([]any)
	if len(items) != 2 || p["unread"] != float64(2) || p["next"] != nil {
		t.Fatalf("notifications = %s", mustJSON(p))
	}
	first := items[0].(map[string]any)
	if first["kind"] != "mention" || first["read"] != false || first["actor"].(map[string]any)["handle"] != "bob" ||
		first["message"].(map[string]any)["content"] != "hey @ada, look" {
		t.Errorf("newest = %s", mustJSON(first))
	}
	if items[1].(map[string]any)["kind"] != "reply" {
		t.Errorf("second = %s", mustJSON(items[1]))
	}
	if p := getJSON(e, bob, "/api/me/notifications"); len(p["items"].([]any)) != 0 || p["unread"] != float64(0) {
		t.Errorf("bob's = %s", mustJSON(p))
	}

	read := func(body string) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/notifications/read", Token: ada, ContentType: "application/json", Body: body})
	}
	older := items[1].(map[string]any)["id"].(float64)
	if res := read(fmt.Sprintf(`{"upTo":%v}`, older)); res.Status != http.StatusNoContent {
		t.Fatalf("mark read: %d %s", res.Status, res.Body)
	}
	if p := getJSON(e, ada, "/api/me/notifications?unread=true"); len(p["items"].([]any)) != 1 || p["unread"] != float64(1) {
		t.Errorf("unread after marking the older: %s", mustJSON(p))
	}
	// A notification about a deleted message stays, with message null.
	e.Remove(bob, look["id"].(float64))
	if p := getJSON(e, ada, "/api/me/notifications"); p["items"].([]any)[0].(map[string]any)["message"] != nil {
		t.Errorf("the mention's notification after its message was deleted: %s", mustJSON(p["items"].([]any)[0]))
	}
	if res := read(`{}`); res.Status != http.StatusNoContent {
		t.Fatalf("mark all read: %d %s", res.Status, res.Body)
	}
	if p := getJSON(e, ada, "/api/me/notifications"); p["unread"] != float64(0) || p["items"].([]any)[0].(map[string]any)["read"] != true {
		t.Errorf("after marking all: %s", mustJSON(p))
	}

	for _, tc := range []struct {
		method, path, body string
		status             int
		field              string
	}{
		{http.MethodGet, "/api/me/notifications?limit=101", "", http.StatusBadRequest, "limit"},
		{http.MethodGet, "/api/me/notifications?cursor=nope", "", http.StatusBadRequest, "cursor"},
		{http.MethodGet, "/api/me/notifications?unread=yes", "", http.StatusBadRequest, "unread"},
		{http.MethodGet, "/api/me/notifications?kind=mention", "", http.StatusBadRequest, "kind"},
		{http.MethodPost, "/api/me/notifications/read", `{"upTo":0}`, http.StatusUnprocessableEntity, "upTo"},
		{http.MethodPost, "/api/me/notifications/read", `{"upTo":"x"}`, http.StatusBadRequest, "upTo"},
		{http.MethodPost, "/api/me/notifications/read", `{"all":true}`, http.StatusBadRequest, "all"},
	} {
		req := apitest.Request{Method: tc.method, Path: tc.path, Token: ada}
		if tc.body != "" {
			req.ContentType, req.Body = "application/json", tc.body
		}
		p := apitest.AssertProblem(t, e.Do(req), tc.status)
		if !slices.Contains(apitest.ViolationPaths(p), tc.field) {
			t.Errorf("%s %s %s: violations %q, want %s", tc.method, tc.path, tc.body, apitest.ViolationPaths(p), tc.field)
		}
	}
	// A cursor of the unread listing is refused by the full one.
	for range 3 {
		e.Post(bob, "@ada again")
	}
	p = getJSON(e, ada, "/api/me/notifications?unread=true&limit=1")
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me/notifications?cursor=" + p["next"].(string), Token: ada}), http.StatusBadRequest)
	for _, path := range []string{"/api/me/notifications", "/api/me/notifications/read"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "read") {
			method = http.MethodPost
		}
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: method, Path: path, ContentType: "application/json", Body: map[bool]string{true: "{}"}[method == http.MethodPost]}), http.StatusUnauthorized)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestStreamSendsNotificationsToTheirOwner: the live stream sends the
// caller's notifications whatever its filters, to the caller's streams
// only, and a stream resuming from before one gets it again.
func TestStreamSendsNotificationsToTheirOwner(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "correct horse battery")
	bob := e.Register("bob@example.com", "correct horse battery")
	carol := e.Register("carol@example.com", "correct horse battery")
	adaFiltered := openStream(e, ada, "q=nothingmatchesthis&owner=carol@example.com", "")
	bobAll := openStream(e, bob, "", "")
	carolAll := openStream(e, carol, "", "")

	e.Post(carol, "opening") // carol's: everyone unfiltered sees it
	opening := bobAll.next()
	carolAll.next()
	e.Post(bob, "hello @ada")
	var mention sseEvent
	for mention.Event != "notification" {
		mention = adaFiltered.next()
	}
	var n map[string]any
	if err := json.Unmarshal([]byte(mention.Data), &n); err != nil {
		t.Fatal(err)
	}
	if n["kind"] != "mention" || n["actor"].(map[string]any)["handle"] != "bob" || n["message"].(map[string]any)["content"] != "hello @ada" ||
		fmt.Sprint(n["id"]) != mention.ID {
		t.Errorf("the notification event = %s (id %s)", mention.Data, mention.ID)
	}
	if ev := bobAll.next(); ev.Event != "message.created" {
		t.Errorf("bob's stream got %+v", ev)
	}
	if ev := carolAll.next(); ev.Event != "message.created" {
		t.Errorf("carol's stream got %+v", ev)
	}
	bobAll.expectQuiet(100 * time.Millisecond)
	carolAll.expectQuiet(100 * time.Millisecond)
	adaFiltered.expectQuiet(100 * time.Millisecond)

	// Resumed from before it, the notification comes again.
	adaFiltered.close()
	resumed := openStream(e, ada, "q=nothingmatchesthis", opening.ID)
	got := resumed.next()
	if got.Event != "notification" || got.ID != mention.ID {
		t.Errorf("resumed stream sent %+v, want the notification %s", got, mention.ID)
	}
}
