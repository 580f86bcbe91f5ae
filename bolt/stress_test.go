package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/model"
)

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
