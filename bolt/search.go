package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Search cost bounds. A step is one seek, or a walk of at most
// prevBeforeSeek keys to a nearby one (cheaper than a seek). Every query walks
// indexes and stops when its page is full, so ordinary queries take a few
// dozen steps; these bounds are for the ones that cannot fill a page fast —
// two common words that seldom meet, say — which would otherwise walk whole
// posting lists. Such a walk is cut into read transactions of
// stepsPerTransaction (so writers that grow the file never wait long for
// readers), checks its context every ctxCheckSteps (a client that goes away
// stops its search), and after stepsPerPage returns what it has with a
// cursor to go on from.
const (
	stepsPerTransaction = 2048
	stepsPerPage        = 16384
	ctxCheckSteps       = 128
)

// SearchMessages pages through messages newest first for the caller, whose
// account it returns, resolved in the search's first read transaction: one
// transaction, not two, on the hot path of GET /api/messages. Order is by
// ID, which NextSequence hands out in commit order, so a cursor (the last
// ID seen) neither skips nor repeats a message while others are created or
// deleted. Errors: model.ErrInvalid for too many terms,
// model.ErrUnauthorized, the context's error when it ends.
func (db *DB) SearchMessages(ctx context.Context, by model.Caller, q model.SearchQuery) (*model.User, *model.SearchPage, error) {
	if len(q.Terms) > model.MaxQueryTerms {
		return nil, nil, model.TooManyTerms()
	}
	s := &searcher{db: db, q: q, limit: q.PageLimit(), page: &model.SearchPage{}}
	var user *model.User
	planned := false
	var release func() // set once the search is long and has its turn (see searchturns.go)
	defer func() {
		if release != nil {
			release()
		}
	}()
	for !s.done {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if planned && s.steps >= stepsPerPage {
			// Out of budget: hand back what was found and where to go on.
			s.page.NextBeforeID = s.next + 1
			break
		}
		if s.steps >= stepsPerTransaction && release == nil {
			// A search that needs more than one transaction is the rare,
			// costly kind (words that seldom meet): it takes turns.
			var account uint64
			if user != nil {
				account = user.ID
			}
			var err error
			if release, err = db.turns.take(ctx, account); err != nil {
				return nil, nil, err
			}
		}
		err := db.bolt.View(func(tx *bbolt.Tx) error {
			if !planned {
				var err error
				if user, err = db.reader(tx, by); err != nil {
					return err
				}
				s.plan(tx)
				planned = true
			}
			return s.walk(ctx, tx)
		})
		if errors.Is(err, errStaleTail) {
			continue // a merge ended between this transaction and the memory it read: again, newer
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return user, s.page, nil
}

// searcher is one search's state across its read transactions.
type searcher struct {
	db    *DB
	q     model.SearchQuery
	limit int
	page  *model.SearchPage

	// terms are the query's words and its owner's term: the posting
	// lists to intersect.
	terms []string
	lo    uint64 // smallest ID that can match (from Since)
	next  uint64 // every ID above next has been ruled out
	steps int
	done  bool
	// uncheckedSteps counts steps since the context was last checked.
	uncheckedSteps int
	// recs reads the tail records of this transaction's term lists, whose
	// candidates above merged come from the tail in memory.
	recs     *tailRecords
	merged   uint64
	termKeys [][]byte
	// slab holds the page's messages, a few to an allocation; Messages
	// points into it.
	slab []model.Message
}

// slabMessages is how many messages a search allocates at a time: a page
// of 20 in one allocation, without reserving 100 for a rare word's few.
const slabMessages = 20

// plan turns the filters into ID bounds and the terms to intersect, inside
// the first transaction. IDs rise with creation time (see
// DB.creationTime), so since and until become ID bounds found by binary
// search rather than a filter applied to every message.
func (s *searcher) plan(tx *bbolt.Tx) {
	s.lo, s.next = 1, math.MaxUint64
	if s.q.BeforeID != 0 {
		s.next = s.q.BeforeID - 1
	}
	s.terms = s.q.Terms
	if s.q.OwnerEmail != "" {
		id := tx.Bucket(bucketUsersByEmail).Get(emailKey(s.q.OwnerEmail))
		if id == nil {
			s.done = true // no such author, so no such messages
			return
		}
		// The owner's messages are one more posting list.
		s.terms = append(slices.Clip(s.terms), ownerTerm(btoi(id)))
	}
	msgs := tx.Bucket(bucketMessages).Cursor()
	if s.q.Since != nil {
		id, ok := firstCreatedAtOrAfter(msgs, *s.q.Since)
		if !ok {
			s.done = true // nothing was created at or after since
			return
		}
		s.lo = id
	}
	if s.q.Until != nil {
		if id, ok := firstCreatedAtOrAfter(msgs, *s.q.Until); ok {
			s.next = min(s.next, id-1)
		}
	}
	if s.next < s.lo {
		s.done = true
	}
}

// walk intersects the query's posting lists newest first, leapfrogging: each
// list in turn seeks to the largest ID not above the current candidate, and
// a candidate every list agrees on is a match. It stops when the page is
// full plus one (which proves a next page), when a list runs out, or when
// this transaction's share of steps is spent.
func (s *searcher) walk(ctx context.Context, tx *bbolt.Tx) error {
	if s.done {
		return nil
	}
	lists, err := s.postingLists(tx)
	if err != nil {
		return err
	}
	// Every bucket is opened once per transaction and every record read
	// through one cursor: each tx.Bucket and Bucket.Get is a seek from the
	// root with a fresh cursor, and a page of 20 made dozens of them.
	msgs := newIDReader(tx.Bucket(bucketMessages))
	owners := newOwnerEmails(tx)
	var probe model.Message
	txSteps := 0
	for {
		agreed := 0
		for i := 0; agreed < len(lists); i = (i + 1) % len(lists) {
			if s.next < s.lo {
				s.done = true
				return nil
			}
			if txSteps >= stepsPerTransaction {
				return nil // s.next is where the next transaction goes on
			}
			id, ok := lists[i].seekAtMost(s.next)
			// A seek, plus any tail records it read: a word whose tail
			// entries were mostly edited away costs what it reads.
			steps := 1 + s.recs.takeReads()
			s.steps += steps
			txSteps += steps
			if s.uncheckedSteps += steps; s.uncheckedSteps >= ctxCheckSteps {
				s.uncheckedSteps = 0
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			switch {
			case lists[i].err != nil:
				return lists[i].err
			case !ok || id < s.lo:
				s.done = true
				return nil
			case id == s.next:
				agreed++
			default:
				s.next, agreed = id, 1
			}
		}
		id := s.next
		if id > s.merged && s.recs != nil && !s.recs.hasAll(id, s.termKeys) {
			// The tail in memory agreed on a message whose words were
			// edited away, that was deleted, or that this snapshot does
			// not hold yet. (The read counts as a step at the next seek.)
			if id == 1 {
				s.done = true
				return nil
			}
			s.next = id - 1
			continue
		}
		b := lists[0].val
		if !lists[0].records {
			if b = msgs.get(id); b == nil {
				return fmt.Errorf("search: index points at missing message %d", id)
			}
		}
		m := &probe // the match beyond a full page is only looked at
		if len(s.page.Messages) < s.limit {
			if len(s.slab) == cap(s.slab) {
				s.slab = make([]model.Message, 0, min(s.limit-len(s.page.Messages), slabMessages))
			}
			m = &s.slab[:len(s.slab)+1][len(s.slab)]
		}
		if err := decodeMessageInto(m, id, b); err != nil {
			return err
		}
		if s.inTimeRange(m.CreatedAt) && owners.join(m) {
			if len(s.page.Messages) == s.limit {
				// One match beyond the page proves there is a next page.
				s.page.NextBeforeID = s.page.Messages[s.limit-1].ID
				s.done = true
				return nil
			}
			joinRepliesIn(owners.counts, m)
			s.page.Messages = append(s.page.Messages, m)
			if m != &probe {
				s.slab = s.slab[:len(s.slab)+1] // keep the slot; a rejected one is reused
			}
		}
		if id == 1 {
			s.done = true
			return nil
		}
		s.next = id - 1
	}
}

// inTimeRange re-checks a match against since and until. The ID bounds from
// plan already hold it there, unless a database written before creation
// times were kept monotonic has a message out of order.
func (s *searcher) inTimeRange(t time.Time) bool {
	if s.q.Since != nil && t.Before(*s.q.Since) {
		return false
	}
	if s.q.Until != nil && !t.Before(*s.q.Until) {
		return false
	}
	return true
}

// errStaleTail: the in-memory tail no longer holds what a transaction
// needs, because a merge committed after the transaction began.
var errStaleTail = errors.New("the search index's tail moved on; retry in a newer transaction")

// postingLists opens one list per term, the owner's included; with none,
// every message is a candidate. A term's list is its postings up to the
// merge watermark and its tail candidates above it (see indextail.go).
func (s *searcher) postingLists(tx *bbolt.Tx) ([]*postingList, error) {
	s.recs = nil
	if len(s.terms) == 0 {
		all := newPostingList(tx.Bucket(bucketMessages).Cursor(), nil)
		all.records = true
		return []*postingList{all}, nil
	}
	merged := readTermsState(tx).merged
	base, tails := s.db.tail.lists(s.terms)
	if base > merged {
		return nil, errStaleTail
	}
	s.recs, s.merged = &tailRecords{records: newIDReader(tx.Bucket(bucketTermsTail))}, merged
	if s.termKeys == nil {
		for _, t := range s.terms {
			s.termKeys = append(s.termKeys, []byte(t))
		}
	}
	postings := tx.Bucket(bucketPostings)
	lists := make([]*postingList, len(s.terms))
	for i, t := range s.terms {
		p := newPostingList(postings.Cursor(), termPrefix([]byte(t)))
		p.blocks, p.bound, p.tail = true, merged, tails[i]
		lists[i] = p
	}
	return lists, nil
}

// tailRecords reads tail records for one transaction's search, through one
// cursor: Bucket.Get allocates a fresh cursor per call, and a common-word
// search reads a record per candidate
// (docs/performance.md, "bbolt: reading a page of messages").
type tailRecords struct {
	records idReader
	reads   int // records read since takeReads
}

// hasAll reports whether message id's tail record holds every term.
func (r *tailRecords) hasAll(id uint64, terms [][]byte) bool {
	rec := r.records.get(id)
	r.reads++
	for _, t := range terms {
		if !tailRecordHas(rec, t) {
			return false
		}
	}
	return rec != nil
}

// takeReads returns the records read since it was last called; nil reads
// none (a query without words).
func (r *tailRecords) takeReads() int {
	if r == nil {
		return 0
	}
	n := r.reads
	r.reads = 0
	return n
}

// postingList is the set of message IDs under one key prefix (prefix‖id),
// or a term's blocks (see postings.go), read through a cursor.
type postingList struct {
	c      *bbolt.Cursor
	prefix []byte
	key    []byte // scratch for prefix‖id
	at     uint64 // ID under the cursor after a successful seek
	placed bool
	// records: the list is the messages bucket itself, so val, the value
	// under the cursor, is the record of at and needs no second lookup.
	records bool
	val     []byte
	// A term's list reads the cursor only up to bound (the merge
	// watermark); above it, its candidates come from the tail in memory,
	// which may hold more than the snapshot (see searcher.walk).
	bound   uint64
	tail    []uint64
	tailIdx int // where the last answer from tail was
	// blocks: the keys are prefix‖first and name blocks of IDs. block is
	// the one under the cursor, decoded; it holds every ID of the list in
	// [block[0], blockHi].
	blocks  bool
	block   []uint64
	blockHi uint64
	idx     int   // p.block[idx] is at, once placed in the block
	err     error // a malformed block, which ended the list
}

func newPostingList(c *bbolt.Cursor, prefix []byte) *postingList {
	key := make([]byte, len(prefix), len(prefix)+8)
	copy(key, prefix)
	return &postingList{c: c, prefix: key[:len(prefix):len(prefix)], key: key, bound: noMergeBound}
}

// prevBeforeSeek is the furthest jump down a list, in IDs, that seekAtMost
// makes by stepping back key by key rather than seeking from the root.
const prevBeforeSeek = 8

// seekAtMost returns the largest ID in the list that is at most id.
func (p *postingList) seekAtMost(id uint64) (uint64, bool) {
	if id > p.bound {
		i := atMostFrom(p.tail, p.tailIdx, id)
		p.tailIdx = i
		if i >= 0 && p.tail[i] > p.bound {
			// A candidate only: walk checks what every list agrees on
			// against the tail record, once for all the query's words.
			return p.tail[i], true
		}
		if id = p.bound; id == 0 {
			return 0, false
		}
	}
	if p.blocks {
		return p.seekBlockAtMost(id)
	}
	if p.placed && id < p.at && p.at-id <= prevBeforeSeek {
		// Walking down a list is the common case: the key wanted is the
		// previous one, or a few before it when another list's candidate
		// skipped a little. IDs are distinct, so k steps back reach an ID
		// at most p.at-k: within p.at-id steps along the leaf, cheaper than
		// a seek from the root. A longer jump seeks.
		for {
			k, v := p.c.Prev()
			if got, ok := p.idOf(k); !ok || got <= id {
				p.at, p.placed, p.val = got, ok, v
				return got, ok
			}
		}
	}
	p.key = binary.BigEndian.AppendUint64(p.key[:len(p.prefix)], id)
	k, v := p.c.Seek(p.key)
	if k == nil || !bytes.Equal(k, p.key) {
		if k == nil {
			k, v = p.c.Last()
		} else {
			k, v = p.c.Prev()
		}
	}
	got, ok := p.idOf(k)
	p.at, p.placed, p.val = got, ok, v
	return got, ok
}

// idOf reads the ID of a key of this list; false for a key of another list.
func (p *postingList) idOf(k []byte) (uint64, bool) {
	if len(k) != len(p.prefix)+8 || !bytes.HasPrefix(k, p.prefix) {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(p.prefix):]), true
}

// seekBlockAtMost is seekAtMost over blocks. A walk goes down a list, so
// the block wanted is most often the one decoded already or the one before
// it, which the cursor reaches with one step back. A block is decoded only
// up to the ID sought: the walk never asks for a higher one afterwards.
func (p *postingList) seekBlockAtMost(id uint64) (uint64, bool) {
	if len(p.block) > 0 && id < p.block[0] {
		// The block before the one under the cursor holds every ID up to
		// p.block[0]-1; if it starts at or below id, it is the one.
		k, v := p.c.Prev()
		if first, ok := p.idOf(k); ok && first <= id && p.decode(first, v, id) {
			p.blockHi = id
		} else {
			p.block = p.block[:0]
		}
	}
	if len(p.block) == 0 || id < p.block[0] || id > p.blockHi {
		p.block = p.block[:0]
		p.key = binary.BigEndian.AppendUint64(p.key[:len(p.prefix)], id)
		k, v := p.c.Seek(p.key)
		if k == nil || !bytes.Equal(k, p.key) {
			if k == nil {
				k, v = p.c.Last()
			} else {
				k, v = p.c.Prev()
			}
		}
		first, ok := p.idOf(k)
		if !ok {
			p.placed = false
			return 0, false // no block starts at or below id
		}
		if !p.decode(first, v, id) {
			p.placed, p.err = false, postingBlocks{prefix: p.prefix}.malformed(first)
			return 0, false
		}
		p.blockHi = id
	}
	p.placeIn(id)
	return p.at, true
}

// placeIn moves to the largest ID of the decoded block not above id, which
// is at least p.block[0].
func (p *postingList) placeIn(id uint64) {
	p.idx = atMostFrom(p.block, p.idx, id)
	p.at, p.placed = p.block[p.idx], true
}

// atMostFrom is the index of the largest of the ascending ids not above id,
// or -1. A walk goes down a list, most often by a few IDs, so it looks just
// below hint, the index of the last answer, before it searches.
func atMostFrom(ids []uint64, hint int, id uint64) int {
	k := hint
	if k < 0 || k >= len(ids) {
		k = len(ids) - 1
	}
	switch {
	case k < 0:
		return -1
	case ids[k] > id:
		for stop := max(0, k-prevBeforeSeek); k > stop && ids[k] > id; k-- {
		}
		if ids[k] > id {
			return lastAtMost(ids[:k], id)
		}
	case k+1 < len(ids) && ids[k+1] <= id:
		return k + 1 + lastAtMost(ids[k+1:], id)
	}
	return k
}

// lastAtMost is the index of the largest of the ascending ids not above id;
// -1 if there is none.
func lastAtMost(ids []uint64, id uint64) int {
	i, found := slices.BinarySearch(ids, id)
	if !found {
		i--
	}
	return i
}

// decode reads a block into p.block, its IDs up to limit; false for a
// malformed one. The last place becomes the block's last decoded ID.
func (p *postingList) decode(first uint64, v []byte, limit uint64) bool {
	if p.block == nil {
		p.block = make([]uint64, 0, 64)
	}
	var ok bool
	p.block, ok = decodeBlockUpTo(p.block[:0], first, v, limit)
	if !ok {
		p.block = p.block[:0]
	}
	p.idx = len(p.block) - 1
	return ok
}
