package http_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"herald/http/internal/apitest"
)

// TestStoresAgree's searches: queries, time bounds and owners, and the
// pages after the first, followed by their cursors.

// timeParam is a bound for since or until: near a message's creation
// time, or far off, in one of the spellings RFC 3339 allows.
func (r *agreeRun) timeParam() string {
	var at time.Time
	switch n := r.pick(100); {
	case n < 70 && len(r.times) > 0:
		at = r.times[r.pick(len(r.times))]
		at = at.Add([]time.Duration{0, 0, time.Microsecond, -time.Microsecond, time.Nanosecond, -time.Nanosecond, time.Second, -time.Second}[r.pick(8)])
	case n < 80:
		at = r.clock.Now()
	case n < 85:
		return "0001-01-01T00:00:00Z"
	case n < 88:
		return "9999-12-31T23:59:59.999999999Z"
	case n < 90:
		return "yesterday"
	default:
		at = r.clock.Now().Add(-time.Duration(r.rng.Int64N(int64(48 * time.Hour))))
	}
	switch r.pick(5) {
	case 0:
		return at.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano)
	case 2:
		return at.Format(time.RFC3339)
	case 3:
		// The lower-case 't' and 'z' RFC 3339 allows.
		return strings.ToLower(at.Format(time.RFC3339Nano))
	}
	return at.Format(time.RFC3339Nano)
}

func (r *agreeRun) query() string {
	switch n := r.pick(100); {
	case n < 55:
		return r.caseVariant(r.word())
	case n < 75:
		return r.caseVariant(r.word()) + agreeSeps[r.pick(len(agreeSeps))] + r.caseVariant(r.word())
	case n < 80:
		return "nomatchatall"
	case n < 84:
		return []string{"!!!", "...", " - ", "😀"}[r.pick(4)]
	case n < 86:
		var ws []string
		for i := range 17 {
			ws = append(ws, fmt.Sprintf("w%d", i))
		}
		return strings.Join(ws, " ")
	case n < 88:
		return strings.Repeat("a ", 513)
	case n < 92:
		return "hello world fox dog"
	default:
		return r.word() + " " + r.word() + " " + r.word()
	}
}

func (r *agreeRun) opSearch() {
	lt := r.anyToken()
	if r.search != nil && r.chance(0.45) {
		// The next page of the last search, or its cursor with other
		// filters.
		r.afterSearch(r.nextPage("search", r.search, "/api/messages", "hello", "", lt, func(s *agreeServer) string { return s.searchNext }))
		return
	}
	params := url.Values{}
	if r.chance(0.6) {
		params.Set("q", r.query())
	}
	if r.chance(0.25) && len(r.users) > 0 {
		owner := r.caseVariant(r.users[r.pick(len(r.users))].email)
		switch r.pick(12) {
		case 0:
			owner = "nobody@example.com"
		case 1:
			owner = "   "
		case 2:
			owner = []string{"\x00", "root@example.com\x00", "root%"}[r.pick(3)]
		}
		params.Set("owner", owner)
	}
	if r.chance(0.2) {
		params.Set("since", r.timeParam())
	}
	if r.chance(0.2) {
		params.Set("until", r.timeParam())
	}
	switch n := r.pick(100); {
	case n < 60:
		params.Set("limit", strconv.Itoa(1+r.pick(5)))
	case n < 64:
		params.Set("limit", []string{"0", "101", "x", "100", "-1"}[r.pick(5)])
	}
	raw := params.Encode()
	switch n := r.pick(100); {
	case n < 2:
		raw += "&cursor=AgAAAAAAAAAFAAAAAAAAAAA"
	case n < 4:
		raw += "&cursor=garbage"
	case n < 5:
		raw += "&foo=1"
	case n < 6:
		raw += "&limit=2&limit=3"
	case n < 7:
		raw += "&q=%ff"
	}
	res := r.exchange(fmt.Sprintf("search %s with %s", raw, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: "/api/messages?" + raw, Token: s.token(lt, r.unknown)}
	})
	if p, err := url.ParseQuery(raw); err == nil {
		r.afterSearch(res, p)
	}
}

func (r *agreeRun) afterSearch(res [2]*apitest.Response, params url.Values) {
	r.search = r.follow(res, params, func(s *agreeServer) *string { return &s.searchNext })
}

// nextPage asks each server for the next page of q at path with its own
// cursor (cursor), its ID sometimes made another; with otherQ (when not
// "") as q now and then, to see a cursor refused for other filters. It
// returns the answers, compared as kind says (exchange), and the
// parameters asked with.
func (r *agreeRun) nextPage(what string, q *agreeQuery, path, otherQ, kind string, lt int, cursor func(*agreeServer) string) ([2]*apitest.Response, url.Values) {
	params := maps.Clone(q.params)
	desc := what + ", next page"
	if otherQ != "" && r.chance(0.1) {
		params.Set("q", otherQ)
		desc += " with another q"
	}
	tamper := r.tamper()
	if tamper != 0 {
		desc += fmt.Sprintf(" with its cursor's ID made %d", tamper)
	}
	res := r.exchange(fmt.Sprintf("%s of %s with %s", desc, q.params.Encode(), r.tokenName(lt)), kind, func(s *agreeServer) apitest.Request {
		p := maps.Clone(params)
		p.Set("cursor", agreeTamper(cursor(s), tamper))
		return apitest.Request{Method: "GET", Path: path + "?" + p.Encode(), Token: s.token(lt, r.unknown)}
	})
	return res, params
}

// follow is the query whose next page a later step may ask for, nil when
// bbolt's page was the last; each server's own cursor goes where next
// says.
func (r *agreeRun) follow(res [2]*apitest.Response, params url.Values, next func(s *agreeServer) *string) *agreeQuery {
	if pageNext(res[0]) == "" {
		return nil
	}
	params = maps.Clone(params)
	params.Del("cursor")
	for i, s := range r.srv {
		*next(s) = pageNext(res[i])
	}
	return &agreeQuery{params: params}
}

// pageNext is a page's next cursor, or "" when it has none.
func pageNext(res *apitest.Response) string {
	var page struct {
		Next *string `json:"next"`
	}
	if res.Status != http.StatusOK || json.Unmarshal(res.Body, &page) != nil || page.Next == nil {
		return ""
	}
	return *page.Next
}
