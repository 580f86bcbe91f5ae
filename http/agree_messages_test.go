package http_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"herald/http/internal/apitest"
	"herald/model"
)

// TestStoresAgree's operations on messages: the words they are made of,
// creates (with an Idempotency-Key or not, well-formed or not), reads,
// edits and deletions with their preconditions, and creates in bulk.

// The words messages and searches are made of: common and rare ones,
// letter cases, normalisation forms and scripts where folding is subtle.
var agreeWords = []string{
	"herald", "hello", "world", "message", "the", "quick", "brown", "fox", "lazy", "dog",
	"Straße", "STRASSE", "strasse", "ΣΑΣ", "σας", "σασ", "café", "cafe\u0301", "CAFÉ", "naïve",
	"İstanbul", "istanbul", "\u212Aelvin", "kelvin", "ﬁle", "file", "日本語", "2026", "x1", "zyzzyva",
	"Ünïcödé", "ǅemal", "ǆemal", "ΣΊΣΥΦΟΣ", "σίσυφος", "a\u0308", "ä", "x\u200by", "don't", "e-mail",
	"١٢٣", "ＦＵＬＬ", "full", "🙂", "straße", "MASSE", "maße",
	// Longer than the 64 bytes an index key keeps of a word, two of them
	// alike in their first 64.
	strings.Repeat("long", 16) + "worda", strings.Repeat("long", 16) + "wordb", strings.Repeat("Ω", 40),
}

var agreeSeps = []string{" ", " ", " ", " ", ", ", "-", "'", "! ", "\n", "\t", "...", "/", "_", ". "}

func (r *agreeRun) word() string {
	// Common words more often, so searches find several pages.
	if r.chance(0.4) {
		return agreeWords[r.pick(6)]
	}
	return agreeWords[r.pick(len(agreeWords))]
}

func (r *agreeRun) content() string {
	switch n := r.pick(100); {
	case n < 3:
		return strings.Repeat("é", model.MaxContentChars) // at the limit, in code points
	case n < 5:
		return "  " + r.word() + "  "
	case n < 7:
		return r.word() + "\x00" + r.word()
	}
	var b strings.Builder
	for i := range 1 + r.pick(8) {
		if i > 0 {
			b.WriteString(agreeSeps[r.pick(len(agreeSeps))])
		}
		b.WriteString(r.word())
	}
	return b.String()
}

func (r *agreeRun) opPost() {
	path := "/api/messages"
	if r.chance(0.2) {
		path = "/api/message"
	}
	r.post(r.anyToken(), r.content(), r.format(), path)
}

// opPostKeyed sends its last create again (a retry, in another body
// format), or creates with one of a few Idempotency-Keys, mostly with the
// content the key first came with (a retry when the account made it),
// else with new content (a 422 when it did).
func (r *agreeRun) opPostKeyed() {
	if r.retry != nil && r.chance(0.5) {
		r.retry()
		return
	}
	k := r.pick(len(r.keyed))
	if r.keyed[k] == "" || r.chance(0.2) {
		r.keyed[k] = r.content()
	}
	lt, content, key := r.anyToken(), r.keyed[k], fmt.Sprintf(`"agree-%d"`, k)
	r.retry = func() { r.postWith(lt, content, r.format(), "/api/message", key) }
	r.postWith(lt, content, r.format(), "/api/messages", key)
}

func (r *agreeRun) post(lt int, content, format, path string) {
	r.postWith(lt, content, format, path, "")
}

// postWith is post with the Idempotency-Key key ("" for none).
func (r *agreeRun) postWith(lt int, content, format, path, key string) {
	ct, body := agreeBody(format, [][2]string{{"content", content}})
	desc := fmt.Sprintf("post %.60q (%s, %s) with %s", content, format, path, r.tokenName(lt))
	if key != "" {
		desc += " and key " + key
	}
	res := r.exchange(desc, "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: path, Token: s.token(lt, r.unknown), ContentType: ct, Body: body, Header: withKey(key)}
	})
	if key != "" && slices.Contains(slices.Collect(maps.Values(r.srv[0].msgs)), agreeAnswerID(res[0])) {
		return // the first answer again: no message made
	}
	r.noteCreated(lt, content, res)
}

// noteCreated binds the message a create made, when it made one.
func (r *agreeRun) noteCreated(lt int, content string, res [2]*apitest.Response) {
	if res[0].Status != http.StatusCreated || lt < 0 {
		return
	}
	m := len(r.msgs)
	r.msgs = append(r.msgs, &agreeMsg{owner: r.tokens[lt].user, content: content})
	for i, s := range r.srv {
		if res[i].Status != http.StatusCreated {
			continue
		}
		var msg struct {
			ID        uint64 `json:"id"`
			CreatedAt string `json:"createdAt"`
		}
		if err := json.Unmarshal(res[i].Body, &msg); err != nil {
			continue
		}
		s.msgs[m] = msg.ID
		s.etags[m] = append(s.etags[m], res[i].Header.Get("ETag"))
		if i == 0 {
			if at, err := time.Parse(time.RFC3339Nano, msg.CreatedAt); err == nil {
				r.times = append(r.times, at)
			}
		}
	}
}

// agreeAnswerID is the ID of the message in a create's answer; 0 when
// there is none.
func agreeAnswerID(res *apitest.Response) uint64 {
	var msg struct {
		ID uint64 `json:"id"`
	}
	_ = json.Unmarshal(res.Body, &msg)
	return msg.ID
}

func (r *agreeRun) opPostBad() {
	lt := r.anyToken()
	var desc, ct, body string
	switch r.pick(11) {
	case 0:
		desc, ct, body = "post empty content", "application/json", `{"content":""}`
	case 1:
		desc, ct, body = "post blank content", "application/json", `{"content":" \t\n "}`
	case 2:
		desc, ct, body = "post content one over the limit", "application/json", fmt.Sprintf(`{"content":%q}`, strings.Repeat("é", model.MaxContentChars+1))
	case 3:
		desc, ct, body = "post bad JSON", "application/json", `{"content":"x"`
	case 4:
		desc, ct, body = "post with an unknown field", "application/json", `{"content":"x","title":"y"}`
	case 5:
		desc, ct, body = "post with a read-only owner", "application/json", `{"content":"x","user":{"email":"root@example.com"}}`
	case 6:
		desc, ct, body = "post a number", "application/json", `{"content":5}`
	case 7:
		desc, ct, body = "post as text/plain", "text/plain", "hello"
	case 8:
		desc, ct, body = "post without content", "application/json", `{}`
	case 9:
		desc, ct, body = "post null content", "application/json", `{"content":null}`
	default:
		desc, ct, body = "post a body over 64 KiB", "application/json", fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", 70000))
	}
	res := r.exchange(desc+" with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/messages", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
	if res[0].Status == http.StatusCreated {
		r.t.Errorf("seed %d step %d: %s was accepted: %s", r.c.seed, r.step, desc, res[0].Body)
	}
}

// message picks a logical message: mostly one that exists, sometimes a
// deleted one. -1 when there is none.
func (r *agreeRun) message() int {
	if len(r.msgs) == 0 {
		return -1
	}
	var alive []int
	for i, m := range r.msgs {
		if !m.gone {
			alive = append(alive, i)
		}
	}
	if len(alive) > 0 && r.chance(0.85) {
		return alive[r.pick(len(alive))]
	}
	return r.pick(len(r.msgs))
}

// messageRef is a message path segment: a logical message's ID on each
// server, or a raw segment naming none.
func (r *agreeRun) messageRef() (m int, raw, desc string) {
	m = r.message()
	if m < 0 || r.chance(0.08) {
		raw = []string{"999999", "0", "-1", "abc", "1.5", "18446744073709551616", "%20", "00001"}[r.pick(8)]
		return -1, raw, "message " + strconv.Quote(raw)
	}
	state := "alive"
	if r.msgs[m].gone {
		state = "deleted"
	}
	return m, "", fmt.Sprintf("m%d (%s, of u%d)", m, state, r.msgs[m].owner)
}

func (s *agreeServer) msgPath(m int, raw string) string {
	if m < 0 {
		return "/api/messages/" + raw
	}
	return "/api/messages/" + s.msgID(m)
}

// ifMatch chooses an If-Match for message m: none, its current tag, a
// stale one, a wildcard, a weak tag or a list. back is how many tags back.
func (r *agreeRun) ifMatch() (kind string, back int) {
	switch n := r.pick(100); {
	case n < 40:
		return "", 0
	case n < 70:
		return "current", 0
	case n < 85:
		return "stale", 1 + r.pick(2)
	case n < 90:
		return "*", 0
	case n < 95:
		return "weak", 0
	default:
		return "list", 0
	}
}

func (s *agreeServer) ifMatchHeader(kind string, m, back int) http.Header {
	var v string
	switch kind {
	case "":
		return nil
	case "current":
		v = s.etag(m, 0)
	case "stale":
		v = s.etag(m, back)
		if back > 0 && len(s.etags[m]) <= back {
			v = `"1-999"`
		}
	case "*":
		v = "*"
	case "weak":
		v = "W/" + s.etag(m, 0)
	case "list":
		v = `"nope", ` + s.etag(m, 0)
	}
	return http.Header{"If-Match": {v}}
}

func (r *agreeRun) opGet() {
	m, raw, desc := r.messageRef()
	lt := r.anyToken()
	inm := ""
	method := "GET"
	switch n := r.pick(10); {
	case n < 2 && m >= 0:
		inm = "current"
	case n < 3:
		inm = "*"
	}
	r.exchange(fmt.Sprintf("%s %s with %s (If-None-Match: %s)", method, desc, r.tokenName(lt), inm), "", func(s *agreeServer) apitest.Request {
		req := apitest.Request{Method: method, Path: s.msgPath(m, raw), Token: s.token(lt, r.unknown)}
		switch inm {
		case "current":
			req.Header = http.Header{"If-None-Match": {s.etag(m, 0)}}
		case "*":
			req.Header = http.Header{"If-None-Match": {"*"}}
		}
		return req
	})
}

// writer picks who writes to message m: in a hundred draws, its owner in
// the first owner (when m exists), another account in the next fifteen,
// then an administrator, then any token at all.
func (r *agreeRun) writer(m, owner int) int {
	switch n := r.pick(100); {
	case n < owner && m >= 0:
		return r.tokenOf(r.msgs[m].owner)
	case n < owner+15:
		return r.tokenOf(-1)
	case n < 90:
		return r.adminToken()
	default:
		return r.anyToken()
	}
}

// write is a PATCH or DELETE of message m (or the raw path's) with lt's
// token and the If-Match chosen.
func (s *agreeServer) write(method string, m int, raw string, lt int, unknown, im string, back int) apitest.Request {
	req := apitest.Request{Method: method, Path: s.msgPath(m, raw), Token: s.token(lt, unknown)}
	if m >= 0 {
		req.Header = s.ifMatchHeader(im, m, back)
	}
	return req
}

func (r *agreeRun) opPatch() {
	m, raw, desc := r.messageRef()
	lt := r.writer(m, 65)
	im, back := r.ifMatch()
	content := r.content()
	if m >= 0 && r.chance(0.15) {
		content = r.msgs[m].content // no change
	}
	format := []string{"json", "json", "merge", "merge", "form", "multipart"}[r.pick(6)]
	fields := [][2]string{{"content", content}}
	var ct, body string
	switch n := r.pick(100); {
	case n < 5:
		ct, body = "application/merge-patch+json", `{}`
	case n < 9:
		ct, body = "application/merge-patch+json", `{"content":null}`
	case n < 13:
		ct, body = "application/json", `{"content":""}`
	case n < 16:
		ct, body = "application/json", `{"content":"x","id":5}`
	case n < 18:
		ct, body = "text/plain", "x"
	default:
		ct, body = agreeBody(format, fields)
	}
	res := r.exchange(fmt.Sprintf("PATCH %s with %s, If-Match %s %d, %s %.60q", desc, r.tokenName(lt), im, back, ct, body), "", func(s *agreeServer) apitest.Request {
		req := s.write("PATCH", m, raw, lt, r.unknown, im, back)
		req.ContentType, req.Body = ct, body
		return req
	})
	if m < 0 || res[0].Status != http.StatusOK {
		return
	}
	if strings.Contains(body, "content") && !strings.Contains(body, "null") {
		r.msgs[m].content = content
	}
	for i, s := range r.srv {
		if res[i].Status == http.StatusOK {
			if tag := res[i].Header.Get("ETag"); tag != s.etag(m, 0) {
				s.etags[m] = append(s.etags[m], tag)
			}
		}
	}
}

func (r *agreeRun) opDelete() {
	m, raw, desc := r.messageRef()
	lt := r.writer(m, 60)
	im, back := r.ifMatch()
	res := r.exchange(fmt.Sprintf("DELETE %s with %s, If-Match %s %d", desc, r.tokenName(lt), im, back), "", func(s *agreeServer) apitest.Request {
		return s.write("DELETE", m, raw, lt, r.unknown, im, back)
	})
	if m >= 0 && res[0].Status == http.StatusNoContent {
		r.msgs[m].gone = true
	}
}

// opBulkPost posts several messages of one account in a row, so searches
// have pages to go through.
func (r *agreeRun) opBulkPost() {
	lt := r.tokenOf(-1)
	for range 3 + r.pick(12) {
		if r.chance(0.3) {
			r.clock.Advance(time.Duration(r.rng.Int64N(int64(time.Millisecond))))
		}
		r.post(lt, r.content(), "json", "/api/messages")
	}
}
