package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// pageIDs lists a page's message IDs in the order returned.
func pageIDs(p *model.SearchPage) []uint64 {
	ids := make([]uint64, 0, len(p.Messages))
	for _, m := range p.Messages {
		ids = append(ids, m.ID)
	}
	return ids
}

// mustSearch runs q and fails the test on error.
func mustSearch(tb testing.TB, db *testDB, q model.SearchQuery) *model.SearchPage {
	tb.Helper()
	_, p, err := db.SearchMessages(context.Background(), model.ByServer(), q)
	if err != nil {
		tb.Fatalf("SearchMessages(%+v) = %v", q, err)
	}
	return p
}

// descending reports whether ids are strictly decreasing.
func descending(ids []uint64) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] >= ids[i-1] {
			return false
		}
	}
	return true
}

// idsOf returns the IDs of msgs (in the given order) reversed, i.e. newest
// first for messages created in order.
func idsOf(msgs ...*model.Message) []uint64 {
	ids := make([]uint64, 0, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		ids = append(ids, msgs[i].ID)
	}
	return ids
}

func TestSearchMessages(t *testing.T) {
	t.Run("Empty", func(t *testing.T) {
		db := mustOpen(t)
		p := mustSearch(t, db, model.SearchQuery{})
		if got, want := len(p.Messages), 0; got != want {
			t.Errorf("len(Messages) = %d, want %d", got, want)
		}
		if got, want := p.NextBeforeID, uint64(0); got != want {
			t.Errorf("NextBeforeID = %d, want %d", got, want)
		}
	})

	t.Run("NewestFirst", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "Ada@Example.com")
		bob, _ := mustCreateUser(t, db, "bob@example.com")
		var msgs []*model.Message
		for i := range 5 {
			owner := ada
			if i%2 == 1 {
				owner = bob
			}
			db.Clock.Add(time.Second)
			msgs = append(msgs, mustCreateMessage(t, db, owner.ID, fmt.Sprint("message ", i)))
		}
		p := mustSearch(t, db, model.SearchQuery{})
		if got, want := pageIDs(p), idsOf(msgs...); !slices.Equal(got, want) {
			t.Errorf("SearchMessages({}) = %v, want %v", got, want)
		}
		if got, want := p.NextBeforeID, uint64(0); got != want {
			t.Errorf("NextBeforeID = %d, want %d", got, want)
		}
		// Every item is complete, owner e-mail joined.
		for i, got := range p.Messages {
			want := msgs[len(msgs)-1-i]
			if g, w := messageString(got), messageString(want); g != w {
				t.Errorf("item %d = %s, want %s", i, g, w)
			}
		}
	})

	t.Run("Terms", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		contents := []string{
			"Hello world",                 // 0
			"helloworld",                  // 1
			"HELLO, World!",               // 2
			"Ünïcödé text",                // 3
			"ünïcödé",                     // 4
			"私は 日本語、テキスト",                 // 5: ideographic comma separates
			"日本語テキスト",                     // 6: one word, no separator
			"foo-bar baz_qux",             // 7
			"mail ada@example.com now",    // 8
			"version 2 of x2",             // 9
			"say \"hello\"—then (world)",  // 10: quotes, em dash, parentheses
			"ÑANDÚ straße",                // 11
			"hello\u00a0world\u3000again", // 12: unicode spaces separate
		}
		var msgs []*model.Message
		for _, c := range contents {
			msgs = append(msgs, mustCreateMessage(t, db, ada.ID, c))
		}
		pick := func(idx ...int) []uint64 {
			var sel []*model.Message
			for _, i := range idx {
				sel = append(sel, msgs[i])
			}
			return idsOf(sel...)
		}
		all := make([]int, len(msgs))
		for i := range all {
			all[i] = i
		}
		tests := []struct {
			q    string
			want []uint64
		}{
			{"", pick(all...)},
			{"...!?", pick(all...)},
			{"hello", pick(0, 2, 10, 12)},
			{"HELLO", pick(0, 2, 10, 12)},
			{"Hello!", pick(0, 2, 10, 12)},
			{"helloworld", pick(1)},
			{"hell", nil},
			{"hello world", pick(0, 2, 10, 12)},
			{"world hello", pick(0, 2, 10, 12)},
			{"hello hello HELLO", pick(0, 2, 10, 12)},
			{"hello again", pick(12)},
			{"hello ünïcödé", nil},
			{"Ünïcödé", pick(3, 4)},
			{"ÜNÏCÖDÉ", pick(3, 4)},
			{"ünïcödé text", pick(3)},
			{"unicode", nil},
			{"日本語", pick(5)},
			{"テキスト", pick(5)},
			{"日本語テキスト", pick(6)},
			{"foo", pick(7)},
			{"bar", pick(7)},
			{"baz", pick(7)},
			{"qux", pick(7)},
			{"foo-bar", pick(7)},
			{"baz_qux", pick(7)},
			{"foobar", nil},
			{"example", pick(8)},
			{"ada@example.com", pick(8)},
			{"EXAMPLE.COM", pick(8)},
			{"2", pick(9)},
			{"x2", pick(9)},
			{"x", nil},
			{"then", pick(10)},
			{"ñandú", pick(11)},
			{"STRASSE", nil},
			{"Straße", pick(11)},
			{"nothing matches this", nil},
		}
		for _, tt := range tests {
			p := mustSearch(t, db, model.SearchQuery{Terms: model.Terms(tt.q), Limit: model.MaxSearchLimit})
			if got := pageIDs(p); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("SearchMessages(q=%q) = %v, want %v", tt.q, got, tt.want)
			}
		}
	})

	t.Run("Owner", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "Ada@Example.com")
		bob, _ := mustCreateUser(t, db, "bob@example.com")
		uni, _ := mustCreateUser(t, db, "Ünïcödé@Example.com")
		mustCreateUser(t, db, "silent@example.com")
		var adas, bobs []*model.Message
		for i := range 4 {
			adas = append(adas, mustCreateMessage(t, db, ada.ID, fmt.Sprint("ada hello ", i)))
			bobs = append(bobs, mustCreateMessage(t, db, bob.ID, fmt.Sprint("bob hello ", i)))
		}
		unis := []*model.Message{mustCreateMessage(t, db, uni.ID, "unicode owner")}
		tests := []struct {
			owner string
			terms string
			want  []uint64
		}{
			{"Ada@Example.com", "", idsOf(adas...)},
			{"ada@example.com", "", idsOf(adas...)},
			{"ADA@EXAMPLE.COM", "", idsOf(adas...)},
			{"  ada@example.com\t", "", idsOf(adas...)},
			{"BOB@example.com", "", idsOf(bobs...)},
			{"ünïcödé@example.com", "", idsOf(unis...)},
			{"ada@example.com", "hello 2", idsOf(adas[2])},
			{"bob@example.com", "ada", nil},
			{"silent@example.com", "", nil},
			{"nobody@example.com", "", nil},
			{"ada", "", nil},
			{"   ", "", nil},
		}
		for _, tt := range tests {
			p := mustSearch(t, db, model.SearchQuery{OwnerEmail: tt.owner, Terms: model.Terms(tt.terms)})
			if got := pageIDs(p); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("SearchMessages(owner=%q, q=%q) = %v, want %v", tt.owner, tt.terms, got, tt.want)
			}
			if got, want := p.NextBeforeID, uint64(0); got != want {
				t.Errorf("SearchMessages(owner=%q) NextBeforeID = %d, want %d", tt.owner, got, want)
			}
		}
		// Owner filter pages like the unfiltered one.
		p := mustSearch(t, db, model.SearchQuery{OwnerEmail: "ADA@example.com", Limit: 3})
		if got, want := pageIDs(p), idsOf(adas[1:]...); !slices.Equal(got, want) {
			t.Errorf("owner page 1 = %v, want %v", got, want)
		}
		if got, want := p.NextBeforeID, adas[1].ID; got != want {
			t.Errorf("owner page 1 NextBeforeID = %d, want %d", got, want)
		}
		p = mustSearch(t, db, model.SearchQuery{OwnerEmail: "ADA@example.com", Limit: 3, BeforeID: p.NextBeforeID})
		if got, want := pageIDs(p), idsOf(adas[0]); !slices.Equal(got, want) {
			t.Errorf("owner page 2 = %v, want %v", got, want)
		}
		if got, want := p.NextBeforeID, uint64(0); got != want {
			t.Errorf("owner page 2 NextBeforeID = %d, want %d", got, want)
		}
	})

	t.Run("TimeRange", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		var msgs []*model.Message
		for i := range 5 {
			db.Clock.Add(time.Second)
			msgs = append(msgs, mustCreateMessage(t, db, ada.ID, fmt.Sprint("tick ", i)))
		}
		at := func(i int) time.Time { return msgs[i].CreatedAt }
		zone := time.FixedZone("UTC-7", -7*3600)
		year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) // the zero time.Time: still a real bound
		far := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
		tests := []struct {
			name         string
			since, until *time.Time
			want         []uint64
		}{
			{"None", nil, nil, idsOf(msgs...)},
			{"SinceInclusive", ptr(at(2)), nil, idsOf(msgs[2:]...)},
			{"SinceOtherZone", ptr(at(2).In(zone)), nil, idsOf(msgs[2:]...)},
			{"SinceJustAfter", ptr(at(2).Add(time.Nanosecond)), nil, idsOf(msgs[3:]...)},
			{"SinceJustBefore", ptr(at(2).Add(-time.Microsecond)), nil, idsOf(msgs[2:]...)},
			{"UntilExclusive", nil, ptr(at(2)), idsOf(msgs[:2]...)},
			{"UntilOtherZone", nil, ptr(at(2).In(zone)), idsOf(msgs[:2]...)},
			{"UntilJustAfter", nil, ptr(at(2).Add(time.Nanosecond)), idsOf(msgs[:3]...)},
			{"Both", ptr(at(1)), ptr(at(4)), idsOf(msgs[1:4]...)},
			{"SameInstant", ptr(at(1)), ptr(at(1)), nil},
			{"Reversed", ptr(at(4)), ptr(at(1)), nil},
			{"AllBefore", nil, ptr(at(0)), nil},
			{"AllAfter", ptr(at(4).Add(time.Microsecond)), nil, nil},
			{"UntilYear1", nil, ptr(year1), nil},
			{"SinceYear1", ptr(year1), nil, idsOf(msgs...)},
			{"UntilBefore1970", nil, ptr(time.Unix(-1, 0)), nil},
			{"SinceYear9999", ptr(far), nil, nil},
			{"UntilYear9999", nil, ptr(far), idsOf(msgs...)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := mustSearch(t, db, model.SearchQuery{Since: tt.since, Until: tt.until})
				if got := pageIDs(p); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
					t.Errorf("SearchMessages(since %v, until %v) = %v, want %v", tt.since, tt.until, got, tt.want)
				}
			})
		}
		// Time bounds page correctly: one match per page.
		var got []uint64
		q := model.SearchQuery{Since: ptr(at(1)), Until: ptr(at(4)), Limit: 1}
		for range 10 {
			p := mustSearch(t, db, q)
			got = append(got, pageIDs(p)...)
			if p.NextBeforeID == 0 {
				break
			}
			q.BeforeID = p.NextBeforeID
		}
		if want := idsOf(msgs[1:4]...); !slices.Equal(got, want) {
			t.Errorf("paged time range = %v, want %v", got, want)
		}
	})

	t.Run("Limit", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		var msgs []*model.Message
		withoutSync(t, db, func() {
			for i := range model.MaxSearchLimit + 5 {
				msgs = append(msgs, mustCreateMessage(t, db, ada.ID, fmt.Sprint("message ", i)))
			}
		})
		newest := idsOf(msgs...)
		tests := []struct {
			name      string
			limit     int
			wantN     int
			wantAfter bool // a next page exists
		}{
			{"Zero", 0, model.DefaultSearchLimit, true},
			{"Negative", -1, model.DefaultSearchLimit, true},
			{"One", 1, 1, true},
			{"Three", 3, 3, true},
			{"Max", model.MaxSearchLimit, model.MaxSearchLimit, true},
			{"AboveMax", model.MaxSearchLimit + 1, model.MaxSearchLimit, true},
			{"Huge", 1 << 30, model.MaxSearchLimit, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := mustSearch(t, db, model.SearchQuery{Limit: tt.limit})
				if got, want := pageIDs(p), newest[:tt.wantN]; !slices.Equal(got, want) {
					t.Errorf("SearchMessages(limit %d) = %d items %v…, want %d items", tt.limit, len(got), got[:min(3, len(got))], len(want))
				}
				if got, want := p.NextBeforeID, newest[tt.wantN-1]; got != want {
					t.Errorf("NextBeforeID = %d, want %d (last ID on the page)", got, want)
				}
			})
		}

		// A page that exactly exhausts the matches has no next page.
		t.Run("ExactlyLimitMatches", func(t *testing.T) {
			p := mustSearch(t, db, model.SearchQuery{Terms: model.Terms("message 7"), Limit: 1})
			if got, want := pageIDs(p), []uint64{msgs[7].ID}; !slices.Equal(got, want) {
				t.Errorf("SearchMessages = %v, want %v", got, want)
			}
			if got, want := p.NextBeforeID, uint64(0); got != want {
				t.Errorf("NextBeforeID = %d, want %d", got, want)
			}
			last := mustSearch(t, db, model.SearchQuery{BeforeID: newest[len(newest)-3], Limit: 2})
			if got, want := pageIDs(last), newest[len(newest)-2:]; !slices.Equal(got, want) {
				t.Errorf("last page = %v, want %v", got, want)
			}
			if got, want := last.NextBeforeID, uint64(0); got != want {
				t.Errorf("last page NextBeforeID = %d, want %d", got, want)
			}
		})
	})

	t.Run("BeforeID", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		var msgs []*model.Message
		for i := range 6 {
			msgs = append(msgs, mustCreateMessage(t, db, ada.ID, fmt.Sprint("m ", i)))
		}
		// Delete one in the middle and the oldest: cursors may name them.
		for _, i := range []int{0, 3} {
			if _, err := db.DeleteMessage(context.Background(), msgs[i].ID, model.ByUser(ada.ID), nil); err != nil {
				t.Fatal(err)
			}
		}
		live := []*model.Message{msgs[1], msgs[2], msgs[4], msgs[5]}
		tests := []struct {
			name   string
			before uint64
			owner  string
			want   []uint64
		}{
			{"Zero", 0, "", idsOf(live...)},
			{"Newest", msgs[5].ID, "", idsOf(live[:3]...)},
			{"AboveAll", msgs[5].ID + 100, "", idsOf(live...)},
			{"MaxUint64", 1<<64 - 1, "", idsOf(live...)},
			{"DeletedID", msgs[3].ID, "", idsOf(msgs[1], msgs[2])},
			{"SecondLive", msgs[2].ID, "", idsOf(msgs[1])},
			{"OldestLive", msgs[1].ID, "", nil},
			{"DeletedOldest", msgs[0].ID, "", nil},
			{"One", 1, "", nil},
			{"OwnerDeletedID", msgs[3].ID, "ada@example.com", idsOf(msgs[1], msgs[2])},
			{"OwnerAboveAll", msgs[5].ID + 100, "ada@example.com", idsOf(live...)},
			{"OwnerOldestLive", msgs[1].ID, "ada@example.com", nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := mustSearch(t, db, model.SearchQuery{BeforeID: tt.before, OwnerEmail: tt.owner})
				if got := pageIDs(p); !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
					t.Errorf("SearchMessages(before %d, owner %q) = %v, want %v", tt.before, tt.owner, got, tt.want)
				}
			})
		}
	})

	// Greek has two lower-case sigmas (σ, and ς at the end of a word) and one
	// upper-case Σ. Lower-casing maps Σ to σ only, so a word typed in lower
	// case never matches the same word in capitals, and vice versa; a
	// case-insensitive search has to treat σ and ς as the same letter (as
	// strings.EqualFold and Unicode case folding do).
	t.Run("GreekFinalSigma", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		upper := mustCreateMessage(t, db, ada.ID, "ΣΊΣΥΦΟΣ")
		lower := mustCreateMessage(t, db, ada.ID, "σίσυφος")
		if !strings.EqualFold(upper.Content, lower.Content) {
			t.Fatalf("strings.EqualFold(%q, %q) = false", upper.Content, lower.Content)
		}
		for _, q := range []string{"σίσυφος", "ΣΊΣΥΦΟΣ", "Σίσυφος"} {
			p := mustSearch(t, db, model.SearchQuery{Terms: model.Terms(q)})
			if got, want := pageIDs(p), idsOf(upper, lower); !slices.Equal(got, want) {
				t.Errorf("SearchMessages(q=%q) = %v, want %v (both spellings)", q, got, want)
			}
		}
	})

	// The owner index is one flat bucket of owner‖id keys: a scan for one
	// owner must stop at the neighbouring owners on both sides.
	t.Run("OwnerNeighbours", func(t *testing.T) {
		db := mustOpen(t)
		u1, _ := mustCreateUser(t, db, "one@example.com")
		u2, _ := mustCreateUser(t, db, "two@example.com")
		u3, _ := mustCreateUser(t, db, "three@example.com")
		var mine []*model.Message
		for i := range 3 {
			mustCreateMessage(t, db, u1.ID, fmt.Sprint("before ", i))
			mine = append(mine, mustCreateMessage(t, db, u2.ID, fmt.Sprint("mine ", i)))
			mustCreateMessage(t, db, u3.ID, fmt.Sprint("after ", i))
		}
		for _, before := range []uint64{0, mine[2].ID + 1, mine[1].ID, mine[0].ID} {
			var want []*model.Message
			for _, m := range mine {
				if before == 0 || m.ID < before {
					want = append(want, m)
				}
			}
			p := mustSearch(t, db, model.SearchQuery{OwnerEmail: "two@example.com", BeforeID: before})
			if got, want := pageIDs(p), idsOf(want...); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("SearchMessages(owner two, before %d) = %v, want %v", before, got, want)
			}
		}
	})
}

// TestSearchPagingWhileWriting pages through results while newer messages are
// created and not-yet-seen ones deleted or edited between pages. The union of
// the pages must be exactly the matches that existed at the start minus the
// ones deleted before they were reached, in strictly descending ID order.
func TestSearchPagingWhileWriting(t *testing.T) {
	tests := []struct {
		name  string
		owner string // query owner, "" for none
		terms string
	}{
		{"All", "", ""},
		{"Owner", "ADA@example.com", ""},
		{"Terms", "", "Even"},
		{"OwnerAndTerms", "ada@EXAMPLE.com", "even"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := mustOpen(t)
			ada, _ := mustCreateUser(t, db, "Ada@Example.com")
			bob, _ := mustCreateUser(t, db, "bob@example.com")
			q := model.SearchQuery{OwnerEmail: tt.owner, Terms: model.Terms(tt.terms), Limit: 7}

			// The model: every live message and whether it matches q.
			type rec struct {
				owner   uint64
				matches bool
			}
			live := make(map[uint64]rec)
			matches := func(owner uint64, content string) bool {
				if tt.owner != "" && owner != ada.ID {
					return false
				}
				return model.HasAllTerms(model.ContentTerms(content), q.Terms)
			}
			create := func(i int) {
				owner := ada
				if i%3 == 2 {
					owner = bob
				}
				parity := "odd"
				if i%2 == 0 {
					parity = "even"
				}
				content := fmt.Sprintf("message %d is %s", i, parity)
				m := mustCreateMessage(t, db, owner.ID, content)
				live[m.ID] = rec{owner.ID, matches(owner.ID, content)}
			}

			const n = 60
			withoutSync(t, db, func() {
				for i := range n {
					create(i)
				}
			})
			var want []uint64 // matches at the start, minus those deleted unseen
			for id, r := range live {
				if r.matches {
					want = append(want, id)
				}
			}
			deletedUnseen := make(map[uint64]bool)

			// unseenMatches lists live matching IDs below the cursor, newest first.
			unseenMatches := func(cursor uint64) []uint64 {
				var ids []uint64
				for id, r := range live {
					if r.matches && (cursor == 0 || id < cursor) {
						ids = append(ids, id)
					}
				}
				slices.Sort(ids)
				slices.Reverse(ids)
				return ids
			}
			del := func(id uint64, unseen bool) {
				r := live[id]
				if _, err := db.DeleteMessage(context.Background(), id, model.ByUser(r.owner), nil); err != nil {
					t.Fatalf("DeleteMessage(%d) = %v", id, err)
				}
				delete(live, id)
				if unseen && r.matches {
					deletedUnseen[id] = true
				}
			}

			var got []uint64
			next := n
			for page := 0; ; page++ {
				if page > n {
					t.Fatalf("more than %d pages: paging does not end", n)
				}
				p := mustSearch(t, db, q)
				ids := pageIDs(p)
				if len(ids) > q.Limit {
					t.Fatalf("page %d has %d items, limit %d", page, len(ids), q.Limit)
				}
				got = append(got, ids...)
				if p.NextBeforeID == 0 {
					break
				}
				if len(ids) == 0 {
					t.Fatalf("page %d is empty but NextBeforeID = %d", page, p.NextBeforeID)
				}
				if got, want := p.NextBeforeID, ids[len(ids)-1]; got != want {
					t.Errorf("page %d NextBeforeID = %d, want last ID %d", page, got, want)
				}
				cursor := p.NextBeforeID
				q.BeforeID = cursor

				// Between pages, other clients write:
				// newer matching messages, which must not show up …
				for range 3 {
					create(next)
					next += 2 // keep parity: "even" stays even
				}
				// … the next message this client would see, and one further
				// down, vanish …
				if unseen := unseenMatches(cursor); len(unseen) > 0 {
					del(unseen[0], true)
					if len(unseen) > 3 {
						del(unseen[3], true)
					}
				}
				// … a message already seen vanishes, on odd pages the very
				// one the cursor names …
				if page%2 == 1 {
					del(cursor, false)
				} else if len(got) > 1 {
					if _, ok := live[got[0]]; ok {
						del(got[0], false)
					}
				}
				// … and a not-yet-seen match is edited but still matches.
				if unseen := unseenMatches(cursor); len(unseen) > 1 {
					id := unseen[1]
					r := live[id]
					content := "edited, still even"
					if tt.terms == "" {
						content = "edited"
					}
					if _, err := db.UpdateMessage(context.Background(), id, model.ByUser(r.owner), model.MessageUpdate{Content: &content}, nil); err != nil {
						t.Fatalf("UpdateMessage(%d) = %v", id, err)
					}
				}
			}

			if !descending(got) {
				t.Errorf("pages are not in strictly descending ID order: %v", got)
			}
			want = slices.DeleteFunc(want, func(id uint64) bool { return deletedUnseen[id] })
			slices.Sort(want)
			slices.Reverse(want)
			if !slices.Equal(got, want) {
				t.Errorf("union of pages = %v\nwant %v\n(deleted unseen: %v)", got, want, deletedUnseen)
			}
			if len(deletedUnseen) == 0 {
				t.Errorf("test deleted no unseen messages; it proves nothing")
			}
			checkIndexes(t, db.DB)
		})
	}
}

// withoutSync runs bulk setup with fsync off; durability is not what these
// tests are about, and a hundred fsyncs would dominate their runtime.
func withoutSync(tb testing.TB, db *testDB, f func()) {
	tb.Helper()
	setNoSync(tb, db.DB, true)
	defer setNoSync(tb, db.DB, false)
	f()
	if err := db.bolt.Sync(); err != nil {
		tb.Fatalf("Sync() = %v", err)
	}
}

// setNoSync sets bbolt's NoSync inside a write transaction: commits (the
// search index's merger's among them) read it under bbolt's writer lock.
func setNoSync(tb testing.TB, db *DB, v bool) {
	tb.Helper()
	if err := db.writes.update(func(*bbolt.Tx) error { db.bolt.NoSync = v; return nil }); err != nil {
		tb.Fatalf("setting NoSync: %v", err)
	}
}

func TestSearchQueryRules(t *testing.T) {
	db := mustOpen(t)
	var words []string
	for i := range model.MaxQueryTerms + 1 {
		words = append(words, fmt.Sprint("w", i))
	}
	if _, _, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Terms: model.Terms(strings.Join(words[:model.MaxQueryTerms], " "))}); err != nil {
		t.Errorf("search with %d words = %v, want nil", model.MaxQueryTerms, err)
	}
	_, _, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Terms: model.Terms(strings.Join(words, " "))})
	if got, want := violationFields(t, err), []string{"q"}; !slices.Equal(got, want) {
		t.Errorf("search with %d words: fields = %q, want %q", len(words), got, want)
	}
}

// TestSearchAgainstModel pages through random queries over random messages
// and compares every result with a brute-force filter of the same data: the
// index, the leapfrog intersection, the ID bounds from time and the paging
// must together give exactly what reading every message would.
func TestSearchAgainstModel(t *testing.T) {
	db := mustOpen(t)
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := []string{"alpha", "beta", "gamma", "delta", "Épsilon", "epsilon", "zeta", "eta", "theta", "iota"}
	var users []*model.User
	for i := range 4 {
		u, _ := mustCreateUser(t, db, fmt.Sprintf("user%d@example.com", i))
		users = append(users, u)
	}
	var all []*model.Message
	withoutSync(t, db, func() {
		for range 600 {
			db.Clock.Add(time.Duration(rng.IntN(3)) * time.Second)
			n := 1 + rng.IntN(6)
			words := make([]string, n)
			for i := range words {
				// Skewed: early words are common, late ones rare.
				words[i] = vocab[min(rng.IntN(len(vocab)), rng.IntN(len(vocab)))]
			}
			all = append(all, mustCreateMessage(t, db, users[rng.IntN(len(users))].ID, strings.Join(words, " ")))
		}
		for _, m := range all {
			if rng.IntN(5) == 0 {
				if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(m.OwnerID), nil); err != nil {
					t.Fatal(err)
				}
				m.ID = 0 // gone
			}
		}
	})
	first, last := all[0].CreatedAt, all[len(all)-1].CreatedAt
	span := last.Sub(first)
	for trial := range 300 {
		var q model.SearchQuery
		for range rng.IntN(4) {
			q.Terms = append(q.Terms, model.Terms(vocab[rng.IntN(len(vocab))])...)
		}
		if rng.IntN(3) == 0 {
			q.OwnerEmail = users[rng.IntN(len(users))].Email
		}
		if rng.IntN(3) == 0 {
			s := first.Add(time.Duration(rng.Int64N(int64(span) + 1)))
			q.Since = &s
		}
		if rng.IntN(3) == 0 {
			u := first.Add(time.Duration(rng.Int64N(int64(span) + 1)))
			q.Until = &u
		}
		q.Limit = 1 + rng.IntN(30)

		var want []uint64
		for i := len(all) - 1; i >= 0; i-- {
			m := all[i]
			if m.ID == 0 || !model.HasAllTerms(model.ContentTerms(m.Content), q.Terms) ||
				(q.OwnerEmail != "" && m.OwnerEmail != q.OwnerEmail) ||
				(q.Since != nil && m.CreatedAt.Before(*q.Since)) ||
				(q.Until != nil && !m.CreatedAt.Before(*q.Until)) {
				continue
			}
			want = append(want, m.ID)
		}
		var got []uint64
		for pages := 0; ; pages++ {
			p := mustSearch(t, db, q)
			if len(p.Messages) > q.Limit {
				t.Fatalf("trial %d: page of %d, limit %d", trial, len(p.Messages), q.Limit)
			}
			got = append(got, pageIDs(p)...)
			if p.NextBeforeID == 0 {
				break
			}
			if pages > len(all) {
				t.Fatalf("trial %d: paging does not end", trial)
			}
			q.BeforeID = p.NextBeforeID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (%+v):\n got %v\nwant %v", trial, q, got, want)
		}
	}
}

// TestSearchBudget builds the worst case for an intersection — two common
// words that never occur together — and checks that a search gives up after
// its step budget with a cursor, rather than walking both lists whole, and
// that following the cursors still finds exactly the matches.
func TestSearchBudget(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	const n = 3 * stepsPerPage
	msgs := bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string {
		switch {
		case i == 7 || i == n-100:
			return "left right"
		case i%2 == 1:
			return "right"
		}
		return "left"
	}, n)
	var both []uint64
	for _, m := range msgs {
		if m.Content == "left right" {
			both = append([]uint64{m.ID}, both...)
		}
	}
	q := model.SearchQuery{Terms: model.Terms("left right")}
	var got []uint64
	pages := 0
	for {
		p := mustSearch(t, db, q)
		pages++
		got = append(got, pageIDs(p)...)
		if p.NextBeforeID == 0 {
			break
		}
		q.BeforeID = p.NextBeforeID
	}
	if !slices.Equal(got, both) {
		t.Errorf("matches = %v, want %v", got, both)
	}
	if pages < 3 {
		t.Errorf("found in %d pages; a walk over %d postings within one page's budget of %d steps is not possible", pages, n, stepsPerPage)
	}
}

// countdownContext reports itself cancelled after a number of Err calls, so
// a test can cancel a search at a known point in its walk.
type countdownContext struct {
	context.Context
	left  atomic.Int64
	calls atomic.Int64
}

func (c *countdownContext) Err() error {
	c.calls.Add(1)
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestSearchCancellation(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string { return []string{"left", "right"}[i%2] }, 4*stepsPerTransaction)
	t.Run("BeforeStart", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{}); !errors.Is(err, context.Canceled) {
			t.Errorf("search with a cancelled context = %v, want context.Canceled", err)
		}
	})
	t.Run("MidWalk", func(t *testing.T) {
		// Three checks pass, then the client is gone: the search must stop at
		// the next check instead of finishing its walk.
		ctx := &countdownContext{Context: context.Background()}
		ctx.left.Store(3)
		_, _, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("left right")})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("search = %v, want context.Canceled", err)
		}
		if got, max := ctx.calls.Load(), int64(4); got != max {
			t.Errorf("context checked %d times, want it to stop at check %d", got, max)
		}
	})
}
