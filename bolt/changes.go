package bolt

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// The change log. Every create, update and delete of a message, and every
// revocation of an account's tokens, appends a model.Change to the changes
// bucket in the transaction that makes it, so a change is in the log if
// and only if it committed, and the log's order is commit order. Live streams tail the log: recent changes are handed over in
// memory as each commit lands (see changeFeed), older ones are read back
// from the bucket, which is trimmed from the front by age and count. The
// highest sequence ever trimmed is kept in meta, so a reader asking for a
// position the log no longer holds is told so instead of silently missing
// what was there.

var metaChangesFloor = []byte("changes_floor") // highest sequence trimmed from the log

// Change record layout: version, kind, commit time (8), owner e-mail length
// (2) and e-mail, replaced content length (4) and content, message ID (8),
// then the message record as encodeMessage writes it. A TokensRevoked
// change (layout 7) keeps its account in the message record's owner, the
// rest of it empty.
const (
	changeRecordVersion = 1
	changeHeaderLen     = 1 + 1 + 8
)

func encodeChange(ch *model.Change) []byte {
	if ch.Kind == model.TokensRevoked {
		ch = &model.Change{Kind: ch.Kind, At: ch.At, Message: model.Message{OwnerID: ch.UserID}}
	}
	email := ch.Message.OwnerEmail
	b := make([]byte, 0, changeHeaderLen+2+len(email)+4+len(ch.Before)+8+messageHeaderLen+len(ch.Message.Content))
	b = append(b, changeRecordVersion, byte(ch.Kind))
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(ch.At)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(email)))
	b = append(b, email...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ch.Before)))
	b = append(b, ch.Before...)
	b = binary.BigEndian.AppendUint64(b, ch.Message.ID)
	return appendMessage(b, &ch.Message)
}

func decodeChange(seq uint64, b []byte) (*model.Change, error) {
	bad := fmt.Errorf("decode change %d: bad record", seq)
	if len(b) < changeHeaderLen+2 || b[0] != changeRecordVersion {
		return nil, bad
	}
	ch := &model.Change{Seq: seq, Kind: model.ChangeKind(b[1]), At: microsToTime(int64(binary.BigEndian.Uint64(b[2:])))}
	rest := b[changeHeaderLen:]
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) < 2+n+4 {
		return nil, bad
	}
	email := string(rest[2 : 2+n])
	rest = rest[2+n:]
	n = int(binary.BigEndian.Uint32(rest))
	if len(rest) < 4+n {
		return nil, bad
	}
	ch.Before = string(rest[4 : 4+n])
	rest = rest[4+n:]
	if len(rest) < 8 {
		return nil, bad
	}
	m, err := decodeMessage(btoi(rest[:8]), rest[8:])
	if err != nil {
		return nil, bad
	}
	m.OwnerEmail = email
	switch ch.Kind {
	case model.MessageCreated, model.MessageUpdated, model.MessageDeleted:
		ch.Message = *m
	case model.TokensRevoked:
		if m.ID != 0 || m.OwnerID == 0 {
			return nil, bad
		}
		ch.UserID = m.OwnerID
	default:
		return nil, bad
	}
	return ch, nil
}

// recordChange appends a change of m to the log inside tx, the transaction
// making the change.
func (db *DB) recordChange(tx *bbolt.Tx, kind model.ChangeKind, m *model.Message, before string) error {
	return db.appendChange(tx, &model.Change{Kind: kind, Message: *m, Before: before})
}

// recordRevocation appends to the log, inside the transaction deleting
// them, that tokens of userID stopped working, so live streams of that
// account check theirs. Tokens that expire need none: a stream knows its
// token's expiry.
func (db *DB) recordRevocation(tx *bbolt.Tx, userID uint64) error {
	return db.appendChange(tx, &model.Change{Kind: model.TokensRevoked, UserID: userID})
}

// appendChange gives ch the log's next position and the time, and stores
// it. It runs on the committer, which hands the change to the feed once
// the transaction is on disk.
func (db *DB) appendChange(tx *bbolt.Tx, ch *model.Change) error {
	log := tx.Bucket(bucketChanges)
	seq, err := log.NextSequence()
	if err != nil {
		return err
	}
	ch.Seq, ch.At = seq, db.clock()
	if err := log.Put(itob(seq), encodeChange(ch)); err != nil {
		return err
	}
	db.writes.pending = append(db.writes.pending, ch)
	return nil
}

// The feed keeps the newest changes in memory, at most feedMemory of them
// and about feedMemoryBytes of content: enough for the stream hub to catch
// up after a burst of commits without reading the disk, and bounded in
// bytes, since one change may carry 80 KB of text.
const (
	feedMemory      = 4096
	feedMemoryBytes = 8 << 20
)

// changeSize estimates the memory a change holds.
func changeSize(ch *model.Change) int {
	return 200 + len(ch.Message.Content) + len(ch.Before) + len(ch.Message.OwnerEmail)
}

// changeFeed hands committed changes to readers without a disk read, and
// wakes them when there are new ones.
type changeFeed struct {
	mu     sync.Mutex
	head   uint64          // newest committed change
	floor  uint64          // highest change trimmed from the log
	recent []*model.Change // the newest changes, oldest first, contiguous up to head
	bytes  int             // changeSize of recent, summed
	wait   chan struct{}
}

func (f *changeFeed) publish(chs []*model.Change) {
	if len(chs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recent = append(f.recent, chs...)
	for _, ch := range chs {
		f.bytes += changeSize(ch)
	}
	// Drop from the front by reslicing, never by copying down: readers
	// hold slices of this array outside the lock, and append only ever
	// writes past the end of what they hold.
	drop := 0
	for len(f.recent)-drop > 1 && (len(f.recent)-drop > feedMemory || f.bytes > feedMemoryBytes) {
		f.bytes -= changeSize(f.recent[drop])
		drop++
	}
	f.recent = f.recent[drop:]
	f.head = chs[len(chs)-1].Seq
	close(f.wait)
	f.wait = make(chan struct{})
}

// ChangeHead returns the newest committed change's position (0 for an
// empty log) and a channel closed when a newer one commits.
func (db *DB) ChangeHead(context.Context) (uint64, <-chan struct{}, error) {
	db.feed.mu.Lock()
	defer db.feed.mu.Unlock()
	return db.feed.head, db.feed.wait, nil
}

// ChangesAfter returns up to max changes after position after, oldest
// first, and the head at the time of the call. It returns model.ErrChangeUnknown
// for a position the log no longer holds, or never held. The changes are
// shared with other readers and must not be modified.
func (db *DB) ChangesAfter(_ context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	f := &db.feed
	f.mu.Lock()
	head, floor := f.head, f.floor
	if after < floor || after > head {
		f.mu.Unlock()
		return nil, head, model.ErrChangeUnknown
	}
	if after == head {
		f.mu.Unlock()
		return nil, head, nil
	}
	if len(f.recent) > 0 && after+1 >= f.recent[0].Seq {
		i := int(after + 1 - f.recent[0].Seq)
		j := min(len(f.recent), i+max)
		out := f.recent[i:j:j]
		f.mu.Unlock()
		return out, head, nil
	}
	f.mu.Unlock()

	var out []*model.Change
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if after < changesFloor(tx) {
			return model.ErrChangeUnknown
		}
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Seek(itob(after + 1)); k != nil && len(out) < max && btoi(k) <= head; k, v = c.Next() {
			ch, err := decodeChange(btoi(k), v)
			if err != nil {
				return err
			}
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, head, err
	}
	return out, head, nil
}

func changesFloor(tx *bbolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(metaChangesFloor); len(v) == 8 {
		return btoi(v)
	}
	return 0
}

// trimChunk bounds the entries one trim transaction removes.
const trimChunk = 500

// TrimChanges removes changes older than keepFor, and the oldest beyond the
// newest keepMax, trimChunk per transaction, and returns how many it
// removed. A zero keepFor or keepMax leaves that bound off. The highest
// position removed is kept as the log's floor.
func (db *DB) TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	at := func(v []byte) int64 {
		if len(v) < changeHeaderLen {
			return math.MaxInt64 // malformed: left for the check to report
		}
		return int64(binary.BigEndian.Uint64(v[2:]))
	}
	return db.trimFront(ctx, bucketChanges, keepFor, keepMax, at, func(tx *bbolt.Tx, floor uint64) error {
		tx.OnCommit(func() {
			db.feed.mu.Lock()
			db.feed.floor = max(db.feed.floor, floor)
			db.feed.mu.Unlock()
		})
		return tx.Bucket(bucketMeta).Put(metaChangesFloor, itob(floor))
	})
}

// trimFront removes from the front of a log (a bucket keyed by rising
// sequence, whose entries at reads the time of, in microseconds) the
// entries older than keepFor and the oldest beyond the newest keepMax,
// trimChunk per transaction, and returns how many it removed. A zero
// keepFor or keepMax leaves that bound off. onChunk, when set, runs in
// each transaction that removed some, with the highest sequence removed.
func (db *DB) trimFront(ctx context.Context, name []byte, keepFor time.Duration, keepMax int, at func(v []byte) int64, onChunk func(tx *bbolt.Tx, floor uint64) error) (int, error) {
	removed := 0
	for {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		n := 0
		err := db.writes.upkeep(func(tx *bbolt.Tx) error {
			n = 0
			log := tx.Bucket(name)
			head := log.Sequence()
			cutoff := timeToMicros(db.clock().Add(-keepFor))
			var old [][]byte
			var floor uint64
			c := log.Cursor()
			for k, v := c.First(); k != nil && len(old) < trimChunk; k, v = c.Next() {
				seq := btoi(k)
				tooMany := keepMax > 0 && head-seq >= uint64(keepMax)
				tooOld := keepFor > 0 && at(v) < cutoff
				if !tooMany && !tooOld {
					break
				}
				old = append(old, k)
				floor = seq
			}
			// Deleting while the cursor walks would move it; delete after.
			for _, k := range old {
				if err := log.Delete(k); err != nil {
					return err
				}
			}
			n = len(old)
			if n == 0 || onChunk == nil {
				return nil
			}
			return onChunk(tx, floor)
		})
		if err != nil {
			return removed, err
		}
		removed += n
		if n < trimChunk {
			return removed, nil
		}
	}
}

// openFeed starts the feed at the log's head and floor as stored.
func (db *DB) openFeed() error {
	db.feed.wait = make(chan struct{})
	return db.bolt.View(func(tx *bbolt.Tx) error {
		db.feed.head = tx.Bucket(bucketChanges).Sequence()
		db.feed.floor = changesFloor(tx)
		return nil
	})
}
