package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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

// idsOf returns the IDs of msgs, created in order, newest first.
func idsOf(msgs ...*model.Message) []uint64 {
	ids := make([]uint64, 0, len(msgs))
	for i := len(msgs) - 1; i >= 0; i-- {
		ids = append(ids, msgs[i].ID)
	}
	return ids
}

func (e *env) search(q model.SearchQuery) *model.SearchPage {
	e.t.Helper()
	_, p, err := e.Store.SearchMessages(e.ctx(), model.ByServer(), q)
	if err != nil {
		e.t.Fatalf("SearchMessages(%+v) = %v", q, err)
	}
	return p
}

// searchAll follows cursors to the end and returns every ID found.
func (e *env) searchAll(q model.SearchQuery) []uint64 {
	e.t.Helper()
	var got []uint64
	for pages := 0; ; pages++ {
		p := e.search(q)
		if len(p.Messages) > max(q.Limit, model.DefaultSearchLimit) {
			e.t.Fatalf("page of %d, limit %d", len(p.Messages), q.Limit)
		}
		got = append(got, pageIDs(p)...)
		if p.NextBeforeID == 0 {
			return got
		}
		if pages > 100000 {
			e.t.Fatal("paging does not end")
		}
		q.BeforeID = p.NextBeforeID
	}
}

func sameIDs(got, want []uint64) bool {
	return slices.Equal(got, want) || (len(got) == 0 && len(want) == 0)
}

func testSearch(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("Ada@Example.com")
	bob, _ := e.user("bob@example.com")
	uni, _ := e.user("Ünïcödé@Example.com")
	e.user("silent@example.com")
	contents := []string{
		"Hello world",                        // 0
		"helloworld",                         // 1
		"HELLO, World!",                      // 2
		"Ünïcödé text",                       // 3
		"u\u0308nïcödé",                      // 4: NFD
		"私は 日本語、テキスト",                        // 5
		"日本語テキスト",                            // 6
		"foo-bar baz_qux",                    // 7
		"mail ada@example.com now",           // 8
		"version 2 of x2",                    // 9
		"say \"hello\"—then (world)",         // 10
		"ÑANDÚ straße",                       // 11
		"hello\u00a0world\u3000again",        // 12
		"ΣΊΣΥΦΟΣ",                            // 13
		"σίσυφος",                            // 14
		strings.Repeat("long", 20) + " tail", // 15: a word over 64 bytes
		strings.Repeat("long", 20) + "er",    // 16: same first 64 bytes
		"नमस्ते दुनिया",                      // 17
	}
	var msgs []*model.Message
	for i, c := range contents {
		e.clock.Add(time.Second)
		owner := ada
		if i%3 == 1 {
			owner = bob
		}
		msgs = append(msgs, e.post(owner.ID, c))
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
	for _, tt := range []struct {
		q    string
		want []uint64
	}{
		{"", pick(all...)},
		{"hello", pick(0, 2, 10, 12)},
		{"HELLO", pick(0, 2, 10, 12)},
		{"helloworld", pick(1)},
		{"hell", nil},
		{"world hello", pick(0, 2, 10, 12)},
		{"hello again", pick(12)},
		{"Ünïcödé", pick(3, 4)},
		{"u\u0308nïcödé TEXT", pick(3)},
		{"unicode", nil},
		{"日本語", pick(5)},
		{"日本語テキスト", pick(6)},
		{"foo-bar", pick(7)},
		{"bar", pick(7)},
		{"baz_qux", pick(7)},
		{"foobar", nil},
		{"ada@example.com", pick(8)},
		{"EXAMPLE.COM", pick(8)},
		{"x2", pick(9)},
		{"ñandú", pick(11)},
		{"STRASSE", nil},
		{"σίσυφος", pick(13, 14)},
		{"ΣΊΣΥΦΟΣ", pick(13, 14)},
		{"Σίσυφος", pick(13, 14)},
		{strings.Repeat("LONG", 20), pick(15)},
		{strings.Repeat("long", 20) + " tail", pick(15)},
		{strings.Repeat("long", 20) + "er", pick(16)},
		{"नमस्ते", pick(17)},
		{"नमस", nil},
	} {
		p := e.search(model.SearchQuery{Terms: model.Terms(tt.q), Limit: model.MaxSearchLimit})
		if got := pageIDs(p); !sameIDs(got, tt.want) || p.NextBeforeID != 0 {
			t.Errorf("q=%q: %v (next %d), want %v", tt.q, got, p.NextBeforeID, tt.want)
		}
	}
	owned := func(u *model.User) []uint64 {
		var sel []*model.Message
		for _, m := range msgs {
			if m.OwnerID == u.ID {
				sel = append(sel, m)
			}
		}
		return idsOf(sel...)
	}
	for _, tt := range []struct {
		owner, q string
		want     []uint64
	}{
		{"ADA@EXAMPLE.COM", "", owned(ada)},
		{"  ada@example.com\t", "", owned(ada)},
		{"BOB@example.com", "", owned(bob)},
		{"ada@example.com", "hello", pick(0, 2, 12)},
		{"u\u0308nïcödé@example.com", "", owned(uni)},
		{"silent@example.com", "", nil},
		{"nobody@example.com", "", nil},
		{"nobody@example.com", "hello", nil},
	} {
		p := e.search(model.SearchQuery{OwnerEmail: tt.owner, Terms: model.Terms(tt.q)})
		if got := pageIDs(p); !sameIDs(got, tt.want) || p.NextBeforeID != 0 {
			t.Errorf("owner=%q q=%q: %v (next %d), want %v", tt.owner, tt.q, got, p.NextBeforeID, tt.want)
		}
	}
	// Every item is complete, and the caller comes back with the page.
	u, p, err := e.Store.SearchMessages(ctx, model.ByToken(reg), model.SearchQuery{Limit: 1})
	if err != nil || u.ID != ada.ID || len(p.Messages) != 1 || p.NextBeforeID != msgs[len(msgs)-1].ID {
		t.Fatalf("SearchMessages(limit 1) = %+v, %+v, %v", u, p, err)
	}
	if got, want := *p.Messages[0], *msgs[len(msgs)-1]; !reflect.DeepEqual(got, want) {
		t.Errorf("item = %+v, want %+v", got, want)
	}
	_, _, err = e.Store.SearchMessages(ctx, model.ByToken(TokenHash("nobody")), model.SearchQuery{})
	wantKind(t, "SearchMessages(unknown token)", err, model.ErrUnauthorized, "")
	var tooMany model.SearchQuery
	for i := range model.MaxQueryTerms + 1 {
		tooMany.Terms = append(tooMany.Terms, fmt.Sprint("w", i))
	}
	_, _, err = e.Store.SearchMessages(ctx, model.ByServer(), tooMany)
	wantKind(t, "SearchMessages(17 terms)", err, model.ErrInvalid, "")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := e.Store.SearchMessages(cancelled, model.ByServer(), model.SearchQuery{Terms: model.Terms("hello")}); err == nil {
		t.Error("a search whose client left succeeded")
	}

	// Limits and cursors.
	for _, tt := range []struct{ limit, n int }{{0, model.DefaultSearchLimit}, {-1, model.DefaultSearchLimit}, {1, 1}, {7, 7}, {1 << 30, len(msgs)}} {
		p := e.search(model.SearchQuery{Limit: tt.limit})
		if got := pageIDs(p); !slices.Equal(got, pick(all...)[:min(tt.n, len(msgs))]) {
			t.Errorf("limit %d: %v", tt.limit, got)
		}
	}
	if got := e.searchAll(model.SearchQuery{Limit: 4}); !slices.Equal(got, pick(all...)) {
		t.Errorf("paging by 4 = %v", got)
	}
	if _, err := e.Store.DeleteMessage(ctx, msgs[9].ID, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		before uint64
		owner  string
		want   []uint64
	}{
		{msgs[9].ID, "", pick(0, 1, 2, 3, 4, 5, 6, 7, 8)},
		{msgs[1].ID, "", pick(0)},
		{msgs[0].ID, "", nil},
		{1<<64 - 1, "", slices.DeleteFunc(pick(all...), func(id uint64) bool { return id == msgs[9].ID })},
		{msgs[9].ID, "ada@example.com", pick(0, 2, 3, 5, 6, 8)},
	} {
		p := e.search(model.SearchQuery{BeforeID: tt.before, OwnerEmail: tt.owner, Limit: model.MaxSearchLimit})
		if got := pageIDs(p); !sameIDs(got, tt.want) {
			t.Errorf("before %d owner %q: %v, want %v", tt.before, tt.owner, got, tt.want)
		}
	}

	// Time bounds: inclusive since, exclusive until, any zone, rounded
	// to the microsecond, year 1 and 9999 real bounds.
	at := func(i int) time.Time { return msgs[i].CreatedAt }
	zone := time.FixedZone("UTC-7", -7*3600)
	year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	live := slices.Concat(msgs[:9], msgs[10:])
	for _, tt := range []struct {
		name         string
		since, until *time.Time
		want         []uint64
	}{
		{"SinceInclusive", ptr(at(2)), nil, idsOf(slices.Concat(msgs[2:9], msgs[10:])...)},
		{"SinceOtherZone", ptr(at(2).In(zone)), nil, idsOf(slices.Concat(msgs[2:9], msgs[10:])...)},
		{"SinceJustAfter", ptr(at(2).Add(time.Nanosecond)), nil, idsOf(slices.Concat(msgs[3:9], msgs[10:])...)},
		{"UntilExclusive", nil, ptr(at(2)), idsOf(msgs[:2]...)},
		{"UntilJustAfter", nil, ptr(at(2).Add(time.Nanosecond)), idsOf(msgs[:3]...)},
		{"Both", ptr(at(1)), ptr(at(4)), idsOf(msgs[1:4]...)},
		{"SameInstant", ptr(at(1)), ptr(at(1)), nil},
		{"Reversed", ptr(at(4)), ptr(at(1)), nil},
		{"AllAfter", ptr(at(len(msgs) - 1).Add(time.Microsecond)), nil, nil},
		{"UntilYear1", nil, ptr(year1), nil},
		{"SinceYear1", ptr(year1), nil, idsOf(live...)},
		{"UntilBefore1970", nil, ptr(time.Unix(-1, 0)), nil},
		{"SinceYear9999", ptr(far), nil, nil},
		{"UntilYear9999", nil, ptr(far), idsOf(live...)},
		{"BothWithWords", ptr(at(0)), ptr(at(3)), pick(0, 2)},
	} {
		q := model.SearchQuery{Since: tt.since, Until: tt.until, Limit: model.MaxSearchLimit}
		if tt.name == "BothWithWords" {
			q.Terms = model.Terms("hello")
		}
		if got := e.searchAll(q); !sameIDs(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
		q.Limit = 1
		if got := e.searchAll(q); !sameIDs(got, tt.want) {
			t.Errorf("%s, a page of 1 at a time: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// vocabulary for the random searches: skewed so early words are common,
// with a word over 64 bytes, both normalisation forms and both sigmas.
var vocabulary = []string{"alpha", "beta", "gamma", "foo-bar", "Épsilon", "e\u0301psilon", "ΟΔΟΣ", "οδός",
	"mail@example.com", strings.Repeat("Σ", 40), strings.Repeat("σ", 39) + "ς", "zeta", "eta", "theta", "iota"}

// randomContent is 1-6 words of vocabulary, early ones likelier.
func randomContent(rng *rand.Rand) string {
	words := make([]string, 1+rng.IntN(6))
	for i := range words {
		words[i] = vocabulary[min(rng.IntN(len(vocabulary)), rng.IntN(len(vocabulary)))]
	}
	return strings.Join(words, " ")
}

// randomQuery draws a query over users' e-mails and times in [first, last].
func randomQuery(rng *rand.Rand, users []*model.User, first, last time.Time) model.SearchQuery {
	var q model.SearchQuery
	for range rng.IntN(4) {
		q.Terms = append(q.Terms, model.Terms(vocabulary[rng.IntN(len(vocabulary))])...)
	}
	q.Terms = slices.Compact(q.Terms)
	if rng.IntN(3) == 0 {
		q.OwnerEmail = strings.ToUpper(users[rng.IntN(len(users))].Email)
	}
	span := last.Sub(first)
	if rng.IntN(3) == 0 {
		s := first.Add(time.Duration(rng.Int64N(int64(span) + 1)))
		q.Since = &s
	}
	if rng.IntN(3) == 0 {
		u := first.Add(time.Duration(rng.Int64N(int64(span) + 1)))
		q.Until = &u
	}
	q.Limit = 1 + rng.IntN(30)
	return q
}

// modelMatches reports whether m answers q, by the rules of the contract.
func modelMatches(m *model.Message, q model.SearchQuery) bool {
	return model.HasAllTerms(model.ContentTerms(m.Content), q.Terms) &&
		(q.OwnerEmail == "" || model.EmailKey(m.OwnerEmail) == model.EmailKey(q.OwnerEmail)) &&
		(q.Since == nil || !m.CreatedAt.Before(*q.Since)) &&
		(q.Until == nil || m.CreatedAt.Before(*q.Until))
}

func testSearchAgainstModel(e *env) {
	t := e.t
	ctx := e.ctx()
	rng := rand.New(rand.NewPCG(1, 2))
	var users []*model.User
	for i := range 4 {
		u, _ := e.user(fmt.Sprintf("user%d@example.com", i))
		users = append(users, u)
	}
	var all []*model.Message
	for range 400 {
		e.clock.Add(time.Duration(rng.IntN(3)) * time.Second)
		all = append(all, e.post(users[rng.IntN(len(users))].ID, randomContent(rng)))
	}
	for _, m := range all {
		switch rng.IntN(6) {
		case 0:
			if _, err := e.Store.DeleteMessage(ctx, m.ID, model.ByUser(m.OwnerID), nil); err != nil {
				t.Fatal(err)
			}
			m.ID = 0
		case 1:
			up, err := e.Store.UpdateMessage(ctx, m.ID, model.ByUser(m.OwnerID), model.MessageUpdate{Content: ptr(randomContent(rng))}, nil)
			if err != nil {
				t.Fatal(err)
			}
			*m = *up
		}
	}
	first, last := all[0].CreatedAt, all[len(all)-1].CreatedAt
	for trial := range 200 {
		q := randomQuery(rng, users, first, last)
		var want []uint64
		for i := len(all) - 1; i >= 0; i-- {
			if m := all[i]; m.ID != 0 && modelMatches(m, q) {
				want = append(want, m.ID)
			}
		}
		if got := e.searchAll(q); !sameIDs(got, want) {
			t.Fatalf("trial %d (%+v):\n got %v\nwant %v", trial, q, got, want)
		}
	}
}

// testSearchWhileWriting pages through results while other clients create
// newer messages and delete unseen ones between pages: the pages hold
// exactly the matches that existed at the start, less those deleted before
// they were reached, newest first, none twice.
func testSearchWhileWriting(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	bob, _ := e.user("bob@example.com")
	live := make(map[uint64]*model.Message)
	n := 0
	for _, q := range []model.SearchQuery{
		{Limit: 7},
		{OwnerEmail: "ADA@example.com", Limit: 7},
		{Terms: model.Terms("Even"), Limit: 7},
		{OwnerEmail: "ada@example.com", Terms: model.Terms("even"), Limit: 7},
	} {
		create := func() {
			owner := ada
			if n%3 == 2 {
				owner = bob
			}
			parity := "odd"
			if n%2 == 0 {
				parity = "even"
			}
			m := e.post(owner.ID, fmt.Sprintf("message %d is %s", n, parity))
			live[m.ID] = m
			n += 2
		}
		for range 60 {
			create()
			n--
		}
		start := e.clock.Now()
		var want []uint64
		for id, m := range live {
			if modelMatches(m, q) {
				want = append(want, id)
			}
		}
		var got []uint64
		for page := 0; ; page++ {
			if page > 100 {
				t.Fatal("paging does not end")
			}
			p := e.search(q)
			got = append(got, pageIDs(p)...)
			if p.NextBeforeID == 0 {
				break
			}
			q.BeforeID = p.NextBeforeID
			for range 3 {
				e.clock.Add(time.Millisecond)
				create()
			}
			var unseen []uint64
			for id, m := range live {
				if id < q.BeforeID && modelMatches(m, q) && !m.CreatedAt.After(start) {
					unseen = append(unseen, id)
				}
			}
			slices.Sort(unseen)
			if len(unseen) > 0 {
				id := unseen[len(unseen)-1]
				if _, err := e.Store.DeleteMessage(ctx, id, model.ByUser(live[id].OwnerID), nil); err != nil {
					t.Fatal(err)
				}
				delete(live, id)
				want = slices.DeleteFunc(want, func(x uint64) bool { return x == id })
			}
		}
		slices.Sort(want)
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Errorf("%+v: paged %v, want %v", q, got, want)
		}
	}
}

// CompareSearch fills two stores with the same accounts and messages — the
// same content in the same order, edits and deletions included, so the
// same IDs and times — and checks that random searches get the same
// pages from both, cursor for cursor, and the same change log. The
// content mixes the Unicode cases where word rules differ most:
// composed and decomposed accents, Greek final sigma, hyphens and e-mail
// addresses, words over 64 bytes.
func CompareSearch(t *testing.T, a, b Opener) {
	clock := NewClock()
	stores := []Opened{a(t, clock.Now), b(t, clock.Now)}
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 11))
	var users []*model.User
	for i := range 3 {
		var u *model.User
		for _, s := range stores {
			nu := &model.User{Email: fmt.Sprintf("User%d@example.com", i), PasswordHash: FakePasswordHash}
			if _, err := s.Store.CreateUser(ctx, nu, TokenHash(fmt.Sprint("user ", i)), ttl, nil); err != nil {
				t.Fatal(err)
			}
			if u != nil && (nu.ID != u.ID || !nu.CreatedAt.Equal(u.CreatedAt)) {
				t.Fatalf("the stores gave user %d different IDs or times: %+v and %+v", i, u, nu)
			}
			u = nu
		}
		users = append(users, u)
	}
	var all []*model.Message
	do := func(what string, f func(s Store) (*model.Message, error)) *model.Message {
		t.Helper()
		var first *model.Message
		for i, s := range stores {
			m, err := f(s.Store)
			if err != nil {
				t.Fatalf("%s in store %d: %v", what, i, err)
			}
			if first != nil && !reflect.DeepEqual(*m, *first) {
				t.Fatalf("%s: the stores answered %+v and %+v", what, *first, *m)
			}
			first = m
		}
		return first
	}
	extra := []string{"caf\u00e9 CAFE\u0301", "ΟΔΟΣ οδός", "foo-bar foo bar", "bob@example.com bob", strings.Repeat("ü", 40) + " " + strings.Repeat("u\u0308", 40)}
	for i := range 600 {
		if rng.IntN(4) == 0 {
			clock.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
		}
		content := randomContent(rng)
		if rng.IntN(5) == 0 {
			content += " " + extra[rng.IntN(len(extra))]
		}
		owner := users[rng.IntN(len(users))].ID
		all = append(all, do(fmt.Sprint("create ", i), func(s Store) (*model.Message, error) {
			return s.CreateMessage(ctx, model.ByUser(owner), content)
		}))
	}
	for _, m := range all {
		switch rng.IntN(8) {
		case 0:
			do("delete", func(s Store) (*model.Message, error) { return s.DeleteMessage(ctx, m.ID, model.ByUser(m.OwnerID), nil) })
		case 1:
			content := randomContent(rng)
			do("update", func(s Store) (*model.Message, error) {
				return s.UpdateMessage(ctx, m.ID, model.ByUser(m.OwnerID), model.MessageUpdate{Content: &content}, nil)
			})
		}
	}
	first, last := all[0].CreatedAt, all[len(all)-1].CreatedAt
	for trial := range 300 {
		q := randomQuery(rng, users, first, last)
		for page := 0; ; page++ {
			var pages [2]*model.SearchPage
			for i, s := range stores {
				_, p, err := s.Store.SearchMessages(ctx, model.ByServer(), q)
				if err != nil {
					t.Fatalf("trial %d, store %d: %v", trial, i, err)
				}
				pages[i] = p
			}
			if !slices.EqualFunc(pages[0].Messages, pages[1].Messages, func(x, y *model.Message) bool { return reflect.DeepEqual(*x, *y) }) ||
				pages[0].NextBeforeID != pages[1].NextBeforeID {
				t.Fatalf("trial %d page %d (%+v):\n%v next %d\n%v next %d", trial, page, q,
					pageIDs(pages[0]), pages[0].NextBeforeID, pageIDs(pages[1]), pages[1].NextBeforeID)
			}
			if pages[0].NextBeforeID == 0 {
				break
			}
			q.BeforeID = pages[0].NextBeforeID
		}
	}
	var logs [2][]string
	for i, s := range stores {
		chs, _, err := s.Store.ChangesAfter(ctx, 0, 100000)
		if err != nil {
			t.Fatal(err)
		}
		logs[i] = changeStrings(chs)
	}
	if !slices.Equal(logs[0], logs[1]) {
		t.Errorf("the change logs differ:\n%s\n--\n%s", strings.Join(logs[0], "\n"), strings.Join(logs[1], "\n"))
	}
}
