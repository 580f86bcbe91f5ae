package http_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"herald/http/internal/apitest"
)

// TestStoresAgree's live streams: a stream resumed after an event, with a
// filter sometimes, and the first events each server sends.

// opStream opens a live stream resuming after an event, with a filter
// sometimes, on both servers, and compares the first events each sends
// from its change log. The stream is otherwise left out: only what a
// resume replays is compared, not live delivery.
func (r *agreeRun) opStream() {
	// A token of its own, logged out once the streams are closed: a
	// stream checks its token again in the background, on the server's
	// own timer, which notes a use at whatever the shared clock says by
	// then; the two servers' timers would note different times, and the
	// token's lastUsedAt and its account's lastSeenAt differ for no fault
	// of either store. Once logged out, the token notes nothing more.
	lt := []int{tokNone, tokMalformed, tokUnknown}[r.pick(3)]
	if users := r.liveUsers(); len(users) > 0 && r.chance(0.9) {
		u := users[r.pick(len(users))]
		var ok bool
		if lt, ok = r.login(u, r.users[u].email, r.users[u].password, "json"); !ok {
			return
		}
		defer r.exchange("logout with the stream's token "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
			r.tokens[lt].dead = true
			return apitest.Request{Method: "POST", Path: "/api/logout", Token: s.token(lt, r.unknown)}
		})
	}
	last := "0"
	switch n := r.pick(10); {
	case n < 5 && len(r.events) > 0:
		last = r.events[r.pick(len(r.events))]
	case n < 8:
		last = strconv.Itoa(r.pick(r.step + 1))
	case n < 9:
		last = []string{"x", "-1", "99999999", "18446744073709551615"}[r.pick(4)]
	}
	query := ""
	switch r.pick(4) {
	case 0:
		query = "q=" + url.QueryEscape(r.caseVariant(r.word()))
	case 1:
		if len(r.users) > 0 {
			query = "owner=" + url.QueryEscape(r.caseVariant(r.users[r.pick(len(r.users))].email))
		}
	}
	r.step++
	desc := fmt.Sprintf("stream %s after event %s with %s", query, last, r.tokenName(lt))
	var got [2][]string
	for i, s := range r.srv {
		res, st := tryStream(s.e, s.token(lt, r.unknown), query, last)
		if res != nil {
			n := s.normalise("", res)
			got[i] = append(got[i], fmt.Sprintf("refused: %d %v %s", n.status, n.header, n.body))
			continue
		}
		// A resumed stream sends what its log holds at once, in one write:
		// bbolt's events are read until a short quiet, PostgreSQL's as
		// many as bbolt sent, each waited for longer, then one more
		// looked for briefly.
		for k := range 4 {
			wait := 150 * time.Millisecond
			switch {
			case i == 0 && k == 0:
				wait = 400 * time.Millisecond
			case i == 1 && k < len(got[0]):
				wait = 2 * time.Second
			}
			ev, ok := st.tryNext(wait)
			if !ok {
				break
			}
			data := ev.Data
			var v any
			dec := json.NewDecoder(strings.NewReader(data))
			dec.UseNumber()
			if dec.Decode(&v) == nil {
				b, _ := json.Marshal(s.walk("", "", v))
				data = string(b)
			}
			got[i] = append(got[i], fmt.Sprintf("id=%s event=%s data=%s", ev.ID, ev.Event, data))
			if i == 0 && ev.ID != "" {
				r.events = append(r.events, ev.ID)
			}
		}
		st.close()
	}
	if r.trace {
		r.t.Logf("step %d: %s -> %d %d events", r.step, desc, len(got[0]), len(got[1]))
	}
	if !slices.Equal(got[0], got[1]) && r.reports < agreeMaxReports {
		r.reports++
		r.t.Errorf("seed %d step %d: the stores disagree on %s\n  bbolt:    %q\n  postgres: %q", r.c.seed, r.step, desc, got[0], got[1])
	}
}
