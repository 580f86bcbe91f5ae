package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

func TestTailRecord(t *testing.T) {
	terms := []string{"apple", "café", "river", strings.Repeat("x", 300)}
	rec := encodeTailRecord(terms)
	if got, ok := tailRecordTerms(rec); !ok || !slices.Equal(got, terms) {
		t.Fatalf("tailRecordTerms(encode(%q)) = %q, %v", terms, got, ok)
	}
	for _, tt := range []struct {
		term string
		want bool
	}{
		{"apple", true}, {"café", true}, {"river", true}, {strings.Repeat("x", 300), true},
		{"app", false}, {"apples", false}, {"banana", false}, {"a", false}, {"zebra", false}, {"", false},
		// Same first byte as a stored term, different after it.
		{"cafe", false}, {"caff", false}, {"rivet", false}, {"rive", false}, {"xx", false},
	} {
		if got := tailRecordHas(rec, []byte(tt.term)); got != tt.want {
			t.Errorf("tailRecordHas(%q) = %v, want %v", tt.term, got, tt.want)
		}
	}
	if tailRecordHas(nil, []byte("apple")) {
		t.Error("a missing record has no terms")
	}
	if tailRecordHas([]byte{0, 1, 'a'}, []byte("a")) != true || tailRecordHas([]byte{0}, []byte("a")) {
		t.Error("a damaged record with an empty term must be read past, not panic")
	}
	// Cut anywhere inside a term, a record is refused, never misread.
	for n := 1; n < len(rec); n++ {
		if got, ok := tailRecordTerms(rec[:n]); ok && !slices.Equal(got, terms[:len(got)]) {
			t.Errorf("tailRecordTerms(first %d bytes) = %q, accepted", n, got)
		}
	}
	if _, ok := tailRecordTerms([]byte{0}); ok {
		t.Error("a record with an empty term was accepted")
	}
}

// stopAfter is a context whose Err turns to Canceled after n calls: a merge
// checks it once per chunk, so it stops a merge after n chunks, as a crash
// or a shutdown would.
type stopAfter struct {
	context.Context
	n int
}

func (c *stopAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

func termsStateOf(t *testing.T, db *DB) termsState {
	t.Helper()
	var st termsState
	if err := db.bolt.View(func(tx *bbolt.Tx) error { st = readTermsState(tx); return nil }); err != nil {
		t.Fatal(err)
	}
	return st
}

// searchModel is what search must answer: every live message, by brute
// force over its content.
type searchModel map[uint64]*model.Message

func (m searchModel) want(q model.SearchQuery) []uint64 {
	var ids []uint64
	for id, msg := range m {
		if q.OwnerEmail != "" && msg.OwnerEmail != q.OwnerEmail {
			continue
		}
		terms := model.ContentTerms(msg.Content)
		if !slices.ContainsFunc(q.Terms, func(t string) bool { _, ok := terms[t]; return !ok }) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	slices.Reverse(ids)
	return ids
}

// searchAll follows a query's cursors to its end, three to a page.
func searchAll(t *testing.T, db *testDB, q model.SearchQuery) []uint64 {
	t.Helper()
	var ids []uint64
	q.Limit = 3
	for {
		p := mustSearch(t, db, q)
		ids = append(ids, pageIDs(p)...)
		if p.NextBeforeID == 0 {
			return ids
		}
		q.BeforeID = p.NextBeforeID
	}
}

var modelQueries = []model.SearchQuery{
	{Terms: model.Terms("apple")},
	{Terms: model.Terms("river")},
	{Terms: model.Terms("apple river")},
	{Terms: model.Terms("stone apple river")},
	{Terms: model.Terms("café")},       // one code point
	{Terms: model.Terms("cafe\u0301")}, // e + combining accent: the same word
	{Terms: model.Terms("zephyr")},
	{Terms: model.Terms("apple"), OwnerEmail: "bob@example.com"},
	{OwnerEmail: "ada@example.com"},
}

func checkModel(t *testing.T, db *testDB, ref searchModel, stage string) {
	t.Helper()
	for _, q := range modelQueries {
		if got, want := searchAll(t, db, q), ref.want(q); !slices.Equal(got, want) {
			st := termsStateOf(t, db.DB)
			t.Fatalf("%s (merged %d, merging to %d from %q): search %q owner %q = %v, want %v",
				stage, st.merged, st.mergingTo, st.nextTerm, q.Terms, q.OwnerEmail, got, want)
		}
	}
}

// TestTailMergeKeepsSearchExact runs creates, edits and deletes with
// merges of every extent in between — whole, cut after a few chunks, and
// finished by the merger of a reopened database — and after every step
// compares each query's every page with a brute-force answer.
func TestTailMergeKeepsSearchExact(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	db.merge.chunk = 3 // many chunks, so merges stop in many places
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	owners := []*model.User{ada, bob}
	words := []string{"apple", "river", "stone", "café", "CAFE\u0301", "moss", "zephyr", "Apple"}
	rng := rand.New(rand.NewPCG(6, 9))
	text := func() string {
		n := 1 + rng.IntN(5)
		var b strings.Builder
		for range n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteString(" ")
		}
		return b.String()
	}
	ref := make(searchModel)
	pick := func() *model.Message {
		ids := make([]uint64, 0, len(ref))
		for id := range ref {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ref[ids[rng.IntN(len(ids))]]
	}
	merges, cut := 0, 0
	for step := range 400 {
		var stage string
		switch r := rng.IntN(20); {
		case r < 9 || len(ref) < 3:
			owner := owners[rng.IntN(2)]
			m := mustCreateMessage(t, db, owner.ID, text())
			ref[m.ID] = m
			stage = fmt.Sprintf("step %d: created %d", step, m.ID)
		case r < 13:
			m, content := pick(), text()
			got, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(m.OwnerID), model.MessageUpdate{Content: &content}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref[m.ID] = got
			stage = fmt.Sprintf("step %d: edited %d", step, m.ID)
		case r < 15:
			m := pick()
			if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(m.OwnerID), nil); err != nil {
				t.Fatal(err)
			}
			delete(ref, m.ID)
			stage = fmt.Sprintf("step %d: deleted %d", step, m.ID)
		case r < 18:
			_, err := db.mergeTail(&stopAfter{Context: context.Background(), n: rng.IntN(4)})
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if err != nil {
				cut++
			} else {
				merges++
			}
			stage = fmt.Sprintf("step %d: merge (cut: %v)", step, err != nil)
		case r < 19:
			mergeAll(t, db.DB)
			merges++
			stage = fmt.Sprintf("step %d: merged all", step)
		default:
			reopen(t, db) // a merge cut short is finished by the new merger, in the background
			stage = fmt.Sprintf("step %d: reopened", step)
		}
		checkModel(t, db, ref, stage)
	}
	if merges < 20 || cut < 10 {
		t.Errorf("only %d merges and %d cut short: the test did not cover what it is for", merges, cut)
	}
	checkIndexes(t, db.DB)
}

// TestTailMergeSeesChangesMadeWhileItRuns edits and deletes messages after
// a merge has read the tail and before it copies: it must copy the words
// as they are when it copies, not as it read them.
func TestTailMergeSeesChangesMadeWhileItRuns(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	db.merge.chunk = 2
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m1 := mustCreateMessage(t, db, ada.ID, "apple river")
	m2 := mustCreateMessage(t, db, ada.ID, "apple stone")
	m3 := mustCreateMessage(t, db, ada.ID, "river stone")
	m4 := mustCreateMessage(t, db, ada.ID, "apple")
	db.merge.afterRead = func() {
		db.merge.afterRead = nil
		edit := func(m *model.Message, content string) {
			if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: &content}, nil); err != nil {
				t.Error(err)
			}
		}
		edit(m1, "river zebra")       // loses apple, gains zebra (before every chunk)
		edit(m3, "river stone apple") // gains apple
		if _, err := db.DeleteMessage(context.Background(), m2.ID, model.ByUser(ada.ID), nil); err != nil {
			t.Error(err)
		}
	}
	mergeAll(t, db.DB)
	if st := termsStateOf(t, db.DB); st.merged != m4.ID || st.mergingTo != 0 {
		t.Fatalf("after the merge: %+v, want everything merged", st)
	}
	for _, tt := range []struct {
		q    string
		want []uint64
	}{
		{"apple", []uint64{m4.ID, m3.ID}},
		{"zebra", []uint64{m1.ID}},
		{"stone", []uint64{m3.ID}},
		{"river", []uint64{m3.ID, m1.ID}},
	} {
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(tt.q)})); !slices.Equal(got, tt.want) {
			t.Errorf("search %q = %v, want %v", tt.q, got, tt.want)
		}
	}
	checkIndexes(t, db.DB)
}

// TestTailMergeResumesAfterRestart cuts a merge short, checks search
// answers the same while it is half done (with a change in between), and
// that the next Open finishes it by itself.
func TestTailMergeResumesAfterRestart(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	db.merge.chunk = 2
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	ref := make(searchModel)
	for i := range 12 {
		m := mustCreateMessage(t, db, ada.ID, []string{"apple river", "stone apple", "river moss", "café"}[i%4])
		ref[m.ID] = m
	}
	if _, err := db.mergeTail(&stopAfter{Context: context.Background(), n: 2}); !errors.Is(err, context.Canceled) {
		t.Fatalf("mergeTail(stopped after 2 chunks) = %v, want it cut short", err)
	}
	st := termsStateOf(t, db.DB)
	if st.mergingTo == 0 || len(st.nextTerm) == 0 {
		t.Fatalf("after a cut merge: %+v, want a merge under way", st)
	}
	checkModel(t, db, ref, "half merged")
	content := "moss only"
	m, err := db.UpdateMessage(context.Background(), 2, model.ByUser(ada.ID), model.MessageUpdate{Content: &content}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref[2] = m
	// model.Message 1's "apple" was copied by the first chunk.
	if _, err := db.DeleteMessage(context.Background(), 1, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}
	delete(ref, 1)
	checkModel(t, db, ref, "half merged, then changed")
	checkIndexes(t, db.DB)

	reopen(t, db)
	for deadline := time.Now().Add(10 * time.Second); termsStateOf(t, db.DB).mergingTo != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reopened database did not finish the interrupted merge")
		}
	}
	if st := termsStateOf(t, db.DB); st.merged != 12 {
		t.Errorf("after the resumed merge: merged through %d, want 12", st.merged)
	}
	checkModel(t, db, ref, "merge finished after reopening")
}

// TestTailMergesInTheBackground: once the tail holds TailMergePostings
// postings, the merger moves them into the terms bucket without being
// asked, and the tail in memory shrinks with it.
func TestTailMergesInTheBackground(t *testing.T) {
	path := t.TempDir() + "/herald.db"
	db, err := Open(path, Options{TailMergePostings: 20})
	if err != nil {
		t.Fatal(err)
	}
	tdb := &testDB{DB: db, Path: path}
	defer db.Close()
	ada, _ := mustCreateUser(t, tdb, "ada@example.com")
	for i := range 10 {
		mustCreateMessage(t, tdb, ada.ID, fmt.Sprintf("one two three w%d", i))
	}
	for deadline := time.Now().Add(10 * time.Second); termsStateOf(t, db).merged == 0 || db.tail.size() >= 20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("40 postings in a tail that merges at 20; merged through %d, %d left in memory", termsStateOf(t, db).merged, db.tail.size())
		}
	}
	if got := pageIDs(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms("two")})); len(got) != 10 {
		t.Errorf("search after the merge = %v, want all 10", got)
	}
	checkIndexes(t, db)
}

// TestSearchRetriesWhenTheTailMovedOn: a transaction older than the last
// merge must not read the tail in memory, which has forgotten what that
// merge moved; postingLists says so, and search starts a newer one.
func TestSearchRetriesWhenTheTailMovedOn(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m := mustCreateMessage(t, db, ada.ID, "apple")
	tx, err := db.bolt.Begin(false)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	mergeAll(t, db.DB) // tx still sees the message in the tail
	s := &searcher{db: db.DB, q: model.SearchQuery{Terms: model.Terms("apple")}}
	s.plan(tx)
	if _, err := s.postingLists(tx); !errors.Is(err, errStaleTail) {
		t.Errorf("postingLists in a transaction from before the merge = %v, want errStaleTail", err)
	}
	if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("apple")})); !slices.Equal(got, []uint64{m.ID}) {
		t.Errorf("search = %v, want [%d]", got, m.ID)
	}
}

// TestUpgradeFromLayout3 opens a file written by the release before the
// search index's tail (testdata/layout3.db) and checks it is upgraded once,
// with a log line, that search finds what it held, and that new messages
// go to the tail.
func TestUpgradeFromLayout3(t *testing.T) {
	path := fixtureCopy(t, "layout3.db")
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	db, err := Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatalf("Open(layout 3) = %v", err)
	}
	if !strings.Contains(log.String(), "upgraded to layout 4") || strings.Contains(log.String(), "layout 3:") {
		t.Errorf("log = %q, want one line for the upgrade from 3 to 4", log.String())
	}
	if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
		t.Errorf("CheckInvariants after the upgrade = %q, %v", problems, err)
	}
	if st := termsStateOf(t, db); st.merged != 5 || st.mergingTo != 0 {
		t.Errorf("after the upgrade: %+v, want everything through message 5 merged", st)
	}
	tdb := &testDB{DB: db, Path: path}
	for _, tt := range []struct {
		q    string
		want []uint64
	}{
		{"river", []uint64{5, 3}}, {"hello", []uint64{3, 1}}, {"edited", []uint64{2}},
		{"draft", []uint64{2}}, {"cafe\u0301", []uint64{5}}, {"deleted", nil},
	} {
		if got := pageIDs(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(tt.q)})); !slices.Equal(got, tt.want) {
			t.Errorf("search %q after the upgrade = %v, want %v", tt.q, got, tt.want)
		}
	}
	u, _, err := db.Authenticate(context.Background(), tokenHash("ada-token"))
	if err != nil {
		t.Fatalf("Authenticate(old token) = %v", err)
	}
	m := mustCreateMessage(t, tdb, u.ID, "the river again")
	if got := termEntries(t, tdb, m.ID); !slices.Equal(got, []string{ownerTerm(u.ID), "again", "river", "the"}) {
		t.Errorf("new message's tail record = %q", got)
	}
	if got := pageIDs(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms("river")})); !slices.Equal(got, []uint64{m.ID, 5, 3}) {
		t.Errorf("search river = %v, want [%d 5 3]", got, m.ID)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	db, err = Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if log.Len() != 0 {
		t.Errorf("second open logged %q, want nothing", log.String())
	}
	if got := pageIDs(mustSearch(t, &testDB{DB: db, Path: path}, model.SearchQuery{Terms: model.Terms("river")})); !slices.Equal(got, []uint64{m.ID, 5, 3}) {
		t.Errorf("search river after reopening = %v, want the tail rebuilt from disk", got)
	}
	mergeAll(t, db)
	if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
		t.Errorf("CheckInvariants after merging = %q, %v", problems, err)
	}
}

// TestSearchCountsTailReads: tail candidates whose word was edited away
// are read and rejected one by one; each read counts against the search's
// step budget like a seek, so such a word cannot make a search unbounded.
func TestSearchCountsTailReads(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	keep := mustCreateMessage(t, db, ada.ID, "apple pie")
	const stale = 300
	withoutSync(t, db, func() {
		for range stale {
			m := mustCreateMessage(t, db, ada.ID, "apple crumble")
			content := "plum crumble"
			if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: &content}, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
	s := &searcher{db: db.DB, q: model.SearchQuery{Terms: model.Terms("apple")}, limit: 20, page: &model.SearchPage{}}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		s.plan(tx)
		return s.walk(context.Background(), tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageIDs(s.page); !slices.Equal(got, []uint64{keep.ID}) {
		t.Errorf("search apple = %v, want [%d]", got, keep.ID)
	}
	if s.steps < stale {
		t.Errorf("search took %d steps past %d stale tail entries, want each counted", s.steps, stale)
	}
}

// manualMerges keeps the background merger to the default threshold, which
// these tests never reach, whatever HERALD_TEST_MERGE_POSTINGS says: they
// decide themselves what is merged when.
func manualMerges(t *testing.T) {
	t.Setenv("HERALD_TEST_MERGE_POSTINGS", "")
}

// BenchmarkTailRecordHas is the check a search makes of every candidate
// from the tail: a record of 25 words, sought for one it holds near the
// end and one it lacks.
func BenchmarkTailRecordHas(b *testing.B) {
	terms := model.SortedTerms("veteko pohadu fesajo feteha tekoko zigasa kobaba dulili bazidu fekove haveve apple " +
		"feliko bazipo kokoha mibajo vekoba nopodu fezite joziga fegadu linoru ziziga popote river")
	rec := encodeTailRecord(terms)
	river, rivet := []byte("river"), []byte("rivet")
	for b.Loop() {
		if !tailRecordHas(rec, river) || tailRecordHas(rec, rivet) {
			b.Fatal("wrong answer")
		}
	}
}

// TestTailIndexAdd: lists stay ascending and free of repeats whatever
// order IDs come in: new messages, a write retried after a rollback (the
// same ID again), an edit of an older message (an ID below the newest),
// and a dropped merge.
func TestTailIndexAdd(t *testing.T) {
	ti := newTailIndex(1 << 20)
	ti.add(1, []string{"a", "b"})
	ti.add(3, []string{"a"})
	ti.add(3, []string{"a", "c"}) // retried after a rollback
	ti.add(2, []string{"a", "c"}) // an edit of an older message
	ti.add(4, []string{"b", "c"})
	ti.add(4, []string{"b"}) // retried again
	ti.dropThrough(1)
	ti.add(5, []string{"a"})
	want := map[string][]uint64{"a": {2, 3, 5}, "b": {4}, "c": {2, 3, 4}}
	if !maps.EqualFunc(ti.terms, want, slices.Equal) {
		t.Errorf("terms = %v, want %v", ti.terms, want)
	}
	if got := ti.size(); got != 7 {
		t.Errorf("size = %d, want 7", got)
	}
}

// TestTailStress runs creates, edits, deletes, retention, an account
// purge, background merges (small threshold, small chunks) and merges cut
// short, all concurrently with searches whose answer is known:
// the stable messages are never changed, so every search for their words
// must return exactly them, whatever else is going on.
func TestTailStress(t *testing.T) {
	clk := &testClock{now: testEpoch}
	path := filepath.Join(t.TempDir(), "herald.db")
	db0, err := Open(path, Options{Now: clk.Now, TailMergePostings: 60})
	if err != nil {
		t.Fatal(err)
	}
	db := &testDB{DB: db0, Path: path, Clock: clk}
	db.merge.chunk = 5
	defer db.Close()
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	carol, carolTok := mustCreateUser(t, db, "carol@example.com")
	// Old messages, for retention to delete while everything runs.
	for i := range 200 {
		mustCreateMessage(t, db, bob.ID, fmt.Sprintf("common old w%d", i%7))
	}
	clk.Add(time.Hour)
	for i := range 150 {
		mustCreateMessage(t, db, carol.ID, fmt.Sprintf("common carol w%d", i%5))
	}
	var stable []uint64
	for i := range 60 {
		m := mustCreateMessage(t, db, ada.ID, fmt.Sprintf("stable common w%d", i%3))
		stable = append(stable, m.ID)
		for range 3 {
			mustCreateMessage(t, db, bob.ID, fmt.Sprintf("common churn w%d", i%4))
		}
	}
	slices.Reverse(stable)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(format, args...)
		}
		cancel()
	}
	// Churn: bob creates, edits, deletes.
	var churnMu sync.Mutex
	var churn []uint64
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			words := []string{"common", "churn", "w0", "w1", "w2", "w3", "zed", "yak"}
			text := func() string {
				var b strings.Builder
				for range 1 + rng.IntN(4) {
					b.WriteString(words[rng.IntN(len(words))] + " ")
				}
				return b.String()
			}
			for ctx.Err() == nil {
				switch r := rng.IntN(10); {
				case r < 5:
					m, err := db.CreateMessage(context.Background(), model.ByUser(bob.ID), text())
					if err != nil {
						fail("create: %v", err)
						return
					}
					churnMu.Lock()
					churn = append(churn, m.ID)
					churnMu.Unlock()
				case r < 8:
					churnMu.Lock()
					if len(churn) == 0 {
						churnMu.Unlock()
						continue
					}
					id := churn[rng.IntN(len(churn))]
					churnMu.Unlock()
					c := text()
					if _, err := db.UpdateMessage(context.Background(), id, model.ByUser(bob.ID), model.MessageUpdate{Content: &c}, nil); err != nil && !errors.Is(err, model.ErrNotFound) {
						fail("update: %v", err)
						return
					}
				default:
					churnMu.Lock()
					if len(churn) == 0 {
						churnMu.Unlock()
						continue
					}
					i := rng.IntN(len(churn))
					id := churn[i]
					churn = slices.Delete(churn, i, i+1)
					churnMu.Unlock()
					if _, err := db.DeleteMessage(context.Background(), id, model.ByUser(bob.ID), nil); err != nil && !errors.Is(err, model.ErrNotFound) {
						fail("delete: %v", err)
						return
					}
				}
			}
		}()
	}
	// Retention and an account purge, once each, while the rest runs.
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(300 * time.Millisecond)
		if _, err := db.DeleteMessagesBefore(context.Background(), testEpoch.Add(time.Minute)); err != nil {
			fail("retention: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
		if err := db.DeleteAccount(context.Background(), model.ByToken(carolTok)); err != nil {
			fail("delete account: %v", err)
		}
	}()
	// Merges cut short now and then.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		for ctx.Err() == nil {
			_, err := db.mergeTail(&stopAfter{Context: context.Background(), n: rng.IntN(5)})
			if err != nil && !errors.Is(err, context.Canceled) {
				fail("mergeTail: %v", err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
		}
	}()
	// Searches.
	search := func(q model.SearchQuery) ([]*model.Message, error) {
		var out []*model.Message
		for {
			_, p, err := db.SearchMessages(context.Background(), model.ByServer(), q)
			if err != nil {
				return nil, err
			}
			out = append(out, p.Messages...)
			if p.NextBeforeID == 0 {
				return out, nil
			}
			q.BeforeID = p.NextBeforeID
		}
	}
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qs := []model.SearchQuery{
				{Terms: model.Terms("stable common"), Limit: 7},
				{Terms: model.Terms("stable"), Limit: 3},
				{Terms: model.Terms("common stable"), OwnerEmail: "ada@example.com", Limit: 5},
			}
			for n := 0; ctx.Err() == nil; n++ {
				q := qs[(n+g)%len(qs)]
				got, err := search(q)
				if err != nil {
					fail("search %q: %v", q.Terms, err)
					return
				}
				ids := make([]uint64, len(got))
				for i, m := range got {
					ids[i] = m.ID
				}
				if !slices.Equal(ids, stable) {
					fail("search %q = %v, want %v", q.Terms, ids, stable)
					return
				}
				got, err = search(model.SearchQuery{Terms: model.Terms("common w1"), Limit: 11})
				if err != nil {
					fail("search common w1: %v", err)
					return
				}
				for _, m := range got {
					if _, ok := model.ContentTerms(m.Content)["w1"]; !ok {
						fail("search common w1 returned %d: %q", m.ID, m.Content)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		return
	}
	checkIndexes(t, db.DB)
	mergeAll(t, db.DB)
	checkIndexes(t, db.DB)
	st := termsStateOf(t, db.DB)
	t.Logf("merged through %d", st.merged)
}
