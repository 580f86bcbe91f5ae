package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// Layout versions. A database records the layout it was written in under
// meta/layout; Open upgrades older layouts in place, once, and logs it.
//
//	1  the first release: users as JSON, messages indexed by owner only
//	   (no meta bucket at all).
//	2  users in a compact binary record; tokens with a public handle and a
//	   last-use time; messages also indexed by creation time and by the
//	   words of their content.
//	3  a change log (the changes bucket) that every message write appends
//	   to, for live streams. An older Herald would write without logging
//	   and leave streams resuming across the gap none the wiser, so the
//	   version is raised and it refuses the file.
//	4  new messages' words go to the search index's tail (terms_tail) and
//	   are merged into the terms bucket in batches; meta/terms_merged
//	   records how far. An older Herald would write terms entries above
//	   the watermark, which search ignores, so it must refuse the file.
//	5  the merged index keeps each word's IDs in packed blocks (the
//	   postings bucket, see postings.go) instead of a key per posting in
//	   the terms bucket.
const currentLayout = 5

// bucketTerms is layout 4's index, term‖0x00‖messageID → nil; only the
// upgrade to layout 5 reads it.
var bucketTerms = []byte("terms")

var (
	metaLayout      = []byte("layout")
	metaUpgradeNext = []byte("upgrade_next") // first message ID not yet indexed
)

// upgradeChunk is how many messages one upgrade transaction indexes: small
// enough that the transaction's dirty pages stay a few MiB, large enough
// that a million messages take a few hundred commits.
const upgradeChunk = 5000

// prepareLayout creates a new database's buckets, or brings an existing one
// up to currentLayout. A crash during an upgrade leaves the progress
// recorded, and the next Open goes on from there.
func (db *DB) prepareLayout() error {
	var layout uint64
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		fresh, err := heraldFile(tx)
		if err != nil {
			return err
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(metaLayout); {
		case v != nil && len(v) != 8:
			return fmt.Errorf("meta/layout is %d bytes, want 8", len(v))
		case v != nil:
			layout = btoi(v)
		case fresh:
			layout = currentLayout
			return meta.Put(metaLayout, itob(currentLayout))
		default:
			layout = 1
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case layout == currentLayout:
		return nil
	case layout > currentLayout:
		return fmt.Errorf("the database was written by a newer Herald (layout %d; this one reads up to %d)", layout, currentLayout)
	}
	if layout == 1 {
		if err := db.upgradeFrom1(); err != nil {
			return err
		}
	}
	if layout <= 2 {
		if err := db.upgradeFrom2(); err != nil {
			return err
		}
	}
	if layout <= 3 {
		if err := db.upgradeFrom3(); err != nil {
			return err
		}
	}
	return db.upgradeFrom4()
}

// upgradeFrom4 packs the terms bucket's postings into blocks, a chunk of
// terms per transaction so the dirty pages stay a few MiB, then drops the
// terms bucket. Until the last transaction the file is a complete layout 4
// database with a partial postings bucket beside it, so a crash (or an
// older Herald opening the file meanwhile) loses nothing: the upgrade
// starts over on the next Open. Postings above the merge watermark (a
// merge a crash interrupted) are copied like the others; the merger goes
// on from where the merge stopped.
func (db *DB) upgradeFrom4() error {
	start := time.Now()
	var resume []byte // the first terms key not yet copied; nil once done
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		terms := tx.Bucket(bucketTerms)
		if terms == nil {
			return nil // no layout 4 index: nothing to pack
		}
		// What an interrupted upgrade left is redone from the start.
		if err := tx.DeleteBucket(bucketPostings); err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketPostings); err != nil {
			return err
		}
		resume, _ = terms.Cursor().First()
		resume = bytes.Clone(resume)
		return nil
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 5: %w", err)
	}
	if resume != nil {
		db.log.Info("upgrading database layout 4 to 5: packing the search index into blocks; this runs once")
	}
	postings, words := 0, 0
	for resume != nil {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			fillGrowingBuckets(tx)
			blocks := tx.Bucket(bucketPostings)
			c := tx.Bucket(bucketTerms).Cursor()
			var term []byte
			var ids []uint64
			flush := func() error {
				if len(ids) == 0 {
					return nil
				}
				words++
				return termBlocks(blocks, term).add(ids)
			}
			k, _ := c.Seek(resume)
			for n := 0; k != nil; k, _ = c.Next() {
				sep := len(k) - 9
				if sep < 1 || k[sep] != termSeparator {
					return fmt.Errorf("terms: key %x is not term‖0‖id", k)
				}
				if !bytes.Equal(k[:sep], term) {
					if n >= upgradeChunk*16 {
						break // a whole term per chunk: the next one starts here
					}
					if err := flush(); err != nil {
						return err
					}
					term, ids = bytes.Clone(k[:sep]), ids[:0]
				}
				ids = append(ids, btoi(k[sep+1:]))
				n++
				postings++
			}
			if err := flush(); err != nil {
				return err
			}
			resume = bytes.Clone(k)
			if resume != nil {
				return nil
			}
			if err := tx.DeleteBucket(bucketTerms); err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(metaLayout, itob(5))
		})
		if err != nil {
			return fmt.Errorf("upgrading to layout 5: %w", err)
		}
	}
	if postings == 0 {
		// Nothing to pack: an empty terms bucket, or none.
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			if tx.Bucket(bucketTerms) != nil {
				if err := tx.DeleteBucket(bucketTerms); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketMeta).Put(metaLayout, itob(5))
		})
		if err != nil {
			return fmt.Errorf("upgrading to layout 5: %w", err)
		}
	}
	db.log.Info("database upgraded to layout 5: the search index is packed into blocks", "words", words, "postings", postings, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// upgradeFrom3 starts the search index's tail. Every message so far is in
// the terms bucket, so the merge watermark is the highest ID ever handed
// out; the tail bucket was created with the others and starts empty.
func (db *DB) upgradeFrom3() error {
	var merged uint64
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		// The highest ID handed out; the highest key too, in case the
		// sequence was left behind (CheckInvariants reports that), so no
		// message is above the watermark without a tail record.
		msgs := tx.Bucket(bucketMessages)
		merged = msgs.Sequence()
		if k, _ := msgs.Cursor().Last(); len(k) == 8 {
			merged = max(merged, btoi(k))
		}
		if err := meta.Put(metaTermsMerged, itob(merged)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(4))
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 4: %w", err)
	}
	db.log.Info("database upgraded to layout 4: new messages' words now go to the search index's tail and are merged in batches", "indexed_through", merged)
	return nil
}

// upgradeFrom2 starts the change log. Its bucket was created with the
// others and starts empty: changes made before the upgrade were never
// logged, so no stream can resume from before it.
func (db *DB) upgradeFrom2() error {
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaLayout, itob(3))
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 3: %w", err)
	}
	db.log.Info("database upgraded to layout 3: message changes are now logged for live streams")
	return nil
}

// upgradeFrom1 re-encodes users and builds the time and word indexes of
// every message, in chunks, then records layout 2.
func (db *DB) upgradeFrom1() error {
	start := time.Now()
	db.log.Info("upgrading database layout 1 to 2: building the search index; this runs once")
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		// Records are collected first and rewritten after: bbolt cursors are
		// not to be trusted across writes to their bucket.
		type record struct{ k, v []byte }
		var rewrite []record
		users := tx.Bucket(bucketUsers)
		err := users.ForEach(func(k, v []byte) error {
			if len(v) > 0 && v[0] == userRecordVersion {
				return nil // already binary: an earlier, interrupted upgrade did it
			}
			u, err := decodeUserJSON(btoi(k), v)
			if err != nil {
				return err
			}
			rewrite = append(rewrite, record{bytes.Clone(k), encodeUser(u)})
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range rewrite {
			if err := users.Put(r.k, r.v); err != nil {
				return err
			}
		}
		// Tokens gain a public handle and a last-use time (their creation,
		// the best guess there is).
		rewrite = rewrite[:0]
		tokens := tx.Bucket(bucketTokens)
		_ = tokens.ForEach(func(k, v []byte) error {
			if len(v) != layout1TokenLen {
				return nil
			}
			created := microsToTime(int64(binary.BigEndian.Uint64(v[8:])))
			t := &Token{
				ID:         newTokenID(),
				UserID:     binary.BigEndian.Uint64(v[0:]),
				CreatedAt:  created,
				LastUsedAt: created,
				ExpiresAt:  microsToTime(int64(binary.BigEndian.Uint64(v[16:]))),
			}
			rewrite = append(rewrite, record{bytes.Clone(k), encodeToken(t)})
			return nil
		})
		for _, r := range rewrite {
			if err := tokens.Put(r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("upgrading users and tokens: %w", err)
	}
	indexed := 0
	for done := false; !done; {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			fillGrowingBuckets(tx)
			meta := tx.Bucket(bucketMeta)
			next := uint64(1)
			if v := meta.Get(metaUpgradeNext); len(v) == 8 {
				next = btoi(v)
			}
			msgs := tx.Bucket(bucketMessages)
			c := msgs.Cursor()
			var chunk []*Message
			k, v := c.Seek(itob(next))
			for ; k != nil && len(chunk) < upgradeChunk; k, v = c.Next() {
				m, err := decodeMessage(btoi(k), v)
				if err != nil {
					return err
				}
				chunk = append(chunk, m)
			}
			var resume []byte
			if k != nil {
				resume = bytes.Clone(k)
			}
			// Layout 1 stored the wall clock as it was, so a clock that
			// stepped back left a message created "before" an older one.
			// Search turns since/until into ID bounds and relies on creation
			// times never falling as IDs rise: such a message takes the
			// time of the newest one before it, as new messages do.
			var newest time.Time
			if k, _ := tx.Bucket(bucketMsgsByTime).Cursor().Last(); len(k) >= 8 {
				newest = timeFromKey(k)
			}
			for _, m := range chunk {
				if m.CreatedAt.Before(newest) {
					m.CreatedAt = newest
					m.UpdatedAt = maxTime(m.UpdatedAt, newest)
					if err := msgs.Put(itob(m.ID), encodeMessage(m)); err != nil {
						return err
					}
				}
				newest = m.CreatedAt
			}
			// The owner entries exist already; indexLayout2 rewrites them
			// as they are, which costs little and keeps one code path.
			if err := indexLayout2(tx, chunk); err != nil {
				return err
			}
			n := len(chunk)
			k = resume
			indexed += n
			if k == nil {
				done = true
				if err := meta.Delete(metaUpgradeNext); err != nil {
					return err
				}
				return meta.Put(metaLayout, itob(2))
			}
			return meta.Put(metaUpgradeNext, binary.BigEndian.AppendUint64(nil, btoi(k)))
		})
		if err != nil {
			return fmt.Errorf("upgrading messages: %w", err)
		}
	}
	db.log.Info("database upgraded to layout 2", "messages_indexed", indexed, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// indexLayout2 adds every index entry of msgs as layout 2 had them: words
// in the terms bucket, a key per posting, which upgradeFrom4 then packs.
// An interrupted upgrade from layout 1 may be finished by another release
// than the one that began it (the previous one writes terms), so both
// must write the same bucket: the one both know.
func indexLayout2(tx *bbolt.Tx, msgs []*Message) error {
	terms, err := tx.CreateBucketIfNotExists(bucketTerms)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := indexOwnerAndTime(tx, m); err != nil {
			return err
		}
		for _, term := range sortedTerms(m.Content) {
			// term‖0‖id: a block key's shape, one posting to a key.
			if err := terms.Put(postingKey([]byte(term), m.ID), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
