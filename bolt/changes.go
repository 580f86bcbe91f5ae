package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
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

// A message's content lives in one change of the log only, its newest
// (see model.Change): bucketChangesByMessage maps each message with a
// change in the log to that change, and the write that edits or deletes
// the message scrubs it there, in its own transaction. A deletion logs no
// content. So neither the log nor a copy of the file keeps anything
// deleted or edited away.

// Change record layout (version 2): version, kind, flags, commit time (8),
// owner e-mail length (2) and e-mail, message ID (8), then the message
// record as encodeMessage writes it, its content empty when the change is
// scrubbed or a deletion. A TokensRevoked change keeps its account in the
// message record's owner, the rest of it empty; a SettingsChanged change
// keeps nothing but its kind and time. Version 1 (layouts 3 to 7)
// had no flags and kept the content an update replaced after the e-mail;
// only the upgrade to layout 8 reads it.
const (
	changeRecordVersion   = 2
	changeRecordVersionV1 = 1
	changeHeaderLen       = 1 + 1 + 1 + 8
	changeScrubbed        = 1 << 0 // flags: the content was scrubbed away
)

// changeAt reads a change record's commit time, in microseconds, without
// decoding it; false for a record too short to hold one.
func changeAt(v []byte) (int64, bool) {
	switch {
	case len(v) >= changeHeaderLen && v[0] == changeRecordVersion:
		return int64(binary.BigEndian.Uint64(v[3:])), true
	case len(v) >= 10 && v[0] == changeRecordVersionV1:
		return int64(binary.BigEndian.Uint64(v[2:])), true
	}
	return 0, false
}

func encodeChange(ch *model.Change) []byte {
	if ch.Kind == model.NotificationCreated {
		return encodeNotificationChange(ch)
	}
	if ch.Kind.Internal() {
		ch = &model.Change{Kind: ch.Kind, At: ch.At, Message: model.Message{OwnerID: ch.UserID}}
	}
	m := ch.Message
	var flags byte
	if ch.Scrubbed {
		flags |= changeScrubbed
	}
	if ch.Scrubbed || ch.Kind == model.MessageDeleted {
		m.Content = ""
	}
	email := m.OwnerEmail
	b := make([]byte, 0, changeHeaderLen+2+len(email)+8+messageHeaderLen+len(m.Content))
	b = append(b, changeRecordVersion, byte(ch.Kind), flags)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(ch.At)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(email)))
	b = append(b, email...)
	b = binary.BigEndian.AppendUint64(b, m.ID)
	return appendMessage(b, &m)
}

// decodeChange decodes a change record as stored: a scrubbed change comes
// with Scrubbed set and no content, never resolved to its message as it
// is now (ChangesAfter does that).
func decodeChange(seq uint64, b []byte) (*model.Change, error) {
	bad := fmt.Errorf("decode change %d: bad record", seq)
	if len(b) < changeHeaderLen+2 || b[0] != changeRecordVersion || b[2]&^changeScrubbed != 0 {
		return nil, bad
	}
	ch := &model.Change{Seq: seq, Kind: model.ChangeKind(b[1]), Scrubbed: b[2]&changeScrubbed != 0,
		At: microsToTime(int64(binary.BigEndian.Uint64(b[3:])))}
	rest := b[changeHeaderLen:]
	if ch.Kind == model.NotificationCreated {
		return decodeNotificationChange(ch, rest)
	}
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) < 2+n+8 {
		return nil, bad
	}
	email := string(rest[2 : 2+n])
	rest = rest[2+n:]
	m, err := decodeMessage(btoi(rest[:8]), rest[8:])
	if err != nil {
		return nil, bad
	}
	m.OwnerEmail = email
	switch ch.Kind {
	case model.MessageCreated, model.MessageUpdated:
		if ch.Scrubbed != (m.Content == "") {
			return nil, bad
		}
		ch.Message = *m
	case model.MessageDeleted:
		if ch.Scrubbed || m.Content != "" {
			return nil, bad
		}
		ch.Message = *m
	case model.TokensRevoked:
		if ch.Scrubbed || m.ID != 0 || m.OwnerID == 0 {
			return nil, bad
		}
		ch.UserID = m.OwnerID
	case model.SettingsChanged:
		if ch.Scrubbed || m.ID != 0 || m.OwnerID != 0 || email != "" {
			return nil, bad
		}
	default:
		return nil, bad
	}
	return ch, nil
}

// A NotificationCreated change's record holds, after the header, the
// notified account, the actor and the message (8 bytes each) and the
// kind of notification (1 byte); ChangesAfter reads the rest from the
// notification as it is then.
func encodeNotificationChange(ch *model.Change) []byte {
	n := ch.Notification
	b := make([]byte, 0, changeHeaderLen+8*3+1)
	b = append(b, changeRecordVersion, byte(ch.Kind), 0)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(ch.At)))
	b = binary.BigEndian.AppendUint64(b, ch.UserID)
	b = binary.BigEndian.AppendUint64(b, n.Actor.ID)
	b = binary.BigEndian.AppendUint64(b, n.MessageID)
	return append(b, byte(n.Kind))
}

func decodeNotificationChange(ch *model.Change, rest []byte) (*model.Change, error) {
	if len(rest) != 8*3+1 || ch.Scrubbed {
		return nil, fmt.Errorf("decode change %d: bad record", ch.Seq)
	}
	ch.UserID = binary.BigEndian.Uint64(rest)
	ch.Notification = &model.Notification{ID: ch.Seq, UserID: ch.UserID, At: ch.At,
		Actor: model.Profile{ID: binary.BigEndian.Uint64(rest[8:])}, MessageID: binary.BigEndian.Uint64(rest[16:]),
		Kind: model.NotificationKind(rest[24])}
	return ch, nil
}

// decodeChangeV1 decodes a record of layouts 3 to 7, dropping the content
// an update replaced.
func decodeChangeV1(seq uint64, b []byte) (*model.Change, error) {
	bad := fmt.Errorf("decode change %d: bad record", seq)
	const headerLen = 1 + 1 + 8
	if len(b) < headerLen+2 || b[0] != changeRecordVersionV1 {
		return nil, bad
	}
	ch := &model.Change{Seq: seq, Kind: model.ChangeKind(b[1]), At: microsToTime(int64(binary.BigEndian.Uint64(b[2:])))}
	rest := b[headerLen:]
	n := int(binary.BigEndian.Uint16(rest))
	if len(rest) < 2+n+4 {
		return nil, bad
	}
	email := string(rest[2 : 2+n])
	rest = rest[2+n:]
	n = int(binary.BigEndian.Uint32(rest))
	if len(rest) < 4+n+8 {
		return nil, bad
	}
	rest = rest[4+n:]
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
// making the change, and scrubs the content of m's change before it: the
// log keeps what m is now, never what it was.
func (db *DB) recordChange(tx *bbolt.Tx, kind model.ChangeKind, m *model.Message) error {
	byMessage := tx.Bucket(bucketChangesByMessage)
	key := itob(m.ID)
	if prev := byMessage.Get(key); prev != nil {
		if err := scrubChange(tx, btoi(prev)); err != nil {
			return err
		}
	}
	ch := &model.Change{Kind: kind, Message: *m}
	if kind == model.MessageDeleted {
		ch.Message.Content = ""
		if err := db.appendChange(tx, ch); err != nil {
			return err
		}
		return byMessage.Delete(key)
	}
	if err := db.appendChange(tx, ch); err != nil {
		return err
	}
	return byMessage.Put(key, itob(ch.Seq))
}

// scrubChange rewrites change seq without its content. A change trimmed
// from the log is gone already.
func scrubChange(tx *bbolt.Tx, seq uint64) error {
	log := tx.Bucket(bucketChanges)
	v := log.Get(itob(seq))
	if v == nil {
		return nil
	}
	ch, err := decodeChange(seq, v)
	if err != nil {
		return err
	}
	if ch.Scrubbed || ch.Kind == model.MessageDeleted || ch.Kind.Internal() {
		return nil
	}
	ch.Scrubbed = true
	return log.Put(itob(seq), encodeChange(ch))
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
// bytes, since one change may carry 40 KB of text.
const (
	feedMemory      = 4096
	feedMemoryBytes = 8 << 20
)

// changeSize estimates the memory a change holds.
func changeSize(ch *model.Change) int {
	return 200 + model.ChangeBytes(ch)
}

// changeFeed hands committed changes to readers without a disk read, and
// wakes them when there are new ones.
type changeFeed struct {
	mu     sync.Mutex
	head   uint64          // newest committed change
	floor  uint64          // highest change trimmed from the log
	recent []*model.Change // the newest changes, oldest first, contiguous up to head
	bytes  int             // changeSize of recent, summed
	// newest is each message's newest change in recent: an older one
	// was scrubbed on disk, and is answered as it would be read from
	// there (see resolve).
	newest map[uint64]*model.Change
	wait   chan struct{}
}

func (f *changeFeed) publish(chs []*model.Change) {
	if len(chs) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.newest == nil {
		f.newest = make(map[uint64]*model.Change)
	}
	f.recent = append(f.recent, chs...)
	for _, ch := range chs {
		f.bytes += changeSize(ch)
		if ofMessage(ch) {
			f.newest[ch.Message.ID] = ch
		}
	}
	// Drop from the front by reslicing, never by copying down: readers
	// hold slices of this array outside the lock, and append only ever
	// writes past the end of what they hold.
	drop := 0
	for len(f.recent)-drop > 1 && (len(f.recent)-drop > feedMemory || f.bytes > feedMemoryBytes) {
		old := f.recent[drop]
		f.bytes -= changeSize(old)
		if ofMessage(old) && f.newest[old.Message.ID] == old {
			delete(f.newest, old.Message.ID)
		}
		drop++
	}
	f.recent = f.recent[drop:]
	f.head = chs[len(chs)-1].Seq
	close(f.wait)
	f.wait = make(chan struct{})
}

// ofMessage reports whether ch is a change of a message.
func ofMessage(ch *model.Change) bool {
	switch ch.Kind {
	case model.MessageCreated, model.MessageUpdated, model.MessageDeleted:
		return true
	}
	return false
}

// resolve returns ch as the log on disk answers it: a change of a message
// changed since is scrubbed, and carries the message as it is now, or
// says it is gone. f.mu is held.
func (f *changeFeed) resolve(ch *model.Change) *model.Change {
	if ch.Kind != model.MessageCreated && ch.Kind != model.MessageUpdated {
		return ch
	}
	newest := f.newest[ch.Message.ID]
	if newest == nil || newest == ch {
		return ch
	}
	out := *ch
	out.Scrubbed = true
	if newest.Kind == model.MessageDeleted {
		out.Gone = true
		out.Message.Content = ""
	} else {
		out.Message = newest.Message
	}
	return &out
}

// ChangeHead returns the newest committed change's position (0 for an
// empty log) and a channel closed when a newer one commits.
func (db *DB) ChangeHead(context.Context) (uint64, <-chan struct{}, error) {
	db.feed.mu.Lock()
	defer db.feed.mu.Unlock()
	return db.feed.head, db.feed.wait, nil
}

// ChangesAfter returns up to max changes after position after, oldest
// first, and no more than about model.ChangeBatchBytes of them, and the
// head at the time of the call. A change of a message edited or deleted
// since comes scrubbed, with the message as it is now or Gone. It
// returns model.ErrChangeUnknown for a position the log no longer holds,
// or never held. The changes are shared with other readers and must not
// be modified.
func (db *DB) ChangesAfter(_ context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	return db.changesAfter(after, max, true)
}

// RecentChangesAfter is ChangesAfter, but for the changes the feed still
// holds in memory, which come as they committed, content edited away or
// deleted since included: what live streams are sent, however late the
// hub renders them. It never reads a change's content back from disk that
// ChangesAfter would not.
func (db *DB) RecentChangesAfter(_ context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	return db.changesAfter(after, max, false)
}

// changesAfter is ChangesAfter, whose changes from memory come as they
// committed unless resolve.
func (db *DB) changesAfter(after uint64, max int, resolve bool) ([]*model.Change, uint64, error) {
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
		var out []*model.Change
		bytes := 0
		for _, ch := range f.recent[i:] {
			if resolve {
				ch = f.resolve(ch)
			}
			if len(out) == max || len(out) > 0 && bytes+model.ChangeBytes(ch) > model.ChangeBatchBytes {
				break
			}
			bytes += model.ChangeBytes(ch)
			out = append(out, ch)
		}
		f.mu.Unlock()
		// Even as committed, a message's count of replies and its owner's
		// name are read as they are now, as from disk and as PostgreSQL
		// reads them: what the change did is as it was, who the owner is
		// and how many answered is as it is.
		if err := db.resolveNow(out); err != nil {
			return nil, head, err
		}
		return out, head, nil
	}
	f.mu.Unlock()

	var out []*model.Change
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if after < changesFloor(tx) {
			return model.ErrChangeUnknown
		}
		owners := newOwnerEmails(tx)
		bytes := 0
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Seek(itob(after + 1)); k != nil && len(out) < max && btoi(k) <= head; k, v = c.Next() {
			ch, err := decodeChange(btoi(k), v)
			if err != nil {
				return err
			}
			switch {
			case ch.Kind == model.NotificationCreated:
				resolveNotification(tx, owners, ch)
			case ch.Scrubbed:
				resolveScrubbed(tx, owners, ch)
			case ofMessage(ch):
				// The e-mail the record keeps stays for a deleted
				// account's; the handle and name are the owner's now.
				if card, ok := owners.card(ch.Message.OwnerID); ok {
					ch.Message.OwnerHandle, ch.Message.OwnerName = card.handle, card.name
				}
				if ch.Kind != model.MessageDeleted {
					joinRepliesIn(owners.counts, &ch.Message)
				}
			}
			if len(out) > 0 && bytes+model.ChangeBytes(ch) > model.ChangeBatchBytes {
				break
			}
			bytes += model.ChangeBytes(ch)
			out = append(out, ch)
		}
		return nil
	})
	if err != nil {
		return nil, head, err
	}
	return out, head, nil
}

// resolveNow brings the changes of chs that the feed holds in memory to
// what ChangesAfter reads from disk: notifications as they are now, and
// messages with their owner's current handle and name and their current
// count of replies. chs is the caller's; the changes in it are shared
// with other readers, so a change that differs is replaced by a copy.
func (db *DB) resolveNow(chs []*model.Change) error {
	if !slices.ContainsFunc(chs, func(ch *model.Change) bool {
		return ch.Kind == model.NotificationCreated || ch.Kind == model.MessageCreated || ch.Kind == model.MessageUpdated
	}) {
		return nil
	}
	return db.bolt.View(func(tx *bbolt.Tx) error {
		owners := newOwnerEmails(tx)
		for i, ch := range chs {
			switch {
			case ch.Kind == model.NotificationCreated:
				c := *ch
				resolveNotification(tx, owners, &c)
				chs[i] = &c
			case ch.Gone || ch.Kind != model.MessageCreated && ch.Kind != model.MessageUpdated:
			default:
				now := ch.Message
				if card, ok := owners.card(now.OwnerID); ok {
					now.OwnerHandle, now.OwnerName = card.handle, card.name
				}
				joinRepliesIn(owners.counts, &now)
				if now.OwnerHandle != ch.Message.OwnerHandle || now.OwnerName != ch.Message.OwnerName || now.Replies != ch.Message.Replies {
					c := *ch
					c.Message = now
					chs[i] = &c
				}
			}
		}
		return nil
	})
}

// resolveScrubbed fills scrubbed change ch with its message as it is now,
// or marks it gone: deleted, or its account deleted.
func resolveScrubbed(tx *bbolt.Tx, owners *ownerEmails, ch *model.Change) {
	b := tx.Bucket(bucketMessages).Get(itob(ch.Message.ID))
	if b != nil {
		if m, err := decodeMessage(ch.Message.ID, b); err == nil && owners.join(m) {
			joinRepliesIn(owners.counts, m)
			ch.Message = *m
			return
		}
	}
	ch.Gone = true
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
		if at, ok := changeAt(v); ok {
			return at
		}
		return math.MaxInt64 // malformed: left for the check to report
	}
	// A message whose newest change goes has none in the log left.
	removing := func(tx *bbolt.Tx, _ uint64, v []byte) error {
		if len(v) < changeHeaderLen+2 || v[0] != changeRecordVersion || v[2]&changeScrubbed != 0 {
			return nil
		}
		if k := model.ChangeKind(v[1]); k != model.MessageCreated && k != model.MessageUpdated {
			return nil
		}
		if i := changeHeaderLen + 2 + int(binary.BigEndian.Uint16(v[changeHeaderLen:])); len(v) >= i+8 {
			return tx.Bucket(bucketChangesByMessage).Delete(bytes.Clone(v[i : i+8]))
		}
		return nil
	}
	return db.trimFront(ctx, bucketChanges, keepFor, keepMax, at, removing, func(tx *bbolt.Tx, floor uint64) error {
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
// keepFor or keepMax leaves that bound off. removing, when set, is shown
// each entry before it goes, in its transaction; onChunk, when set, runs
// in each transaction that removed some, with the highest sequence
// removed.
func (db *DB) trimFront(ctx context.Context, name []byte, keepFor time.Duration, keepMax int, at func(v []byte) int64,
	removing func(tx *bbolt.Tx, seq uint64, v []byte) error, onChunk func(tx *bbolt.Tx, floor uint64) error) (int, error) {
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
				if removing != nil {
					if err := removing(tx, seq, v); err != nil {
						return err
					}
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
