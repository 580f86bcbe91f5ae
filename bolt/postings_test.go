package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// openPostings opens a bare bbolt file with an empty postings bucket.
func openPostings(t *testing.T) *bbolt.DB {
	t.Helper()
	b, err := bbolt.Open(filepath.Join(t.TempDir(), "postings.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucket(bucketPostings)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return b
}

// blocksOf reads every block of term, checking the shape CheckInvariants
// checks: keys name the first ID, IDs rise within and across blocks, and
// no block is over maxBlockBytes.
func blocksOf(t *testing.T, tx *bbolt.Tx, term string) [][]uint64 {
	t.Helper()
	p := termBlocks(tx.Bucket(bucketPostings), []byte(term))
	var blocks [][]uint64
	c := tx.Bucket(bucketPostings).Cursor()
	for k, v := c.Seek(p.prefix); k != nil && bytes.HasPrefix(k, p.prefix); k, v = c.Next() {
		first, ok := p.firstOf(k)
		if !ok {
			t.Fatalf("key %x is not %q‖0‖first", k, term)
		}
		ids, ok := decodeBlock(nil, first, v)
		if !ok {
			t.Fatalf("block %d of %q is malformed", first, term)
		}
		if len(v) > maxBlockBytes {
			t.Errorf("block %d of %q is %d bytes", first, term, len(v))
		}
		if n := len(blocks); n > 0 && blocks[n-1][len(blocks[n-1])-1] >= first {
			t.Errorf("block %d of %q starts at or below the end of the one before, %v", first, term, blocks[n-1])
		}
		blocks = append(blocks, ids)
	}
	return blocks
}

func TestPostingBlocks(t *testing.T) {
	// A run of n IDs from start, step apart.
	run := func(start, step uint64, n int) []uint64 {
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = start + uint64(i)*step
		}
		return ids
	}
	type op struct {
		add    []uint64
		remove uint64
	}
	tests := []struct {
		name string
		ops  []op
		want [][]uint64 // the blocks after
	}{
		{"OneID", []op{{add: []uint64{7}}}, [][]uint64{{7}}},
		{"AppendsToTheLastBlock", []op{{add: []uint64{1, 2}}, {add: []uint64{5, 9}}}, [][]uint64{{1, 2, 5, 9}}},
		{"AddTwiceKeepsOne", []op{{add: []uint64{1, 2, 3}}, {add: []uint64{2, 3}}}, [][]uint64{{1, 2, 3}}},
		{"InsertsInTheMiddle", []op{{add: []uint64{1, 9}}, {add: []uint64{4}}}, [][]uint64{{1, 4, 9}}},
		{"BelowTheFirstBlockIsANewBlock", []op{{add: []uint64{10, 11}}, {add: []uint64{3, 4}}}, [][]uint64{{3, 4}, {10, 11}}},
		{"FullBlockSplits", []op{{add: run(1, 1, maxBlockBytes+1)}, {add: []uint64{1000}}},
			[][]uint64{run(1, 1, maxBlockBytes+1), {1000}}},
		// Two-byte gaps: half as many IDs to a block.
		{"WideGapsFillFewer", []op{{add: run(1, 200, 200)}}, [][]uint64{run(1, 200, maxBlockBytes/2+1), run(1+200*uint64(maxBlockBytes/2+1), 200, 200-(maxBlockBytes/2+1))}},
		{"InsertIntoAFullBlockSplitsIt", []op{{add: run(2, 2, maxBlockBytes+1)}, {add: []uint64{3}}},
			[][]uint64{append([]uint64{2, 3}, run(4, 2, maxBlockBytes-1)...), {2 + 2*maxBlockBytes}}},
		{"RemoveMiddle", []op{{add: []uint64{1, 2, 3}}, {remove: 2}}, [][]uint64{{1, 3}}},
		{"RemoveFirstRekeys", []op{{add: []uint64{1, 2, 3}}, {remove: 1}}, [][]uint64{{2, 3}}},
		{"RemoveLastOfABlockDropsIt", []op{{add: []uint64{5}}, {add: []uint64{1}}, {remove: 5}}, [][]uint64{{1}}},
		{"RemoveAbsent", []op{{add: []uint64{1, 3}}, {remove: 2}, {remove: 9}, {remove: 0}}, [][]uint64{{1, 3}}},
		{"AcrossBlocks", []op{{add: []uint64{10, 20}}, {add: []uint64{1}}, {add: []uint64{2, 15, 30}}}, [][]uint64{{1, 2}, {10, 15, 20, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := openPostings(t)
			err := b.Update(func(tx *bbolt.Tx) error {
				p := termBlocks(tx.Bucket(bucketPostings), []byte("word"))
				for _, o := range tt.ops {
					var err error
					if o.add != nil {
						err = p.add(o.add)
					} else {
						err = p.remove(o.remove)
					}
					if err != nil {
						return err
					}
				}
				if got := blocksOf(t, tx, "word"); !slices.EqualFunc(got, tt.want, slices.Equal) {
					t.Errorf("blocks = %v\nwant     %v", got, tt.want)
				}
				// Its neighbours in the bucket are untouched.
				if got := blocksOf(t, tx, "wor"); len(got) != 0 {
					t.Errorf("blocks of a prefix of the word = %v", got)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPostingBlocksAgainstASet adds and removes random IDs in three words
// (one a prefix of another) and compares every word's blocks with a plain
// set after every step, and seekAtMost with a search of the set.
func TestPostingBlocksAgainstASet(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := openPostings(t)
	words := []string{"ab", "abc", "b"}
	ref := map[string]map[uint64]bool{}
	for _, w := range words {
		ref[w] = map[uint64]bool{}
	}
	for step := range 300 {
		w := words[rng.IntN(len(words))]
		err := b.Update(func(tx *bbolt.Tx) error {
			p := termBlocks(tx.Bucket(bucketPostings), []byte(w))
			switch rng.IntN(4) {
			case 0: // remove one that is there, or might not be
				id := uint64(rng.IntN(3000))
				delete(ref[w], id)
				return p.remove(id)
			default: // a merge's run above, or a few anywhere (edits)
				n, lo := 1+rng.IntN(400), uint64(rng.IntN(3000))
				if rng.IntN(2) == 0 {
					n = 1 + rng.IntN(3)
				}
				set := map[uint64]bool{}
				for range n {
					set[lo+uint64(rng.IntN(600))] = true
				}
				ids := slices.Sorted(func(yield func(uint64) bool) {
					for id := range set {
						if !yield(id) {
							return
						}
					}
				})
				for _, id := range ids {
					ref[w][id] = true
				}
				return p.add(ids)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		err = b.View(func(tx *bbolt.Tx) error {
			for _, w := range words {
				want := slices.Sorted(func(yield func(uint64) bool) {
					for id := range ref[w] {
						if !yield(id) {
							return
						}
					}
				})
				if got := slices.Concat(blocksOf(t, tx, w)...); !slices.Equal(got, want) && len(got)+len(want) > 0 {
					t.Fatalf("step %d: %q holds %v\nwant %v", step, w, got, want)
				}
				checkSeekAtMost(t, tx, w, want, rng)
				for range 50 {
					id := uint64(rng.IntN(3700))
					if rng.IntN(2) == 0 && len(want) > 0 {
						id = want[rng.IntN(len(want))]
					}
					if got, err := termBlocks(tx.Bucket(bucketPostings), []byte(w)).has(id); err != nil || got != ref[w][id] {
						t.Fatalf("step %d: %q has(%d) = %v, %v; want %v", step, w, id, got, err, ref[w][id])
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkSeekAtMost walks the word's list down as a search does, with
// jumps short and long, and compares every answer with the sorted IDs.
func checkSeekAtMost(t *testing.T, tx *bbolt.Tx, word string, ids []uint64, rng *rand.Rand) {
	t.Helper()
	p := newPostingList(tx.Bucket(bucketPostings).Cursor(), termPrefix([]byte(word)))
	p.blocks = true
	for q := uint64(3700); ; {
		got, ok := p.seekAtMost(q)
		i, found := slices.BinarySearch(ids, q)
		if !found {
			i--
		}
		if want := i >= 0; ok != want || (ok && got != ids[i]) {
			t.Fatalf("%q: seekAtMost(%d) = %d, %v; want %v of %v", word, q, got, ok, want, ids)
		}
		if !ok || got == 0 {
			return
		}
		switch rng.IntN(5) {
		case 0:
			q = got - 1
		case 1:
			q = got - min(got, uint64(1+rng.IntN(20)))
		case 2:
			// The walk asks again for what it has, or for a little more
			// than the last answer when another list held it back.
			q = got + uint64(rng.IntN(3))
		case 3:
			q = got + uint64(rng.IntN(40))
		default:
			q = got - min(got, uint64(1+rng.IntN(1500)))
		}
		if q == 0 && got > 1 {
			q = 1
		}
		if p.err != nil {
			t.Fatal(p.err)
		}
	}
}

// TestMergePacksPostings: a merge writes each word's IDs as a few blocks,
// not a key per posting, and a search reads them back through them.
func TestMergePacksPostings(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	const n = 1000
	withoutSync(t, db, func() {
		for i := range n {
			mustCreateMessage(t, db, ada.ID, fmt.Sprintf("apple number%d", i%7))
		}
	})
	mergeAll(t, db.DB)
	var keys, apple int
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		keys = tx.Bucket(bucketPostings).Stats().KeyN
		apple = len(blocksOf(t, tx, "apple"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 2,000 postings: apple's 1,000 IDs are a byte apart, so four blocks;
	// number0..number6 one or two each.
	if apple > n/maxBlockBytes+1 || keys > 4*n/maxBlockBytes+14 {
		t.Errorf("after merging %d messages: %d blocks of apple, %d keys in all; want a few blocks a word", n, apple, keys)
	}
	page := mustSearch(t, db, model.SearchQuery{Terms: model.Terms("apple number3"), Limit: 100})
	if len(page.Messages) != 100 || page.Messages[0].ID != 998 || page.Messages[99].ID != 998-99*7 {
		t.Errorf("search apple number3 = %v, want 100 from 998 down by 7", pageIDs(page))
	}
}

func BenchmarkPostingsAppend(b *testing.B) {
	// A merge's share for one word: 64 new IDs onto a word with a few
	// blocks already.
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "p.db"), 0o600, &bbolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.Begin(true)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	bucket, _ := tx.CreateBucket(bucketPostings)
	p := termBlocks(bucket, []byte("apple"))
	next := uint64(1)
	ids := make([]uint64, 64)
	for b.Loop() {
		for i := range ids {
			next += 3
			ids[i] = next
		}
		if err := p.add(ids); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUpgradeFromLayout4 opens a file written by the release that kept a
// key per posting (testdata/layout4.db: messages 1–6 merged, 3 edited and
// 4 deleted since; 7–9 in the tail; a merge of them stopped, as a crash
// leaves it, after copying the words before "m") with a partial postings
// bucket beside it, as an upgrade cut short leaves it. The upgrade packs
// the postings once, with a log line; the interrupted merge then finishes.
func TestUpgradeFromLayout4(t *testing.T) {
	manualMerges(t)
	path := fixtureCopy(t, "layout4.db")
	updateFile(t, path, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bucketPostings)
		if err != nil {
			return err
		}
		return b.Put(postingKey([]byte("ghost"), 1), nil)
	})

	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	db, err := Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatalf("Open(layout 4) = %v", err)
	}
	if !strings.Contains(log.String(), "upgraded to layout 5") || strings.Contains(log.String(), "upgraded to layout 4") {
		t.Errorf("log = %q, want one line for the upgrade from 4 to 5", log.String())
	}
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(metaLayout); btoi(v) != currentLayout {
			t.Errorf("layout after the upgrade = %d, want %d", btoi(v), currentLayout)
		}
		if tx.Bucket(bucketTerms) != nil {
			t.Error("the terms bucket is still there")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tdb := &testDB{DB: db, Path: path}
	searches := []struct {
		q    string
		want []uint64
	}{
		{"hello", []uint64{6, 1}}, {"apple", []uint64{7, 6, 2}}, {"river", []uint64{8, 5, 2}},
		{"edited", []uint64{9, 3}}, {"draft", []uint64{3}}, {"deleted", nil}, {"edit", nil},
		{"cafe\u0301", []uint64{5}}, {"tail", []uint64{9, 8, 7}}, {"zebra", []uint64{9, 6}},
		{"ghost", nil}, {"hello apple", []uint64{6}},
	}
	checkSearches := func(when string) {
		t.Helper()
		for _, tt := range searches {
			if got := pageIDs(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(tt.q)})); !slices.Equal(got, tt.want) {
				t.Errorf("%s: search %q = %v, want %v", when, tt.q, got, tt.want)
			}
		}
		if problems, err := db.CheckInvariants(); err != nil || len(problems) > 0 {
			t.Errorf("%s: CheckInvariants = %q, %v", when, problems, err)
		}
	}
	checkSearches("after the upgrade")
	mergeAll(t, db) // the interrupted merge, if Open's merger has not finished it
	if st := termsStateOf(t, db); st.merged != 9 || st.mergingTo != 0 {
		t.Errorf("after merging: %+v, want everything through message 9 merged", st)
	}
	checkSearches("after the merge")
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
	tdb.DB = db
	checkSearches("after reopening")
}

// TestUpgradeFromLayout4InManyTransactions packs more postings than one
// upgrade transaction takes, so the upgrade resumes from where each one
// stopped; every posting must arrive exactly once.
func TestUpgradeFromLayout4InManyTransactions(t *testing.T) {
	manualMerges(t)
	path := fixtureCopy(t, "layout4.db")
	want := map[string][]uint64{}
	total := 0
	updateFile(t, path, func(tx *bbolt.Tx) error {
		terms := tx.Bucket(bucketTerms)
		if err := terms.ForEach(func(k, _ []byte) error {
			term := string(k[:len(k)-9])
			want[term] = append(want[term], btoi(k[len(k)-8:]))
			total++
			return nil
		}); err != nil {
			return err
		}
		// Words with tens of thousands of postings each, of IDs no message
		// has: the upgrade copies keys, it does not look at messages.
		for w := range 5 {
			term := fmt.Sprintf("bulk%d", w)
			for i := range 40000 + 7*w {
				id := uint64(1000 + i*(w+1))
				if err := terms.Put(postingKey([]byte(term), id), nil); err != nil {
					return err
				}
				want[term] = append(want[term], id)
				total++
			}
		}
		return nil
	})
	if total <= 2*upgradeChunk*16 {
		t.Fatalf("%d postings fit in two upgrade transactions; the test needs three", total)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got := map[string][]uint64{}
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPostings).ForEach(func(k, v []byte) error {
			term := string(k[:len(k)-9])
			var ok bool
			if got[term], ok = decodeBlock(got[term], btoi(k[len(k)-8:]), v); !ok {
				return fmt.Errorf("block %q is malformed", k)
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for term, ids := range want {
		if !slices.Equal(got[term], ids) {
			t.Errorf("%q: %d postings after the upgrade, want %d", term, len(got[term]), len(ids))
		}
	}
	for term := range got {
		// Owner terms come from the upgrade to layout 6, which its own
		// tests check.
		if want[term] == nil && !strings.HasPrefix(term, "@") {
			t.Errorf("%q: in the postings bucket, not in the terms bucket", term)
		}
	}
}

// TestSearchReportsAMalformedBlock: a search that meets a damaged block
// fails rather than answer with the matches it found before it.
func TestSearchReportsAMalformedBlock(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	for i := range 300 {
		mustCreateMessage(t, db, ada.ID, fmt.Sprintf("hello number %d", i))
	}
	mergeAll(t, db.DB)
	var damaged, was []byte
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		// The oldest of hello's blocks, so the walk finds matches first.
		k, v := tx.Bucket(bucketPostings).Cursor().Seek(termPrefix([]byte("hello")))
		damaged, was = bytes.Clone(k), bytes.Clone(v)
		return tx.Bucket(bucketPostings).Put(damaged, []byte{0})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before mustOpen's check of the whole file
		if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketPostings).Put(damaged, was) }); err != nil {
			t.Error(err)
		}
	})
	q := model.SearchQuery{Terms: model.Terms("hello"), Limit: 100}
	for {
		_, p, err := db.SearchMessages(context.Background(), model.ByServer(), q)
		if err != nil {
			if !strings.Contains(err.Error(), "malformed") {
				t.Errorf("search error = %v, want one naming the malformed block", err)
			}
			return
		}
		if p.NextBeforeID == 0 {
			t.Fatalf("every page of %q answered; the damaged block %x went unnoticed", "hello", damaged)
		}
		q.BeforeID = p.NextBeforeID
	}
}

// TestAtMostFrom compares atMostFrom, from every hint, with a plain binary
// search over lists with gaps short and long.
func TestAtMostFrom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		ids := make([]uint64, rng.IntN(40))
		next := uint64(1 + rng.IntN(5))
		for i := range ids {
			ids[i] = next
			next += uint64(1 + rng.IntN([]int{2, 20, 200}[rng.IntN(3)]))
		}
		for hint := -1; hint <= len(ids); hint++ {
			for id := uint64(0); id <= next; id++ {
				want := len(ids) - 1
				for want >= 0 && ids[want] > id {
					want--
				}
				if got := atMostFrom(ids, hint, id); got != want {
					t.Fatalf("atMostFrom(%v, %d, %d) = %d, want %d", ids, hint, id, got, want)
				}
			}
		}
	}
}

// withinSeconds runs fn and ends the test binary if it has not returned
// in 10 s. A cursor that loops inside a write transaction holds the
// database: a panic or t.Fatal would run the test's cleanups, which wait
// for that transaction too, until go test's own timeout.
func withinSeconds(what string, fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Fprintf(os.Stderr, "FAIL: %s did not return in 10s\n", what)
		os.Exit(1)
	}
}

// TestLastEntryOfAnEmptiedBucket: in the write transaction that deleted
// every key of a bucket of many pages, bbolt's Cursor.Last never returns;
// lastEntry says the bucket is empty, and with one key left, finds it.
func TestLastEntryOfAnEmptiedBucket(t *testing.T) {
	db := openPostings(t)
	if err := db.Update(func(tx *bbolt.Tx) error {
		for i := range 2000 {
			if err := tx.Bucket(bucketPostings).Put(itob(uint64(i)), make([]byte, 40)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []int{-1, 0, 700, 1999} {
		err := db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket(bucketPostings)
			for i := range 2000 {
				if i != keep {
					if err := b.Delete(itob(uint64(i))); err != nil {
						return err
					}
				}
			}
			var k []byte
			withinSeconds("lastEntry", func() { k, _ = lastEntry(b.Cursor()) })
			switch {
			case keep < 0 && k != nil:
				t.Errorf("every key deleted: lastEntry = %x, want none", k)
			case keep >= 0 && !bytes.Equal(k, itob(uint64(keep))):
				t.Errorf("key %d kept: lastEntry = %x", keep, k)
			}
			return errors.New("roll back")
		})
		if err == nil {
			t.Fatal("the transaction committed")
		}
	}
}

// TestBlocksFoundPastEmptiedPages looks a term's blocks up in the write
// transaction that deleted whole pages of them: bbolt's Prev stops on the
// emptied pages and reports nothing before them, where a block is.
func TestBlocksFoundPastEmptiedPages(t *testing.T) {
	db := openPostings(t)
	ids := make([]uint64, 200*(maxBlockBytes+1))
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return termBlocks(tx.Bucket(bucketPostings), []byte("m")).add(ids)
	}); err != nil {
		t.Fatal(err)
	}
	err := db.Update(func(tx *bbolt.Tx) error {
		blocks := blocksOf(t, tx, "m")
		if len(blocks) < 160 {
			t.Fatalf("%d blocks; the test deletes pages' worth from the 50th", len(blocks))
		}
		p := termBlocks(tx.Bucket(bucketPostings), []byte("m"))
		for _, b := range blocks[50:150] {
			if err := p.b.Delete(postingKey([]byte("m"), b[0])); err != nil {
				return err
			}
		}
		id := blocks[49][10]
		withinSeconds("blockAtMost", func() {
			got, next, found, err := p.blockAtMost(nil, id)
			if err != nil || !found || !slices.Equal(got, blocks[49]) || next != blocks[150][0] {
				t.Errorf("blockAtMost(%d) = %d IDs from %v, next %d, found %v, %v; want block 49 (from %d), next %d",
					id, len(got), got[:min(1, len(got))], next, found, err, blocks[49][0], blocks[150][0])
			}
		})
		if has, err := p.has(id); err != nil || !has {
			t.Errorf("has(%d) = %v, %v; want true", id, has, err)
		}
		if err := p.remove(id); err != nil {
			return err
		}
		if has, err := p.has(id); err != nil || has {
			t.Errorf("has(%d) after remove = %v, %v; want false", id, has, err)
		}
		// Every block deleted: nothing found, and no endless look for it.
		for _, b := range blocksOf(t, tx, "m") {
			if err := p.b.Delete(postingKey([]byte("m"), b[0])); err != nil {
				return err
			}
		}
		withinSeconds("blockAtMost in an emptied bucket", func() {
			if _, _, found, err := p.blockAtMost(nil, ids[len(ids)-1]+5); found || err != nil {
				t.Errorf("blockAtMost in an emptied bucket = found %v, %v", found, err)
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
