package bolt

import (
	"encoding/binary"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Secondary indexes of messages. Each is written by the same transaction as
// the record it indexes, through the functions below, so no reader can ever
// see a message without its index entries or an entry without its message.
//
//   msgs_by_owner  ownerID‖messageID        a user's messages, newest last
//   msgs_by_time   createdAt‖messageID      turns since/until into ID bounds
//   postings       term‖0x00‖firstID →      the inverted index of content,
//                  a block of IDs           up to meta/terms_merged
//                                           (see postings.go)
//   terms_tail     messageID → terms        the rest of it (see tail.go)
//
// IDs are big-endian, so within one owner or one term the entries sort by ID,
// which is creation order.

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

// timeKey encodes an instant so that byte order is time order, negative
// Unix times (before 1970, down to year 1) included: flipping the sign bit
// of the two's complement value orders int64s as unsigned bytes.
func timeKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(timeToMicros(t))^(1<<63))
}

// timeBoundKey is timeKey of the first stored instant at or after t. The
// store keeps microseconds, so a bound with a finer part rounds up: a
// message at 12:00:00.000001 is after since=12:00:00.0000005 and before
// until=12:00:00.0000015.
func timeBoundKey(t time.Time) []byte {
	if t.Truncate(time.Microsecond).Before(t) {
		t = t.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return timeKey(t)
}

func timeIndexKey(t time.Time, id uint64) []byte {
	return binary.BigEndian.AppendUint64(timeKey(t), id)
}

// indexNewMessage adds every index entry of a new message m; its words go
// to the tail (see tail.go).
func (db *DB) indexNewMessage(tx *bbolt.Tx, m *Message, terms []string) error {
	if err := indexOwnerAndTime(tx, m); err != nil {
		return err
	}
	// IDs only grow and a merge only takes IDs that exist, so a new
	// message is always above the postings bucket's part.
	return db.putTailRecord(tx, m.ID, terms)
}

func indexOwnerAndTime(tx *bbolt.Tx, m *Message) error {
	if err := tx.Bucket(bucketMsgsByOwner).Put(compositeKey(m.OwnerID, itob(m.ID)), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketMsgsByTime).Put(timeIndexKey(m.CreatedAt, m.ID), nil)
}

// unindexMessage removes every index entry of m, as stored.
func (db *DB) unindexMessage(tx *bbolt.Tx, m *Message) error {
	id := itob(m.ID)
	if err := tx.Bucket(bucketMsgsByOwner).Delete(compositeKey(m.OwnerID, id)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketMsgsByTime).Delete(timeIndexKey(m.CreatedAt, m.ID)); err != nil {
		return err
	}
	st := readTermsState(tx)
	if m.ID <= st.mainUpTo() {
		postings := tx.Bucket(bucketPostings)
		for term := range ContentTerms(m.Content) {
			if err := termBlocks(postings, []byte(term)).remove(m.ID); err != nil {
				return err
			}
		}
	}
	if m.ID > st.merged {
		db.touchMerging(st, m.ID)
		return tx.Bucket(bucketTermsTail).Delete(id)
	}
	return nil
}

// removeMessage deletes m's record and every index entry of it: the one way
// a message leaves the store, whether its owner deletes it, its account
// goes, or it ages past --retain.
func (db *DB) removeMessage(tx *bbolt.Tx, m *Message) error {
	if err := tx.Bucket(bucketMessages).Delete(itob(m.ID)); err != nil {
		return err
	}
	if err := db.unindexMessage(tx, m); err != nil {
		return err
	}
	return db.recordChange(tx, MessageDeleted, m, "")
}

// reindexContent moves message id's postings from the words of oldContent
// to newTerms (sortedTerms of the new content): in the postings bucket, only
// the terms that differ; in the tail, the whole record.
func (db *DB) reindexContent(tx *bbolt.Tx, id uint64, oldContent string, newTerms []string) error {
	st := readTermsState(tx)
	if id <= st.mainUpTo() {
		before, after := ContentTerms(oldContent), make(map[string]struct{}, len(newTerms))
		for _, t := range newTerms {
			after[t] = struct{}{}
		}
		postings := tx.Bucket(bucketPostings)
		for term := range before {
			if _, kept := after[term]; !kept {
				if err := termBlocks(postings, []byte(term)).remove(id); err != nil {
					return err
				}
			}
		}
		for term := range after {
			if _, had := before[term]; !had {
				if err := termBlocks(postings, []byte(term)).add([]uint64{id}); err != nil {
					return err
				}
			}
		}
	}
	if id > st.merged {
		db.touchMerging(st, id)
		return db.putTailRecord(tx, id, newTerms)
	}
	return nil
}

// timeFromKey reads the instant at the start of a msgs_by_time key.
func timeFromKey(k []byte) time.Time {
	return microsToTime(int64(binary.BigEndian.Uint64(k) ^ (1 << 63)))
}
