package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
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

// termEntries lists the terms indexed for message id: its terms entries
// when a merge has reached it, its tail record when not.
func termEntries(t *testing.T, db *testDB, id uint64) []string {
	t.Helper()
	var got []string
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if id > readTermsState(tx).merged {
			got, _ = tailRecordTerms(tx.Bucket(bucketTermsTail).Get(itob(id)))
			return nil
		}
		var ids []uint64
		return tx.Bucket(bucketPostings).ForEach(func(k, v []byte) error {
			ids, _ = decodeBlock(ids[:0], btoi(k[len(k)-8:]), v)
			if _, found := slices.BinarySearch(ids, id); found {
				got = append(got, string(k[:len(k)-9]))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

func TestTermIndex(t *testing.T) {
	t.Run("CreateUpdateDelete", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		m := mustCreateMessage(t, db, ada.ID, "Hello, hello WORLD! Café")
		if got, want := termEntries(t, db, m.ID), []string{"@1", "café", "hello", "world"}; !slices.Equal(got, want) {
			t.Errorf("after create: terms = %q, want %q", got, want)
		}
		content := "world peace"
		if _, err := db.UpdateMessage(context.Background(), m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: &content}, nil); err != nil {
			t.Fatal(err)
		}
		if got, want := termEntries(t, db, m.ID), []string{"@1", "peace", "world"}; !slices.Equal(got, want) {
			t.Errorf("after update: terms = %q, want %q", got, want)
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("hello")})); len(got) != 0 {
			t.Errorf("search for a word the edit removed = %v, want nothing", got)
		}
		if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("PEACE")})), []uint64{m.ID}; !slices.Equal(got, want) {
			t.Errorf("search for a word the edit added = %v, want %v", got, want)
		}
		if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
		if got := termEntries(t, db, m.ID); len(got) != 0 {
			t.Errorf("after delete: terms = %q, want none", got)
		}
	})

	t.Run("NFCAndNFD", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		nfd := mustCreateMessage(t, db, ada.ID, "un cafe\u0301 noir")
		nfc := mustCreateMessage(t, db, ada.ID, "un CAFÉ crème")
		want := []uint64{nfc.ID, nfd.ID}
		for _, q := range []string{"café", "cafe\u0301", "CAFE\u0301", "Café"} {
			if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(q)})); !slices.Equal(got, want) {
				t.Errorf("search %q = %v, want %v", q, got, want)
			}
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms("cafe")})); len(got) != 0 {
			t.Errorf("search %q = %v, want nothing: the accent is part of the word", "cafe", got)
		}
	})

	t.Run("LongWords", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		// 10,000 four-byte letters: one word far beyond bbolt's key limit.
		huge := strings.Repeat("𝒜", model.MaxContentChars)
		m := mustCreateMessage(t, db, ada.ID, huge)
		if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(huge)})), []uint64{m.ID}; !slices.Equal(got, want) {
			t.Errorf("search for the whole long word = %v, want %v", got, want)
		}
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{Terms: model.Terms(huge[:400])})); len(got) != 0 {
			t.Errorf("search for a prefix of the long word = %v, want nothing", got)
		}
	})
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

// TestLongSearchesTakeTurns: a search past its first read transaction
// needs one of a few slots, so many costly searches cannot take every CPU
// from ordinary ones. The test holds every slot itself: a costly search
// then waits (until its client gives up), ordinary searches do not, and
// once a slot is free the costly one finishes with the same answer.
func TestLongSearchesTakeTurns(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string { return []string{"left", "right"}[i%2] }, 4*stepsPerTransaction)
	costly := model.SearchQuery{Terms: model.Terms("left right")}
	want := mustSearch(t, db, costly) // the words never meet: a walk over both lists
	if len(want.Messages) != 0 {
		t.Fatalf("costly search = %d messages, want none", len(want.Messages))
	}

	for range cap(db.turns.slots) {
		db.turns.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, _, err := db.SearchMessages(ctx, model.ByServer(), costly)
		waited <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if running, waiting := db.LongSearchLoad(); running == cap(db.turns.slots) && waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			running, waiting := db.LongSearchLoad()
			t.Fatalf("with every slot taken: %d running, %d waiting; want %d and 1", running, waiting, cap(db.turns.slots))
		}
	}
	cancel() // the client gives up
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Errorf("costly search with every slot taken = %v, want it to wait until its context ends", err)
	}
	if _, waiting := db.LongSearchLoad(); waiting != 0 {
		t.Errorf("%d searches still counted as waiting after the only one gave up", waiting)
	}
	for _, q := range []model.SearchQuery{{}, {Terms: model.Terms("left")}, {Terms: model.Terms("right"), OwnerEmail: "ada@example.com"}} {
		if p := mustSearch(t, db, q); len(p.Messages) != model.DefaultSearchLimit {
			t.Errorf("ordinary search %+v with every slot taken = %d messages, want %d", q, len(p.Messages), model.DefaultSearchLimit)
		}
	}

	<-db.turns.slots
	got := mustSearch(t, db, costly)
	if len(got.Messages) != 0 || got.NextBeforeID != want.NextBeforeID {
		t.Errorf("costly search with a slot free = %d messages, next %d; want none, next %d", len(got.Messages), got.NextBeforeID, want.NextBeforeID)
	}
	if n := len(db.turns.slots); n != cap(db.turns.slots)-1 {
		t.Errorf("%d slots taken after the search, want it to have given its own back (%d)", n, cap(db.turns.slots)-1)
	}
	for range cap(db.turns.slots) - 1 {
		<-db.turns.slots
	}
}

// TestLongSearchesTakeTurnsByAccount: an account's costly searches go one
// at a time, so another account's costly search waits behind one of them,
// not behind all of them. With one slot, Ada queues two costly searches,
// then Bob one: Bob's must run before Ada's second.
func TestLongSearchesTakeTurnsByAccount(t *testing.T) {
	db := mustOpen(t)
	ada, adaToken := mustCreateUser(t, db, "ada@example.com")
	bob, bobToken := mustCreateUser(t, db, "bob@example.com")
	// Enough that each search spends its whole budget and must take a turn.
	bulkMessages(t, db, []uint64{ada.ID}, 0, func(i int) string { return []string{"left", "right"}[i%2] }, 2*stepsPerPage)
	costly := model.SearchQuery{Terms: model.Terms("left right")}

	for range cap(db.turns.slots) { // every slot taken, until the searches are queued
		db.turns.slots <- struct{}{}
	}
	var mu sync.Mutex
	var turns []uint64 // accounts, in the order their searches got a slot
	db.turns.taken = func(account uint64) {
		mu.Lock()
		turns = append(turns, account)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	search := func(name string, token model.TokenHash, waiting int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := db.SearchMessages(context.Background(), model.ByToken(token), costly); err != nil {
				t.Errorf("%s's search: %v", name, err)
			}
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if _, w := db.LongSearchLoad(); w == waiting {
				return
			}
			if time.Now().After(deadline) {
				_, w := db.LongSearchLoad()
				t.Fatalf("after %s's search started %d wait, want %d", name, w, waiting)
			}
		}
	}
	search("Ada 1", adaToken, 1)
	search("Ada 2", adaToken, 2)
	search("Bob", bobToken, 3)
	<-db.turns.slots // one slot free
	wg.Wait()
	for range cap(db.turns.slots) - 1 {
		<-db.turns.slots
	}
	// Which of Ada's first and Bob's gets the slot first is the runtime's
	// choice; Ada's second only queues for a slot once her first is done,
	// behind Bob's, which is already queued (a channel serves its waiting
	// senders in order).
	if want := ada.ID; len(turns) != 3 || turns[2] != want || !slices.Contains(turns, bob.ID) {
		t.Errorf("searches got their slots in the order of accounts %v, want Ada's (%d) second one last, after Bob's (%d)", turns, ada.ID, bob.ID)
	}
	if running, waiting := db.LongSearchLoad(); running != 0 || waiting != 0 {
		t.Errorf("afterwards %d running and %d waiting, want none", running, waiting)
	}
	db.turns.mu.Lock()
	if n := len(db.turns.accounts); n != 0 {
		t.Errorf("%d accounts still have turns, want none", n)
	}
	db.turns.mu.Unlock()
}

func TestCreationTimeNeverFalls(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m1 := mustCreateMessage(t, db, ada.ID, "first")
	db.Clock.Add(-time.Hour) // the wall clock steps back
	m2 := mustCreateMessage(t, db, ada.ID, "second")
	if m2.CreatedAt.Before(m1.CreatedAt) {
		t.Errorf("second message created at %v, before the first at %v", m2.CreatedAt, m1.CreatedAt)
	}
	since := m1.CreatedAt
	if got, want := pageIDs(mustSearch(t, db, model.SearchQuery{Since: &since})), []uint64{m2.ID, m1.ID}; !slices.Equal(got, want) {
		t.Errorf("since the first message = %v, want %v", got, want)
	}
}

// TestFirstCreatedAtOrAfter compares the binary search that turns since
// and until into IDs with a scan of every message, for bounds at, between,
// before and after the messages' times, over IDs with gaps (deleted
// messages, the first and the last among them) and runs of messages
// created in the same microsecond.
func TestFirstCreatedAtOrAfter(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	var msgs []*model.Message
	for i, step := range []time.Duration{0, time.Second, 0, 0, time.Microsecond, time.Hour, 0, time.Millisecond, 3 * time.Second, 0, time.Microsecond, time.Minute, 0, time.Second} {
		db.Clock.Add(step)
		msgs = append(msgs, mustCreateMessage(t, db, ada.ID, fmt.Sprintf("message %d", i)))
	}
	for _, i := range []int{0, 4, 5, 9, len(msgs) - 1} {
		if _, err := db.DeleteMessage(context.Background(), msgs[i].ID, model.ByUser(ada.ID), nil); err != nil {
			t.Fatal(err)
		}
	}
	var bounds []time.Time
	for _, m := range msgs {
		for _, d := range []time.Duration{-time.Hour, -time.Microsecond, -time.Nanosecond, 0, time.Nanosecond, time.Microsecond} {
			bounds = append(bounds, m.CreatedAt.Add(d))
		}
	}
	bounds = append(bounds, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		for _, bound := range bounds {
			var want uint64 // a scan: the first stored message created at or after bound
			_ = tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
				if want == 0 && !microsToTime(createdMicros(v)).Before(bound) {
					want = btoi(k)
				}
				return nil
			})
			got, ok := firstCreatedAtOrAfter(tx.Bucket(bucketMessages).Cursor(), bound)
			if got != want || ok != (want != 0) {
				t.Errorf("firstCreatedAtOrAfter(%s) = %d, %v; a scan finds %d", bound.Format(time.RFC3339Nano), got, ok, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// And with no messages at all.
	for _, m := range msgs {
		_, _ = db.DeleteMessage(context.Background(), m.ID, model.ByUser(ada.ID), nil)
	}
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		if got, ok := firstCreatedAtOrAfter(tx.Bucket(bucketMessages).Cursor(), bounds[0]); ok {
			t.Errorf("firstCreatedAtOrAfter with no messages = %d, true; want none", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupCommit runs many concurrent writers and counts commits: they
// must share transactions (fewer commits than writes), every write must be
// on disk once it returned (reopen and look), and a writer refused inside a
// shared transaction must not undo the others — nor leave a change in the
// log, which holds one change per committed write, without a gap or a
// repeat, the same from memory and from disk.
func TestGroupCommit(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	victim := mustCreateMessage(t, db, ada.ID, "bob may not touch this")
	before := db.WriteStats()
	startHead, _, _ := db.ChangeHead(context.Background())

	const writers, perWriter = 32, 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []*model.Message
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if w%4 == 0 && i%2 == 0 {
					// Refused inside the transaction it shares with others.
					if _, err := db.DeleteMessage(context.Background(), victim.ID, model.ByUser(bob.ID), nil); !errors.Is(err, model.ErrForbidden) {
						t.Errorf("DeleteMessage(not owner) = %v, want ErrForbidden", err)
					}
					continue
				}
				m, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), fmt.Sprintf("writer %d message %d", w, i))
				if err != nil {
					t.Errorf("CreateMessage = %v", err)
					return
				}
				mu.Lock()
				created = append(created, m)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stats := db.WriteStats()
	commits, ops := stats.Commits-before.Commits, stats.Ops-before.Ops
	// With HERALD_TEST_MERGE_POSTINGS small, the search index's merges
	// are writes too.
	if ops != uint64(len(created)) && (testMergePostings() == 0 || ops < uint64(len(created))) {
		t.Errorf("committed writes = %d, want %d", ops, len(created))
	}
	if commits >= ops {
		t.Errorf("%d writes took %d commits; concurrent writers should share fsyncs", ops, commits)
	}
	t.Logf("%d writes in %d commits", ops, commits)

	isCreated := make(map[uint64]bool, len(created))
	for _, m := range created {
		isCreated[m.ID] = true
	}
	logged, head, err := db.ChangesAfter(context.Background(), startHead, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) != len(created) || head != startHead+uint64(len(created)) {
		t.Fatalf("%d changes up to head %d after %d creates from %d", len(logged), head, len(created), startHead)
	}
	for i, ch := range logged {
		if ch.Seq != startHead+uint64(i)+1 || ch.Kind != model.MessageCreated || !isCreated[ch.Message.ID] {
			t.Fatalf("change %d is %s: a gap, a repeat, or not one of the creates", i, changeString(ch))
		}
		delete(isCreated, ch.Message.ID)
	}

	// Reopen: everything acknowledged is there, and the log reads the same.
	reopen(t, db)
	for _, m := range append(created, victim) {
		got := mustMessage(t, db, m.ID)
		if got.Content != m.Content {
			t.Errorf("message %d after reopen = %q, want %q", m.ID, got.Content, m.Content)
		}
	}
	fromDisk, _, err := db.ChangesAfter(context.Background(), startHead, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if !equalStrings(changeStrings(fromDisk), changeStrings(logged)) {
		t.Error("the log read from disk differs from the one handed over in memory")
	}
}

// TestCheckInvariantsFindsTailMissingFromMemory: search finds tail messages
// through memory only, so a posting on disk that memory lacks is a message
// search cannot find.
func TestCheckInvariantsFindsTailMissingFromMemory(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m := mustCreateMessage(t, db, ada.ID, "hello world")
	db.tail.mu.Lock()
	delete(db.tail.terms, "world")
	db.tail.mu.Unlock()
	problems, err := db.CheckInvariants()
	want := fmt.Sprintf(`message %d: word "world" is in its tail record but not in the tail in memory`, m.ID)
	if err != nil || !slices.Contains(problems, want) {
		t.Errorf("CheckInvariants() = %q, %v; want %q", problems, err, want)
	}
	db.tail.add(m.ID, []string{"world"}) // repaired, so the cleanup check passes
}

func TestCheckInvariantsFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx *bbolt.Tx, m *model.Message) error
		want   string
		// inTail: damage done while message 1 is still in the search
		// index's tail; otherwise it has been merged first.
		inTail bool
	}{
		{"MissingTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Delete(itob(m.ID))
		}, "message 1: missing from the search index's tail", true},
		{"WrongTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello"}))
		}, `message 1: its tail record holds ["hello"], its terms are ["@1" "hello" "world"]`, true},
		{"MalformedTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), []byte{9, 'x'})
		}, "message 1: its tail record holds", true},
		{"TailRecordOfMissingMessage", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(7), encodeTailRecord([]string{"ghost"}))
		}, "terms_tail: a record of missing message 7", true},
		{"TailRecordBelowWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello", "world"}))
		}, "terms_tail: message 1 is at or below terms_merged 1", false},
		{"TermAboveWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, "hello", m.ID)
		}, `word "hello" of message 1, above terms_merged 0 and any merge`, true},
		{"WatermarkBeyondMessages", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(50))
		}, "meta/terms_merged 50 is beyond the highest message ID ever used, 1", false},
		{"MergeBelowWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaTermsMerging, mergingValue(1, nil))
		}, "meta/terms_merging: a merge through 1, which is not above terms_merged 1", false},
		{"DanglingTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, "ghost", m.ID)
		}, `term "ghost" points at message 1, which does not have it`, false},
		{"MissingTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return termBlocks(tx.Bucket(bucketPostings), []byte("hello")).remove(m.ID)
		}, `message 1: term "hello" missing from the search index`, false},
		{"TermOfMissingMessage", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(99)); err != nil {
				return err
			}
			return addPosting(tx, "hello", 99)
		}, `word "hello" points at missing message 99`, false},
		{"MalformedBlock", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), m.ID), []byte{0})
		}, `postings: the block of "hello" from message 1 is malformed`, false},
		{"OverlappingBlocks", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(9)); err != nil {
				return err
			}
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), 0), []byte{5})
		}, `postings: word "hello" has a block from message 1, at or below the 5 of the block before`, false},
		{"TouchingBlocks", func(tx *bbolt.Tx, m *model.Message) error { // message 1 in two blocks
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(9)); err != nil {
				return err
			}
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), 0), []byte{1})
		}, `postings: word "hello" has a block from message 1, at or below the 1 of the block before`, false},
		{"OversizedBlock", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("world"), m.ID), bytes.Repeat([]byte{1}, maxBlockBytes+1))
		}, `postings: the block of "world" from message 1 is 257 bytes`, false},
		{"MissingOwnerTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return termBlocks(tx.Bucket(bucketPostings), []byte(ownerTerm(m.OwnerID))).remove(m.ID)
		}, `message 1: term "@1" missing from the search index`, false},
		{"DanglingOwnerTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, ownerTerm(m.OwnerID+1), m.ID)
		}, `term "@2" points at message 1, which does not have it`, false},
		{"TailRecordWithoutOwner", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello", "world"}))
		}, `message 1: its tail record holds ["hello" "world"], its terms are ["@1" "hello" "world"]`, true},
		{"DanglingEmail", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketUsersByEmail).Put([]byte("ghost@example.com"), itob(77))
		}, `users_by_email["ghost@example.com"] points at missing user`, false},
		{"AdministratorNotListed", func(tx *bbolt.Tx, m *model.Message) error {
			u, err := userByID(tx, m.OwnerID)
			if err != nil {
				return err
			}
			u.Roles = append(u.Roles, model.RoleAdmin)
			return tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u))
		}, "user 1 holds ROLE_ADMIN but is not in the admins bucket", false},
		{"ListedAdministratorWithoutTheRole", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketAdmins).Put(itob(m.OwnerID), nil)
		}, "admins: user 1 does not hold ROLE_ADMIN", false},
		{"InviteWithoutItsCode", func(tx *bbolt.Tx, m *model.Message) error {
			inv := &model.Invite{ID: 1, MaxUses: 1, CodeHash: tokenHash("lost")}
			if err := tx.Bucket(bucketInvites).SetSequence(1); err != nil {
				return err
			}
			return tx.Bucket(bucketInvites).Put(itob(1), encodeInvite(inv))
		}, "invitation 1: invite_codes does not name it", false},
		{"ResetOfMissingUser", func(tx *bbolt.Tx, m *model.Message) error {
			code := tokenHash("orphan")
			if err := tx.Bucket(bucketUserResets).Put(itob(9), code[:]); err != nil {
				return err
			}
			return tx.Bucket(bucketResets).Put(code[:], encodeReset(&model.PasswordReset{UserID: 9}))
		}, "its user 9 does not exist", false},
		{"SuspendedWithTokens", func(tx *bbolt.Tx, m *model.Message) error {
			u, err := userByID(tx, m.OwnerID)
			if err != nil {
				return err
			}
			u.Suspended = true
			return tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u))
		}, "user 1 is suspended but holds 1 tokens", false},
		{"InviteOverused", func(tx *bbolt.Tx, m *model.Message) error {
			inv := &model.Invite{ID: 1, MaxUses: 1, Uses: 2, CodeHash: tokenHash("over")}
			if err := tx.Bucket(bucketInvites).SetSequence(1); err != nil {
				return err
			}
			if err := tx.Bucket(bucketInviteCodes).Put(inv.CodeHash[:], itob(1)); err != nil {
				return err
			}
			return tx.Bucket(bucketInvites).Put(itob(1), encodeInvite(inv))
		}, "invitation 1: used 2 times, more than its 1", false},
		{"PurgeMarkBeyondMessages", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPurging).Put(itob(m.OwnerID), itob(99))
		}, "purging: account 1 is marked up to message 99", false},
		{"MalformedAuditEntry", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketAudit).SetSequence(1); err != nil {
				return err
			}
			return tx.Bucket(bucketAudit).Put(itob(1), []byte{1, 2})
		}, "audit: decode audit entry 1", false},
		{"SequenceBehind", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMessages).SetSequence(0)
		}, "messages: sequence 0 is behind the highest ID 1", false},
		{"UpgradeLeftUnfinished", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaUpgradeNext, itob(1))
		}, "a layout upgrade was interrupted", false},
		{"DuplicateTokenID", func(tx *bbolt.Tx, m *model.Message) error {
			h := tokenHash("t")
			first, err := decodeToken(h, tx.Bucket(bucketTokens).Get(h[:]))
			if err != nil {
				return err
			}
			second := *first
			second.Hash = tokenHash("t2")
			return issueTokenRecord(tx, &second)
		}, "holds two tokens with the public ID", false},
		{"ChangeMissing", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChanges).Delete(itob(1))
		}, "changes 1 to 1 are missing from the log", false},
		{"ChangeGap", func(tx *bbolt.Tx, m *model.Message) error {
			log := tx.Bucket(bucketChanges)
			if err := log.Put(itob(3), log.Get(itob(1))); err != nil {
				return err
			}
			return log.SetSequence(3)
		}, "changes 2 to 2 are missing from the log", false},
		{"ChangeUndecodable", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChanges).Put(itob(1), []byte{9})
		}, "decode change 1: bad record", false},
		{"ChangeBelowFloor", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaChangesFloor, itob(1))
		}, "change 1: at or below the trimmed floor 1", false},
		{"FloorBeyondLog", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaChangesFloor, itob(5))
		}, "meta/changes_floor 5 is beyond the change log's sequence 1", false},
		{"OrphanMessage", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketUsers).Delete(itob(m.OwnerID))
		}, "message 1: its owner 1 does not exist", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.db")
			db, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			u := &model.User{Email: "ada@example.com", PasswordHash: fakePasswordHash}
			if _, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil); err != nil {
				t.Fatal(err)
			}
			m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), "hello world")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.inTail {
				mergeAll(t, db)
			}
			if problems, err := db.CheckInvariants(); err != nil || len(problems) != 0 {
				t.Fatalf("CheckInvariants() before damage = %q, %v; want none", problems, err)
			}
			if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tt.damage(tx, m) }); err != nil {
				t.Fatal(err)
			}
			problems, err := db.CheckInvariants()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("CheckInvariants() = %q, want a problem containing %q", problems, tt.want)
			}
		})
	}
}

// TestUpgradeFromLayout1 opens a file written by the first release (see
// testdata/layout1.db) and checks that it is upgraded once, with a log line,
// and that everything in it is then found through the new indexes.
func TestUpgradeFromLayout1(t *testing.T) {
	path := layout1Copy(t)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	db, err := Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatalf("Open(layout 1) = %v", err)
	}
	if !strings.Contains(log.String(), "upgrading database layout 1 to 2") || !strings.Contains(log.String(), "messages_indexed=5") {
		t.Errorf("log = %q, want an upgrade line and 5 messages indexed", log.String())
	}
	tdb := &testDB{DB: db, Path: path}
	checkIndexes(t, db)

	// Users were re-encoded and still authenticate with their old tokens.
	u, _, err := db.Authenticate(context.Background(), tokenHash("ada-2"))
	if err != nil || u.Email != "Ada@Example.com" || !u.HasRole(model.RoleUser) {
		t.Fatalf("Authenticate(old token) = %+v, %v", u, err)
	}
	search := func(q string) []string {
		p := mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(q)})
		var out []string
		for _, m := range p.Messages {
			out = append(out, m.Content)
		}
		return out
	}
	for q, want := range map[string][]string{
		"hello":    {"Bob says hello too", "hello world from Ada"},
		"café":     {"cafe\u0301 au lait, NFD spelling"},
		"edited":   {"edited text after the change"},
		"original": nil,
		"deleted":  nil,
		"日本語":      {"Ünïcödé 日本語 mixed words"},
	} {
		if got := search(q); !slices.Equal(got, want) {
			t.Errorf("search %q after upgrade = %q, want %q", q, got, want)
		}
	}
	if p := mustSearch(t, tdb, model.SearchQuery{OwnerEmail: "bob@example.org"}); len(p.Messages) != 2 {
		t.Errorf("owner search after upgrade = %d messages, want 2", len(p.Messages))
	}
	// New writes go on from the old sequences.
	m := mustCreateMessage(t, tdb, u.ID, "after the upgrade")
	if got, want := m.ID, uint64(7); got != want {
		t.Errorf("first new message ID = %d, want %d", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The second open finds layout 2 and does nothing.
	log.Reset()
	db, err = Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if log.Len() != 0 {
		t.Errorf("second open logged %q, want nothing", log.String())
	}
	checkIndexes(t, db)
}

// TestUpgradeFromLayout1BegunByAnOlderRelease finishes an upgrade from
// layout 1 that the previous release (layout 4, a key per posting in the
// terms bucket) was cut short in after two messages. Finishing it into
// the postings bucket left the first two in terms, which the upgrade to
// layout 5 then packed over the rest: every word of the others was lost.
func TestUpgradeFromLayout1BegunByAnOlderRelease(t *testing.T) {
	path := layout1Copy(t)
	updateFile(t, path, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMsgsByOwner, bucketMsgsByTime, bucketTerms, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		c := tx.Bucket(bucketMessages).Cursor()
		k, v := c.First()
		for range 2 {
			m, err := decodeMessage(btoi(k), v)
			if err != nil {
				return err
			}
			if err := indexOwnerAndTime(tx, m); err != nil {
				return err
			}
			for _, term := range model.SortedTerms(m.Content) {
				if err := tx.Bucket(bucketTerms).Put(postingKey([]byte(term), m.ID), nil); err != nil {
					return err
				}
			}
			k, v = c.Next()
		}
		return tx.Bucket(bucketMeta).Put(metaUpgradeNext, bytes.Clone(k))
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkIndexes(t, db)
	tdb := &testDB{DB: db, Path: path}
	for q, want := range map[string]int{"hello": 2, "café": 1, "edited": 1, "日本語": 1} {
		if got := len(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(q)}).Messages); got != want {
			t.Errorf("search %q after the upgrade: %d messages, want %d", q, got, want)
		}
	}
}

func TestOpenRefusesNewerLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaLayout, itob(currentLayout+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "newer Herald") {
		t.Errorf("Open(layout %d) = %v, want an error naming a newer Herald", currentLayout+1, err)
	}
}

// Writes made with a token check it inside their own transaction: once a
// revocation or expiry has happened, no write made with it completes.
func TestWritesRecheckToken(t *testing.T) {
	db := mustOpen(t)
	ada, adaToken := mustCreateUser(t, db, "ada@example.com")
	m, err := db.CreateMessage(context.Background(), model.ByToken(adaToken), "mine")
	if err != nil || m.OwnerID != ada.ID {
		t.Fatalf("CreateMessage(model.ByToken) = %+v, %v", m, err)
	}
	content := "edited"
	writes := map[string]func(model.Caller) error{
		"Create": func(by model.Caller) error { _, err := db.CreateMessage(context.Background(), by, "x"); return err },
		"Update": func(by model.Caller) error {
			_, err := db.UpdateMessage(context.Background(), m.ID, by, model.MessageUpdate{Content: &content}, nil)
			return err
		},
		"Delete": func(by model.Caller) error {
			_, err := db.DeleteMessage(context.Background(), m.ID, by, nil)
			return err
		},
	}
	expiring := tokenHash("short-lived")
	if _, err := db.CreateToken(ada.ID, expiring, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(context.Background(), adaToken); err != nil {
		t.Fatal(err)
	}
	db.Clock.Add(time.Minute)
	for name, write := range writes {
		for _, token := range []model.TokenHash{adaToken, expiring, tokenHash("never issued")} {
			if err := write(model.ByToken(token)); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("%s with a dead token = %v, want ErrUnauthorized", name, err)
			}
		}
	}
	if got := mustMessage(t, db, m.ID); got.Content != "mine" {
		t.Errorf("message after refused writes = %q, want it unchanged", got.Content)
	}
	if got, want := mustCounts(t, db).Messages, 1; got != want {
		t.Errorf("messages = %d, want %d", got, want)
	}
}

// TestCommitterCloseRace closes the database while writers are queueing:
// every write either commits or gets an error, and nothing panics.
func TestCommitterCloseRace(t *testing.T) {
	for range 20 {
		path := filepath.Join(t.TempDir(), "race.db")
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		u := &model.User{Email: "ada@example.com", PasswordHash: fakePasswordHash}
		if _, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), "racing the close"); err != nil {
						return
					}
				}
			}()
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}

// TestWritePanicIsAnError: a panic inside a write function fails that write
// only; the committer, and the writes sharing its transaction, go on.
func TestWritePanicIsAnError(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	err := db.writes.update(func(*bbolt.Tx) error { panic("boom") })
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("update(panicking) = %v, want an error naming the panic", err)
	}
	mustCreateMessage(t, db, ada.ID, "the committer still works")
}

// TestUpgradeClampsCreationTimes: a layout-1 file whose clock stepped back
// (a message created "before" an older one) is upgraded so that creation
// times never fall as IDs rise, and time-bounded search finds every
// message; until then, CheckInvariants reports it.
func TestUpgradeClampsCreationTimes(t *testing.T) {
	path := layout1Copy(t)
	// model.Message 3 of the fixture goes back an hour, as a clock step would.
	var second time.Time
	updateFile(t, path, func(tx *bbolt.Tx) error {
		msgs := tx.Bucket(bucketMessages)
		m2, err := decodeMessage(2, msgs.Get(itob(2)))
		if err != nil {
			return err
		}
		second = m2.CreatedAt
		m3, err := decodeMessage(3, msgs.Get(itob(3)))
		if err != nil {
			return err
		}
		m3.CreatedAt = m3.CreatedAt.Add(-time.Hour)
		return msgs.Put(itob(3), encodeMessage(m3))
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkIndexes(t, db)
	_, m3, err := db.Message(context.Background(), model.ByServer(), 3)
	if err != nil || m3.CreatedAt.Before(second) {
		t.Fatalf("message 3 after the upgrade: %v, %v; want created no earlier than message 2 (%v)", m3, err, second)
	}
	_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Since: &second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pageIDs(page), 3) {
		t.Errorf("since message 2 = %v, want message 3 among them", pageIDs(page))
	}
	// And the checker sees a time that falls.
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		m3.CreatedAt = second.Add(-time.Minute)
		return tx.Bucket(bucketMessages).Put(itob(3), encodeMessage(m3))
	}); err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckInvariants()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "message 3: created at") }) {
		t.Errorf("CheckInvariants() = %q, want the falling creation time reported", problems)
	}
}

// addPosting adds one posting as a merge or an edit would.
func addPosting(tx *bbolt.Tx, term string, id uint64) error {
	return termBlocks(tx.Bucket(bucketPostings), []byte(term)).add([]uint64{id})
}

// layout1Copy copies testdata/layout1.db, written by the first release, to
// a temporary file a test may upgrade or damage.
func layout1Copy(t *testing.T) string { return fixtureCopy(t, "layout1.db") }

// fixtureCopy copies testdata/name to a temporary file a test may change.
func fixtureCopy(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// updateFile changes the file at path in one bbolt transaction, below
// Herald's Open: to write what an older release or a crash left.
func updateFile(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	raw, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(raw.Update(fn), raw.Close()); err != nil {
		t.Fatal(err)
	}
}

// issueTokenRecord stores t as it is, public ID included, for tests that
// need a record issueToken would never write.
func issueTokenRecord(tx *bbolt.Tx, t *model.Token) error {
	if err := tx.Bucket(bucketTokens).Put(t.Hash[:], encodeToken(t)); err != nil {
		return err
	}
	return tx.Bucket(bucketTokensByUser).Put(compositeKey(t.UserID, t.Hash[:]), nil)
}

// TestGrowingBucketsFillTheirPages: the buckets that grow at their end
// keep their leaves nearly full (bbolt's default split leaves them half
// empty for good), through creates from concurrent writers and a merge of
// the search index's tail.
func TestGrowingBucketsFillTheirPages(t *testing.T) {
	// A merge of a few dozen postings, as CI's second pass makes them,
	// inserts as good as at random: this is about merges of a full tail,
	// which the test makes itself.
	t.Setenv("HERALD_TEST_MERGE_POSTINGS", "")
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	words := strings.Fields("apple river stone cloud ember field grove harbor island juniper kettle lantern meadow")
	create := func(writers, each int) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(each)))
				for range each {
					var content []string
					for range 6 {
						content = append(content, words[rng.IntN(len(words))])
					}
					owner := ada.ID
					if rng.IntN(2) == 0 {
						owner = bob.ID
					}
					if _, err := db.CreateMessage(context.Background(), model.ByUser(owner), strings.Join(content, " ")+fmt.Sprintf(" w%dn%d", w, rng.IntN(1000))); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	create(16, 150)
	mergeAll(t, db.DB)
	create(16, 100)

	err := db.bolt.View(func(tx *bbolt.Tx) error {
		for _, tc := range []struct {
			buckets [][]byte
			least   float64
		}{{appendOnlyBuckets, 0.9}, {mostlyAppendBuckets, 0.8}} {
			for _, name := range tc.buckets {
				st := tx.Bucket(name).Stats()
				if st.KeyN == 0 {
					t.Logf("%s: not written by this workload", name)
					continue
				}
				if st.LeafPageN < 4 {
					t.Errorf("%s: %d leaves, too few to judge", name, st.LeafPageN)
					continue
				}
				used := float64(st.LeafInuse) / float64(st.LeafAlloc)
				t.Logf("%s: %d leaves, %.0f%% used", name, st.LeafPageN, 100*used)
				if used < tc.least {
					t.Errorf("%s: leaves %.0f%% used, want at least %.0f%%", name, 100*used, 100*tc.least)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
