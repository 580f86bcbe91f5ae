package bolt

import (
	"encoding/binary"
	"slices"
	"strconv"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Secondary indexes of messages. Each is written by the same transaction as
// the record it indexes, through the functions below, so no reader can ever
// see a message without its index entries or an entry without its message.
//
//   postings       term‖0x00‖firstID →      the inverted index, up to
//                  a block of IDs           meta/terms_merged (see
//                                           postings.go)
//   terms_tail     messageID → terms        the rest of it (see indextail.go)
//
// A message's terms are the words of its content and its owner's term
// (see ownerTerm): "who wrote it" is one more posting list, which search
// intersects like a word's. There is no time index. IDs rise with creation
// time (see DB.creationTime), so since and until are found by a binary
// search over the IDs of the messages bucket (see firstCreatedAtOrAfter).
//
// Neither costs a create a scattered write. An owner index of its own,
// owner‖id, put every create in the leaf of its owner, a dozen leaves for
// a group of creates from a dozen users; a time index was one more bucket
// rewritten at its end. Without them a create writes at the end of the
// messages, tail and changes buckets only, and the owner postings reach
// the postings bucket with the words, in a merge's bulk appends.
//
// IDs are big-endian, so within one term the entries sort by ID, which is
// creation order.

// termSeparator ends the term part of a postings key. Terms are made of word
// runes only (see termKey), and no UTF-8 encoding of one contains a zero
// byte, so the term‖0x00 prefix of one term is never a prefix of another's.
const termSeparator = 0x00

// termPrefix is the key prefix of a term's postings.
func termPrefix(term []byte) []byte {
	k := make([]byte, 0, len(term)+1+8)
	k = append(k, term...)
	return append(k, termSeparator)
}

// timeKey encodes an instant so that byte order is time order, instants
// before 1970 (down to year 1) included: flipping the sign bit of the two's
// complement microseconds orders them as unsigned bytes. Older layouts' time
// index was keyed so.
func timeKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(timeToMicros(t))^(1<<63))
}

// firstCreatedAtOrAfter returns the smallest ID of the messages created at
// or after t, and false when there is none. Creation times never fall as
// IDs rise, so "the first message at or after x has been created by t" is
// false and then true along the IDs, and a binary search over the ID range
// finds where it turns: log2 of the highest ID in seeks (20 at a million),
// however many IDs deletions left unused.
func firstCreatedAtOrAfter(msgs *bbolt.Cursor, t time.Time) (uint64, bool) {
	bound := model.BoundMicros(t)
	// atOrAfter finds the first message with an ID of at least x, and
	// whether it was created at or after the bound; found is false when
	// there is no such message.
	atOrAfter := func(x uint64) (id uint64, created, found bool) {
		k, v := msgs.Seek(itob(x))
		if len(k) != 8 || len(v) < messageHeaderLen {
			return 0, false, false
		}
		return btoi(k), createdMicros(v) >= bound, true
	}
	// Invariant: the first message from lo on was created before the
	// bound (or lo is 0, before every ID); the first from hi on was
	// created at or after it, or there is none.
	k, _ := lastEntry(msgs)
	if len(k) != 8 {
		return 0, false
	}
	lo, hi := uint64(0), btoi(k)+1
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if _, created, found := atOrAfter(mid); !found || created {
			hi = mid
		} else {
			lo = mid
		}
	}
	id, _, found := atOrAfter(hi)
	return id, found
}

// ownerTerm is the index term of the messages of user ownerID: "@" and
// the ID in decimal. '@' is not a word rune, so no word of any content is
// an owner term, and the term holds no zero byte, like every other.
func ownerTerm(ownerID uint64) string {
	return "@" + strconv.FormatUint(ownerID, 10)
}

// withOwnerTerm adds owner's term to terms (sorted, distinct), in order.
// The result does not share terms' backing array.
func withOwnerTerm(terms []string, owner uint64) []string {
	t := ownerTerm(owner)
	i, found := slices.BinarySearch(terms, t)
	if found { // cannot happen: no word is an owner term
		return slices.Clone(terms)
	}
	return slices.Insert(slices.Clip(terms), i, t)
}

// messageTerms is every index term of m, sorted: what its tail record
// holds.
func messageTerms(m *model.Message) []string {
	return withOwnerTerm(model.SortedTerms(m.Content), m.OwnerID)
}

// ownerMessages returns up to limit messages of owner with IDs below
// below, newest first, found through the owner's term in tx: the tail in
// memory above the merge watermark, the postings up to it.
//
// It runs in write transactions (an account's purge), where blocks deleted
// earlier in the transaction can leave empty pages that bbolt v1.5.0's
// backward cursor steps mishandle; so it reads the postings a block at a
// time through postingBlocks, which guards against that, rather than
// through search's postingList.
func (db *DB) ownerMessages(tx *bbolt.Tx, owner, below uint64, limit int) ([]*model.Message, error) {
	term := ownerTerm(owner)
	merged := readTermsState(tx).merged
	_, tails := db.tail.lists([]string{term})
	msgs := newIDReader(tx.Bucket(bucketMessages))
	var out []*model.Message
	// take adds message id if this transaction holds it as owner's: the
	// tail in memory may hold IDs it does not (see tailIndex).
	take := func(id uint64) error {
		rec := msgs.get(id)
		if rec == nil {
			return nil
		}
		m, err := decodeMessage(id, rec)
		if err == nil && m.OwnerID == owner {
			out = append(out, m)
		}
		return err
	}
	tail := tails[0]
	// A purge asks chunk after chunk, each below the last: start at below
	// rather than step over every ID the chunks before took.
	start, _ := slices.BinarySearch(tail, below)
	for i := start - 1; i >= 0 && len(out) < limit && tail[i] > merged; i-- {
		if err := take(tail[i]); err != nil {
			return nil, err
		}
	}
	blocks := termBlocks(tx.Bucket(bucketPostings), []byte(term))
	var ids []uint64
	for next := min(below-1, merged); next >= 1 && len(out) < limit; {
		var found bool
		var err error
		if ids, _, found, err = blocks.blockAtMost(ids[:0], next); err != nil || !found {
			return out, err
		}
		for i := len(ids) - 1; i >= 0 && len(out) < limit; i-- {
			if ids[i] <= next {
				if err := take(ids[i]); err != nil {
					return nil, err
				}
			}
		}
		next = ids[0] - 1
	}
	return out, nil
}

// indexNewMessage adds every index entry of a new message m; terms are the
// words of its content (sortedTerms). All of them go to the tail (see
// indextail.go), with the owner's term.
func (db *DB) indexNewMessage(tx *bbolt.Tx, m *model.Message, terms []string) error {
	// IDs only grow and a merge only takes IDs that exist, so a new
	// message is always above the postings bucket's part.
	return db.putTailRecord(tx, m.ID, withOwnerTerm(terms, m.OwnerID))
}

// unindexMessage removes every index entry of m, as stored.
func (db *DB) unindexMessage(tx *bbolt.Tx, m *model.Message) error {
	st := readTermsState(tx)
	if m.ID <= st.mainUpTo() {
		postings := tx.Bucket(bucketPostings)
		if err := termBlocks(postings, []byte(ownerTerm(m.OwnerID))).remove(m.ID); err != nil {
			return err
		}
		for term := range model.ContentTerms(m.Content) {
			if err := termBlocks(postings, []byte(term)).remove(m.ID); err != nil {
				return err
			}
		}
	}
	if m.ID > st.merged {
		db.touchMerging(st, m.ID)
		return tx.Bucket(bucketTermsTail).Delete(itob(m.ID))
	}
	return nil
}

// removeMessage deletes m's record and every index entry of it: the one way
// a message leaves the store, whether its owner deletes it, its account
// goes, or it ages past --retain.
func (db *DB) removeMessage(tx *bbolt.Tx, m *model.Message) error {
	if err := tx.Bucket(bucketMessages).Delete(itob(m.ID)); err != nil {
		return err
	}
	if err := db.unindexMessage(tx, m); err != nil {
		return err
	}
	if err := removeReply(tx, m); err != nil {
		return err
	}
	if err := tx.Bucket(bucketNotified).Delete(itob(m.ID)); err != nil {
		return err
	}
	return db.recordChange(tx, model.MessageDeleted, m)
}

// reindexContent moves message m's postings from the words of its stored
// content to newTerms (sortedTerms of the new content): in the postings
// bucket, only the words that differ (the owner's term stays); in the tail,
// the whole record.
func (db *DB) reindexContent(tx *bbolt.Tx, m *model.Message, newTerms []string) error {
	st := readTermsState(tx)
	if m.ID <= st.mainUpTo() {
		before, after := model.ContentTerms(m.Content), make(map[string]struct{}, len(newTerms))
		for _, t := range newTerms {
			after[t] = struct{}{}
		}
		postings := tx.Bucket(bucketPostings)
		for term := range before {
			if _, kept := after[term]; !kept {
				if err := termBlocks(postings, []byte(term)).remove(m.ID); err != nil {
					return err
				}
			}
		}
		for term := range after {
			if _, had := before[term]; !had {
				if err := termBlocks(postings, []byte(term)).add([]uint64{m.ID}); err != nil {
					return err
				}
			}
		}
	}
	if m.ID > st.merged {
		db.touchMerging(st, m.ID)
		return db.putTailRecord(tx, m.ID, withOwnerTerm(newTerms, m.OwnerID))
	}
	return nil
}
