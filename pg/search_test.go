package pg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	heraldhttp "herald/http"
	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// TestSearchPlans: the plans a search with words may take — chosen by
// PostgreSQL for its values, the walk down the IDs, the read of postings —
// give the same pages and cursors for every query, across windows; and
// once the table is analysed, Herald picks the walk for a common word and
// the postings for a rare one.
func TestSearchPlans(t *testing.T) {
	// A bound on a hang, not a timing: filling and analysing the table
	// takes over a minute on a busy machine.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// The statistics are read when the test says, not by the instance
	// while a plan is forced.
	db, url := open(t, pg.Options{TermStatsEvery: time.Hour})
	if got := db.PlanFor([]string{"apple"}); got != "by values" {
		t.Errorf("before the table is analysed, a search is planned %q, want by values", got)
	}

	u := &model.User{Email: "planner@example.com", PasswordHash: storetest.FakePasswordHash}
	token := storetest.TokenHash("planner")
	if _, err := db.CreateUser(ctx, u, token, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	// More messages than the windows of one page span, so later windows
	// and cursors below them are read too: "common" in every message,
	// "apple" in every third, "fig" in every tenth, "pear" in every 97th,
	// "zephyr" in three, "apple pear" together in every 291st.
	total := int(pg.SearchSpan) + 3000
	const batch = 500
	for start := 0; start < total; start += batch {
		var by []model.Caller
		var contents []string
		for i := start; i < min(start+batch, total); i++ {
			words := []string{"common", fmt.Sprint("n", i)}
			if i%3 == 0 {
				words = append(words, "apple")
			}
			if i%97 == 0 {
				words = append(words, "pear")
			}
			if i%10 == 0 {
				words = append(words, "fig")
			}
			if i == 5 || i == total/2 || i == total-7 {
				words = append(words, "zephyr")
			}
			by = append(by, model.ByToken(token))
			contents = append(contents, strings.Join(words, " "))
		}
		_, errs, err := db.CreateBatch(ctx, by, contents)
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := pgtest.Exec(ctx, url, "ANALYZE messages"); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.RefreshTermStats(ctx); err != nil || !ok {
		t.Fatalf("the terms' statistics after ANALYZE: %v, %v", ok, err)
	}
	for terms, want := range map[string]string{"common": "walk", "apple": "walk", "apple fig": "walk", "zephyr": "postings", "apple zephyr": "postings", "unheard": "postings"} {
		if got := db.PlanFor(model.Terms(terms)); got != want {
			t.Errorf("%q is planned %q, want %q", terms, got, want)
		}
	}
	// A search expected to fill its page in the first window is sent
	// together with others; one expected to spend its windows goes alone
	// (a 30th of the messages hold both words: twice 101 matches, the
	// margin asked for, need 6,060 messages, not the window's 2,048).
	for terms, want := range map[string]bool{"common": true, "apple": true, "zephyr": true, "unheard": true, "apple fig": false} {
		if got := db.FillsEarly(model.Terms(terms), 100); got != want {
			t.Errorf("%q sent together: %v, want %v", terms, got, want)
		}
		queued, release := db.HoldSearches()
		searched := make(chan error, 1)
		go func() {
			_, _, err := db.SearchMessages(ctx, model.ByToken(token), model.SearchQuery{Terms: model.Terms(terms), Limit: 100})
			searched <- err
		}()
		// Either the search is answered, or it waits for the searches held.
		var err error
		answered := false
		for deadline := time.Now().Add(10 * time.Second); !answered && queued() == 0 && time.Now().Before(deadline); {
			select {
			case err = <-searched:
				answered = true
			case <-time.After(time.Millisecond):
			}
		}
		if answered == want || (!answered && queued() == 0) {
			t.Errorf("%q answered while the searches sent together were held: %v, want %v", terms, answered, !want)
		}
		release()
		if !answered {
			err = <-searched
		}
		if err != nil {
			t.Errorf("%q: %v", terms, err)
		}
	}

	// A page as "ids | next".
	summary := func(p *model.SearchPage) string {
		var ids []string
		for _, m := range p.Messages {
			ids = append(ids, fmt.Sprint(m.ID))
		}
		return fmt.Sprintf("%s | %d", strings.Join(ids, " "), p.NextBeforeID)
	}
	// One page of a query. paired: sent together with the same search, in
	// one pipeline, and both answers must agree.
	page := func(q model.SearchQuery, paired bool) *model.SearchPage {
		if !paired {
			_, p, err := db.SearchMessages(ctx, model.ByToken(token), q)
			if err != nil {
				t.Fatalf("%+v: %v", q, err)
			}
			return p
		}
		queued, release := db.HoldSearches()
		answers := make(chan *model.SearchPage, 2)
		for range 2 {
			go func() {
				_, p, err := db.SearchMessages(ctx, model.ByToken(token), q)
				if err != nil {
					t.Errorf("%+v sent in a pair: %v", q, err)
				}
				answers <- p
			}()
		}
		for deadline := time.Now().Add(10 * time.Second); queued() < 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%+v: %d of a pair of searches queued to go together", q, queued())
			}
		}
		release()
		a, b := <-answers, <-answers
		if a == nil || b == nil {
			t.FailNow()
		}
		if summary(a) != summary(b) {
			t.Errorf("%+v sent in a pair: two answers, %q and %q", q, summary(a), summary(b))
		}
		return a
	}
	// Every page of a query, following cursors, as "ids | next" lines.
	pages := func(q model.SearchQuery, paired bool) []string {
		var out []string
		for range 1000 {
			page := page(q, paired)
			out = append(out, summary(page))
			if page.NextBeforeID == 0 {
				return out
			}
			q.BeforeID = page.NextBeforeID
		}
		t.Fatalf("%+v: more than 1,000 pages", q)
		return nil
	}
	queries := []model.SearchQuery{
		{Terms: model.Terms("common"), Limit: 100},
		{Terms: model.Terms("apple")},
		{Terms: model.Terms("pear"), Limit: 7},
		{Terms: model.Terms("apple pear")},
		{Terms: model.Terms("zephyr")},
		{Terms: model.Terms("apple zephyr"), Limit: 1},
		{Terms: model.Terms("unheard")},
		{Terms: model.Terms("common n17 n2000")}, // words that never meet: short pages
		{Terms: model.Terms("pear"), BeforeID: uint64(total / 2)},
	}
	// The pages of the postings, which no span of IDs bounds: every match
	// of the pages in windows, in pages of the query's size, each with a
	// cursor only when matches remain.
	unbounded := func(q model.SearchQuery, windowed []string) []string {
		var ids []string
		for _, p := range windowed {
			if list, _, _ := strings.Cut(p, " | "); list != "" {
				ids = append(ids, strings.Fields(list)...)
			}
		}
		n := q.PageLimit()
		var out []string
		for start := 0; start == 0 || start < len(ids); start += n {
			page := ids[start:min(start+n, len(ids))]
			next := "0"
			if start+n < len(ids) {
				next = page[len(page)-1]
			}
			out = append(out, strings.Join(page, " ")+" | "+next)
		}
		return out
	}
	for _, q := range queries {
		db.ForcePlan("by values")
		windowed := pages(q, false)
		if len(windowed) < 1 {
			t.Fatalf("%+v: no pages", q)
		}
		for _, plan := range []string{"walk", "walk alone", "postings"} {
			db.ForcePlan(plan)
			want := windowed
			if plan == "postings" {
				want = unbounded(q, windowed)
			}
			if got := pages(q, false); !slices.Equal(got, want) {
				t.Errorf("%+v planned as %s: %d pages, want %d\n got %.300q\nwant %.300q", q, plan, len(got), len(want), got, want)
			}
			if plan == "walk alone" {
				continue
			}
			if got := pages(q, true); !slices.Equal(got, want) {
				t.Errorf("%+v planned as %s, sent in pairs: %d pages, want %d\n got %.300q\nwant %.300q", q, plan, len(got), len(want), got, want)
			}
		}
	}
}

// TestSearchFindsOldMatchesAsBboltDoes: a rare word's matches, and the
// matches of a search bounded by until, lie more than one page's windows
// of IDs below the newest message; the first page and its cursor are
// bbolt's: the rare word is read from its postings however far down they
// lead, with an owner or a time filter as without, and the windows of a
// search bounded by until start below it, not at the newest message.
func TestSearchFindsOldMatchesAsBboltDoes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clock := storetest.NewClock()
	bdb := openBolt(t, clock.Now).Store
	pdb, url := open(t, pg.Options{Now: clock.Now, TermStatsEvery: time.Hour})
	var owner *model.User
	for _, s := range []heraldhttp.Store{bdb, pdb} {
		u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
		if _, err := s.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		owner = u
		if _, err := s.CreateMessage(ctx, model.ByUser(u.ID), "needle in the haystack"); err != nil {
			t.Fatal(err)
		}
	}
	until := clock.Now().Add(500 * time.Millisecond)
	clock.Add(time.Second)
	total := int(pg.SearchSpan) + 2000
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if _, err := bdb.CreateMessage(ctx, model.ByUser(owner.ID), fmt.Sprint("filler ", i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	for start := 0; start < total; start += 500 {
		var by []model.Caller
		var contents []string
		for i := start; i < min(start+500, total); i++ {
			by = append(by, model.ByUser(owner.ID))
			contents = append(contents, fmt.Sprint("filler ", i))
		}
		if _, _, err := pdb.CreateBatch(ctx, by, contents); err != nil {
			t.Fatal(err)
		}
	}
	if err := pgtest.Exec(ctx, url, "ANALYZE messages"); err != nil {
		t.Fatal(err)
	}
	if ok, err := pdb.RefreshTermStats(ctx); err != nil || !ok {
		t.Fatalf("the terms' statistics after ANALYZE: %v, %v", ok, err)
	}
	for name, q := range map[string]model.SearchQuery{
		"a rare word":                {Terms: model.Terms("needle")},
		"a rare word by its owner":   {Terms: model.Terms("needle"), OwnerEmail: "ada@example.com"},
		"a rare word, until":         {Terms: model.Terms("haystack"), Until: &until},
		"a common word, until":       {Terms: model.Terms("filler"), Until: &until},
		"a common word by its owner": {Terms: model.Terms("filler"), OwnerEmail: "ada@example.com"},
	} {
		var got [2]string
		for i, s := range []heraldhttp.Store{bdb, pdb} {
			_, p, err := s.SearchMessages(ctx, model.ByServer(), q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var ids []uint64
			for _, m := range p.Messages {
				ids = append(ids, m.ID)
			}
			got[i] = fmt.Sprintf("%v next %d", ids, p.NextBeforeID)
		}
		if got[0] != got[1] {
			t.Errorf("%s: bbolt %s, PostgreSQL %s", name, got[0], got[1])
		}
	}
}

// TestSearchBudget builds the worst case for an intersection — two common
// words that never occur together but twice — on more messages than a
// page's windows span, and checks that a page gives up with a cursor
// rather than read every message, and that following the cursors still
// finds exactly the two.
func TestSearchBudget(t *testing.T) {
	db, url := open(t, pg.Options{})
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	n := 3 * pg.SearchSpan
	// Filled in SQL: a hundred thousand creates through the store would
	// take minutes. Terms as model.SortedTerms would give them.
	both := []int64{7, n - 100}
	if err := pgtest.Exec(ctx, url, `INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision)
		SELECT i, $1, convert_to(CASE WHEN i = ANY($3) THEN 'left right' WHEN i % 2 = 1 THEN 'right' ELSE 'left' END, 'UTF8'),
			CASE WHEN i = ANY($3) THEN ARRAY['left', 'right'] WHEN i % 2 = 1 THEN ARRAY['right'] ELSE ARRAY['left'] END,
			now(), now(), 1
		FROM generate_series(1, $2::bigint) i;
		`, int64(u.ID), n, both); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, url, `UPDATE change_counter SET message_id = $1, message_created = now()`, n); err != nil {
		t.Fatal(err)
	}
	if err := pgtest.Exec(ctx, url, `ANALYZE messages`); err != nil {
		t.Fatal(err)
	}
	// Written behind the store's back: it hears of the new messages as it
	// would of another instance's, when it next reads the head.
	if _, _, err := db.ChangeHead(ctx); err != nil {
		t.Fatal(err)
	}
	q := model.SearchQuery{Terms: model.Terms("left right")}
	var got []uint64
	pages := 0
	for {
		_, p, err := db.SearchMessages(ctx, model.ByServer(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range p.Messages {
			got = append(got, m.ID)
		}
		if p.NextBeforeID == 0 {
			break
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		q.BeforeID = p.NextBeforeID
	}
	if want := []uint64{uint64(n - 100), 7}; !slices.Equal(got, want) {
		t.Errorf("matches = %v, want %v", got, want)
	}
	if pages < 3 {
		t.Errorf("found in %d pages: one page read more than its %d IDs", pages, pg.SearchSpan)
	}
	// A client that goes away ends its search.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := db.SearchMessages(gone, model.ByServer(), model.SearchQuery{Terms: model.Terms("left right")}); !errors.Is(err, context.Canceled) {
		t.Errorf("search with its client gone = %v, want context.Canceled", err)
	}
	if _, _, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("left")}); err != nil {
		t.Errorf("search after a cancelled one = %v", err)
	}
}
