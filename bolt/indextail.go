package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// The search index in two parts.
//
// The postings bucket (see postings.go) is what search reads, but a new
// message's thirty-odd words land in thirty-odd leaves scattered over the
// whole bucket, and a commit rewrites every leaf it touched: in a large
// store a group of creates would dirty hundreds of pages, and that write,
// not the fsync, would set the pace of every create
// (docs/performance.md, "bbolt: the index tail").
//
// So a new message's words go first to the tail: one record per message,
// id → its sorted terms, in terms_tail. IDs only grow, so a group of
// creates appends to the last leaf or two. Search finds tail messages
// through an in-memory index of the tail (tailIndex) and checks each
// candidate against the tail record in its own transaction.
//
// When the tail holds enough postings, a merge moves them into the
// postings bucket in term order, a few thousand per transaction, sharing
// the group commit with everyone else. Each term's new postings sort after
// its old ones, so a merge of thousands of messages rewrites one block or
// two per distinct word, in about one leaf per word.
//
// Where the index stands is kept in meta, so every transaction sees one
// consistent state:
//
//	terms_merged   W: the postings bucket is complete for every message up to
//	               W; the tail holds the words of every message above W.
//	terms_merging  hi‖term: a merge of the tail records (W, hi] is under
//	               way and has copied the postings of every term before
//	               term. Readers ignore postings above W, so a merge
//	               half done changes no answer; the transaction that ends
//	               it deletes the merged tail records and raises W to hi.
//
// While a merge is under way, a change to a message in (W, hi] keeps both
// parts right: its postings as well as its tail record.

var (
	bucketTermsTail = []byte("terms_tail") // messageID → its terms, for messages above meta/terms_merged

	metaTermsMerged  = []byte("terms_merged")
	metaTermsMerging = []byte("terms_merging")
)

// Merge sizes. DefaultTailMergePostings starts a merge; a merge takes at
// most maxMergePostings at once, so a tail grown huge (a bulk load, a merge
// that kept failing) is merged in bounded steps; mergeChunkPostings is one
// transaction's share, so the writers queued behind it wait a few
// milliseconds at most.
const (
	DefaultTailMergePostings = 1 << 18
	maxMergePostings         = 1 << 19
	mergeChunkPostings       = 4096
)

// termsState is where the search index stands in one transaction.
type termsState struct {
	merged    uint64 // W
	mergingTo uint64 // hi of the merge under way; 0 for none
	nextTerm  []byte // the merge has copied every term before this one
}

// mainUpTo is the highest message ID that has (or may be getting) entries
// in the postings bucket.
func (s termsState) mainUpTo() uint64 { return max(s.merged, s.mergingTo) }

func readTermsState(tx *bbolt.Tx) termsState {
	meta := tx.Bucket(bucketMeta)
	var s termsState
	if v := meta.Get(metaTermsMerged); len(v) == 8 {
		s.merged = btoi(v)
	}
	if v := meta.Get(metaTermsMerging); len(v) >= 8 {
		s.mergingTo = btoi(v[:8])
		s.nextTerm = bytes.Clone(v[8:])
	}
	return s
}

func mergingValue(hi uint64, nextTerm []byte) []byte {
	return append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(nextTerm)), hi), nextTerm...)
}

// A tail record is its message's terms, sorted, each as uvarint length then
// bytes.
func encodeTailRecord(terms []string) []byte {
	n := 0
	for _, t := range terms {
		n += binary.MaxVarintLen16 + len(t)
	}
	b := make([]byte, 0, n)
	for _, t := range terms {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
	}
	return b
}

// tailRecordTerms decodes a tail record; nil and false for a malformed one.
func tailRecordTerms(rec []byte) ([]string, bool) {
	var terms []string
	for len(rec) > 0 {
		n, w := binary.Uvarint(rec)
		if w <= 0 || n == 0 || n > uint64(len(rec)-w) {
			return nil, false
		}
		terms = append(terms, string(rec[w:w+int(n)]))
		rec = rec[w+int(n):]
	}
	return terms, true
}

// tailRecordHas reports whether a tail record holds term. Records are short
// and sorted, so a scan that stops at the first larger term is as quick as
// anything cleverer.
func tailRecordHas(rec, term []byte) bool {
	for len(rec) > 0 {
		n, w := binary.Uvarint(rec)
		if w <= 0 || n > uint64(len(rec)-w) {
			return false
		}
		t := rec[w : w+int(n)]
		rec = rec[w+int(n):]
		// Terms are sorted, and most differ from the one sought in their
		// first byte: deciding on it spares them bytes.Compare's call,
		// which would otherwise be most of this function's work
		// (BenchmarkTailRecordHas).
		if len(t) > 0 && len(term) > 0 && t[0] != term[0] {
			if t[0] > term[0] {
				return false
			}
			continue
		}
		switch c := bytes.Compare(t, term); {
		case c == 0:
			return true
		case c > 0:
			return false
		}
	}
	return false
}

// tailIndex is the tail in memory: term → IDs, ascending. It may hold more
// than the tail (postings of a rolled-back write, of words an edit removed,
// of deleted messages), never less: every writer adds its postings before
// its transaction commits. Readers therefore treat an ID found here as a
// candidate and check it against the tail record in their transaction.
//
// Slices are only appended to in place, past the length any reader holds,
// or replaced whole, so a reader may use the slices it got after letting go
// of the lock.
type tailIndex struct {
	mu       sync.RWMutex
	base     uint64 // holds every tail posting of messages above base
	terms    map[string][]uint64
	postings int
	newest   uint64 // the highest ID ever added
	// full is signalled when postings reach mergeAt.
	mergeAt int
	full    chan struct{}
}

func newTailIndex(mergeAt int) *tailIndex {
	return &tailIndex{terms: make(map[string][]uint64), mergeAt: mergeAt, full: make(chan struct{}, 1)}
}

// add records that message id has terms.
func (t *tailIndex) add(id uint64, terms []string) {
	t.mu.Lock()
	// A new message's ID is above every ID here, so it goes at the end of
	// every list without a look at the list's last ID: with thousands of
	// long lists that look is a cache miss per word, in the committer,
	// where every write waits. Edits, and writes retried after a rollback,
	// reuse an ID and take the careful way.
	appending := id > t.newest
	t.newest = max(t.newest, id)
	for _, term := range terms {
		ids, known := t.terms[term]
		if !known {
			// The map keeps its keys as long as the word is in the tail;
			// a caller's term may share memory with its whole message.
			term = strings.Clone(term)
		}
		i, found := len(ids), false
		if !appending && i > 0 && ids[i-1] >= id {
			i, found = slices.BinarySearch(ids, id)
		}
		switch {
		case found:
			continue
		case i == len(ids):
			t.terms[term] = append(ids, id)
		default: // an edit of an older tail message: a new slice, readers keep theirs
			t.terms[term] = slices.Insert(slices.Clip(ids), i, id)
		}
		t.postings++
	}
	full := t.postings >= t.mergeAt
	t.mu.Unlock()
	if full {
		select {
		case t.full <- struct{}{}:
		default:
		}
	}
}

// dropThrough forgets every ID up to merged, which a merge has moved into
// the postings bucket, and recounts what is left.
func (t *tailIndex) dropThrough(merged uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if merged <= t.base {
		return
	}
	t.base = merged
	t.postings = 0
	for term, ids := range t.terms {
		i, found := slices.BinarySearch(ids, merged)
		if found {
			i++
		}
		if i == len(ids) {
			delete(t.terms, term)
			continue
		}
		// A fresh slice, so the merged IDs' memory goes with the old one.
		t.terms[term] = slices.Clone(ids[i:])
		t.postings += len(ids) - i
	}
}

// lists returns the candidates of each term and the base they hold
// everything above.
func (t *tailIndex) lists(terms []string) (uint64, [][]uint64) {
	out := make([][]uint64, len(terms))
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i, term := range terms {
		out[i] = t.terms[term]
	}
	return t.base, out
}

func (t *tailIndex) size() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.postings
}

// loadTail builds the in-memory tail from disk at Open.
func (db *DB) loadTail() error {
	return db.bolt.View(func(tx *bbolt.Tx) error {
		st := readTermsState(tx)
		db.tail.base = st.merged
		c := tx.Bucket(bucketTermsTail).Cursor()
		for k, v := c.Seek(itob(st.merged + 1)); k != nil; k, v = c.Next() {
			terms, ok := tailRecordTerms(v)
			if len(k) != 8 || !ok {
				return fmt.Errorf("terms_tail: malformed record %x", k)
			}
			db.tail.add(btoi(k), terms)
		}
		if st.mergingTo != 0 {
			select { // finish the merge a crash interrupted
			case db.tail.full <- struct{}{}:
			default: // already due
			}
		}
		return nil
	})
}

// putTailRecord writes id's whole term list. Memory first: a reader that
// sees the record committed must find the ID in memory.
func (db *DB) putTailRecord(tx *bbolt.Tx, id uint64, terms []string) error {
	db.tail.add(id, terms)
	return tx.Bucket(bucketTermsTail).Put(itob(id), encodeTailRecord(terms))
}

// touchMerging tells a merge under way that message id changed after the
// merge read the tail, so the merge checks its postings again before
// copying them.
func (db *DB) touchMerging(st termsState, id uint64) {
	if st.mergingTo == 0 || id > st.mergingTo {
		return
	}
	db.merge.mu.Lock()
	if db.merge.touched != nil {
		db.merge.touched[id] = struct{}{}
	}
	db.merge.mu.Unlock()
}

// merger is the state of the merge under way in this process.
type merger struct {
	run     sync.Mutex // one merge at a time
	mu      sync.Mutex
	touched map[uint64]struct{} // messages in (W, hi] changed since the merge read the tail
	stop    chan struct{}
	done    chan struct{}
	halt    sync.Once

	// For tests: chunk overrides mergeChunkPostings (Options.mergeChunk,
	// or set before the first write); afterRead runs once the merge has
	// read the tail, before it copies anything.
	chunk     int
	afterRead func()
}

// errMergeRaced means the index state moved under a merge; only a second
// merger could do that, so it is a bug, reported rather than papered over.
var errMergeRaced = errors.New("the search index changed under its merge")

// mergeTail moves up to maxMergePostings of the tail into the postings
// bucket, finishing first a merge a crash interrupted. It reports whether
// it merged anything.
func (db *DB) mergeTail(ctx context.Context) (bool, error) {
	db.merge.run.Lock()
	defer db.merge.run.Unlock()

	// Choose hi from a snapshot; the transaction that records it checks
	// the snapshot still holds.
	var planned termsState
	var hi uint64
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		planned = readTermsState(tx)
		if planned.mergingTo != 0 {
			hi = planned.mergingTo
			return nil
		}
		postings := 0
		c := tx.Bucket(bucketTermsTail).Cursor()
		for k, v := c.Seek(itob(planned.merged + 1)); k != nil && postings < maxMergePostings; k, v = c.Next() {
			terms, _ := tailRecordTerms(v)
			postings += len(terms)
			hi = btoi(k)
		}
		return nil
	})
	if err != nil || hi == 0 {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err // closing: not even the begin
	}
	start := time.Now()
	// Begin: record the merge (or adopt the interrupted one) and start
	// noting the messages changed from here on. Everything changed before
	// this commits is in the snapshot read below.
	// However this merge ends, writers stop noting changes for it.
	defer func() {
		db.merge.mu.Lock()
		db.merge.touched = nil
		db.merge.mu.Unlock()
	}()
	err = db.writes.upkeep(func(tx *bbolt.Tx) error {
		st := readTermsState(tx)
		if st.merged != planned.merged || st.mergingTo != planned.mergingTo {
			return errMergeRaced
		}
		db.merge.mu.Lock()
		db.merge.touched = make(map[uint64]struct{})
		db.merge.mu.Unlock()
		if st.mergingTo != 0 {
			return nil
		}
		return tx.Bucket(bucketMeta).Put(metaTermsMerging, mergingValue(hi, nil))
	})
	if err != nil {
		return false, err
	}

	// Read the records being merged, term by term.
	postings := make(map[string][]uint64)
	var from []byte
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		st := readTermsState(tx)
		from = st.nextTerm
		c := tx.Bucket(bucketTermsTail).Cursor()
		for k, v := c.Seek(itob(st.merged + 1)); k != nil && btoi(k) <= hi; k, v = c.Next() {
			terms, ok := tailRecordTerms(v)
			if !ok {
				return fmt.Errorf("terms_tail: malformed record %d", btoi(k))
			}
			for _, t := range terms {
				if t >= string(from) {
					postings[t] = append(postings[t], btoi(k))
				}
			}
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	terms := make([]string, 0, len(postings))
	for t := range postings {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	if db.merge.afterRead != nil {
		db.merge.afterRead()
	}
	chunkPostings := mergeChunkPostings
	if db.merge.chunk > 0 {
		chunkPostings = db.merge.chunk
	}

	// Chunks of whole terms, in term order; the last one also ends the
	// merge, even when there is nothing left to copy (a resumed merge).
	for {
		if err := ctx.Err(); err != nil {
			return false, err // the state on disk lets the next merge go on
		}
		n, chunk := 0, 0
		for chunk < len(terms) && (n == 0 || n+len(postings[terms[chunk]]) <= chunkPostings) {
			n += len(postings[terms[chunk]])
			chunk++
		}
		last := chunk == len(terms)
		var next []byte
		if !last {
			next = []byte(terms[chunk])
		}
		err := db.writes.upkeep(func(tx *bbolt.Tx) error {
			st := readTermsState(tx)
			if st.mergingTo != hi || !bytes.Equal(st.nextTerm, from) {
				return errMergeRaced
			}
			db.merge.mu.Lock()
			touched := db.merge.touched
			db.merge.mu.Unlock()
			index, tail := tx.Bucket(bucketPostings), tx.Bucket(bucketTermsTail)
			var kept []uint64
			for _, term := range terms[:chunk] {
				kept = kept[:0]
				for _, id := range postings[term] {
					if _, changed := touched[id]; changed && !tailRecordHas(tail.Get(itob(id)), []byte(term)) {
						continue // edited away or deleted since the read
					}
					kept = append(kept, id)
				}
				if len(kept) == 0 {
					continue
				}
				if err := termBlocks(index, []byte(term)).add(kept); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bucketMeta)
			if !last {
				return meta.Put(metaTermsMerging, mergingValue(hi, next))
			}
			if err := deleteTailThrough(tail, st.merged, hi); err != nil {
				return err
			}
			if err := meta.Put(metaTermsMerged, itob(hi)); err != nil {
				return err
			}
			return meta.Delete(metaTermsMerging)
		})
		if err != nil {
			return false, err
		}
		terms, from = terms[chunk:], next
		if last {
			break
		}
	}
	db.tail.dropThrough(hi)
	db.log.Debug("search index: tail merged", "through", hi, "took", time.Since(start).Round(time.Millisecond).String())
	return true, nil
}

// deleteTailThrough deletes the tail records (merged, hi].
func deleteTailThrough(tail *bbolt.Bucket, merged, hi uint64) error {
	var ids []uint64
	c := tail.Cursor()
	for k, _ := c.Seek(itob(merged + 1)); k != nil && btoi(k) <= hi; k, _ = c.Next() {
		ids = append(ids, btoi(k))
	}
	// Deleting while the cursor walks would move it; delete after.
	for _, id := range ids {
		if err := tail.Delete(itob(id)); err != nil {
			return err
		}
	}
	return nil
}

// runMerger merges the tail whenever it fills, until Close.
func (db *DB) runMerger() {
	defer close(db.merge.done)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-db.merge.stop
		cancel()
	}()
	for failures := 0; ; {
		select {
		case <-db.merge.stop:
			return
		case <-db.tail.full:
		}
		if failures > 0 {
			// A merge that failed (a full disk, say) would otherwise be
			// retried by every create: wait, longer each time, up to a
			// minute. The tail keeps every message searchable meanwhile.
			select {
			case <-db.merge.stop:
				return
			case <-time.After(min(time.Second<<min(failures-1, 6), time.Minute)):
			}
		}
		// A signal means a full tail or, at Open, an interrupted merge:
		// merge once in any case.
		for first := true; first || db.tail.size() >= db.tail.mergeAt; first = false {
			merged, err := db.mergeTail(ctx)
			if err != nil {
				if ctx.Err() == nil {
					failures++
					db.log.Error("search index: merging the tail failed; new messages stay searchable from the tail", "err", err, "failures", failures)
				}
				break
			}
			failures = 0
			if !merged {
				break
			}
		}
	}
}

// noMergeBound is the postings bound for lists that have no tail.
const noMergeBound = math.MaxUint64
