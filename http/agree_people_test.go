package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"herald/http/internal/apitest"
	"herald/model"
)

// TestStoresAgree's operations on people: mentions in content, replies,
// the replies of a message, notifications and their read marks, profiles.

// someHandle is the handle an account of the run most likely has (the
// first one made from its e-mail), or one nobody has.
func (r *agreeRun) someHandle() string {
	if len(r.users) == 0 || r.chance(0.1) {
		return "nobody_here"
	}
	return model.HandleBase(r.users[r.pick(len(r.users))].email)
}

// mentioning is content that names a few accounts with @handle.
func (r *agreeRun) mentioning() string {
	content := r.content()
	for range 1 + r.pick(3) {
		switch r.pick(4) {
		case 0:
			content = "@" + r.someHandle() + " " + content
		case 1:
			content += " @" + r.caseVariant(r.someHandle())
		case 2:
			content += " mail@" + r.someHandle() // not a mention
		default:
			content += ", @" + r.someHandle() + "!"
		}
	}
	return content
}

// opReply answers a message (or one that is not there), as any token,
// mentioning some.
func (r *agreeRun) opReply() {
	m, raw, desc := r.messageRef()
	lt, content, format := r.anyToken(), r.mentioning(), r.format()
	res := r.exchange(fmt.Sprintf("reply %.60q to %s (%s) with %s", content, desc, format, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		id := raw
		if m >= 0 {
			id = s.msgID(m)
		}
		var ct, body string
		if format == "json" || format == "merge" {
			c, _ := json.Marshal(content)
			ct, body = "application/json", fmt.Sprintf(`{"content":%s,"replyTo":%s}`, c, jsonNumberOr(id))
		} else {
			ct, body = agreeBody(format, [][2]string{{"content", content}, {"replyTo", id}})
		}
		return apitest.Request{Method: "POST", Path: "/api/messages", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
	r.noteCreated(lt, content, res)
}

// jsonNumberOr is id as a JSON number when it is one, else as a string.
func jsonNumberOr(id string) string {
	if _, err := strconv.ParseInt(id, 10, 64); err == nil {
		return id
	}
	b, _ := json.Marshal(id)
	return string(b)
}

// opPostMentions posts content that mentions some.
func (r *agreeRun) opPostMentions() {
	r.post(r.anyToken(), r.mentioning(), r.format(), "/api/messages")
}

// opReplies lists a message's replies, a page or two.
func (r *agreeRun) opReplies() {
	m, raw, desc := r.messageRef()
	lt := r.anyToken()
	limit := []string{"", "1", "2", "100", "0", "x"}[r.pick(6)]
	params := url.Values{}
	if limit != "" {
		params.Set("limit", limit)
	}
	path := func(s *agreeServer) string { return s.msgPath(m, raw) + "/replies?" + params.Encode() }
	res := r.exchange(fmt.Sprintf("replies of %s (limit %q) with %s", desc, limit, r.tokenName(lt)), "replies", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: path(s), Token: s.token(lt, r.unknown)}
	})
	r.followNext(res, "replies", lt, path)
}

// opNotifications lists the notifications of a token's account, all or
// unread, a page or two.
func (r *agreeRun) opNotifications() {
	lt := r.anyToken()
	params := url.Values{}
	if r.chance(0.3) {
		params.Set("unread", []string{"true", "false", "yes"}[r.pick(3)])
	}
	if r.chance(0.5) {
		params.Set("limit", []string{"1", "2", "5", "101"}[r.pick(4)])
	}
	path := func(*agreeServer) string { return "/api/me/notifications?" + params.Encode() }
	res := r.exchange(fmt.Sprintf("notifications (%s) with %s", params.Encode(), r.tokenName(lt)), "notifications", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: path(s), Token: s.token(lt, r.unknown)}
	})
	r.followNext(res, "notifications", lt, path)
}

// followNext asks for the next page of a listing both servers answered
// with one.
func (r *agreeRun) followNext(res [2]*apitest.Response, kind string, lt int, path func(s *agreeServer) string) {
	if res[0].Status != http.StatusOK || res[1].Status != http.StatusOK || !r.chance(0.6) {
		return
	}
	var next [2]string
	for i := range res {
		var page struct {
			Next *string `json:"next"`
		}
		if json.Unmarshal(res[i].Body, &page) != nil || page.Next == nil {
			return
		}
		next[i] = *page.Next
	}
	r.exchange("the next page of "+kind+" with "+r.tokenName(lt), kind, func(s *agreeServer) apitest.Request {
		cursor := next[0]
		if s == r.srv[1] {
			cursor = next[1]
		}
		return apitest.Request{Method: "GET", Path: path(s) + "&cursor=" + url.QueryEscape(cursor), Token: s.token(lt, r.unknown)}
	})
}

// opMarkRead marks a token's notifications read: all, or up to an ID
// (the notification IDs are positions in the change log, alike on both).
func (r *agreeRun) opMarkRead() {
	lt := r.anyToken()
	body := []string{`{}`, `{"upTo":1}`, `{"upTo":` + strconv.Itoa(1+r.pick(200)) + `}`, `{"upTo":0}`, `{"upTo":"x"}`, ``}[r.pick(6)]
	r.exchange(fmt.Sprintf("mark notifications read %s with %s", body, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/me/notifications/read", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
	})
}

// opProfile changes a token's account's name or handle (perhaps to one
// taken, or malformed), or looks an account up by its handle.
func (r *agreeRun) opProfile() {
	lt := r.anyToken()
	if r.chance(0.4) {
		h := r.caseVariant(r.someHandle())
		r.exchange(fmt.Sprintf("profile of %q with %s", h, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
			return apitest.Request{Method: "GET", Path: "/api/users/" + url.PathEscape(h), Token: s.token(lt, r.unknown)}
		})
		return
	}
	body := []string{
		`{"name":"` + r.word() + `"}`,
		`{"handle":"` + r.someHandle() + `"}`,
		`{"handle":"h` + strconv.Itoa(r.pick(1000)) + `","name":"  Ada  "}`,
		`{"handle":"9bad"}`,
		`{"name":""}`,
	}[r.pick(5)]
	r.exchange(fmt.Sprintf("PATCH /api/me %s with %s", body, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "PATCH", Path: "/api/me", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
	})
}
