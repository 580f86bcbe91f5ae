package bolt

import (
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Export reads everything a stopped database holds, for herald migrate
// to copy into another store: accounts with their password hashes,
// tokens by hash with their handles and times, messages as stored, and the
// change log as trimming left it, with the counters that say where IDs
// and positions go on. It reads in one read transaction, so what it hands
// over is one consistent state, and it never writes.

// Visitor receives what Export reads, in that order: every user, every
// token, every message by ascending ID, every change by ascending
// position. A function that returns an error ends the export with it.
type Visitor struct {
	User    func(*model.User) error
	Token   func(*model.Token) error
	Message func(*model.Message) error
	Change  func(*model.Change) error
}

// Exported is where the database's counters stand.
type Exported struct {
	// UsersSeq and MessagesSeq are the last IDs given out, deleted ones
	// included: a copy must not give them out again.
	UsersSeq, MessagesSeq uint64
	// ChangesHead is the newest change's position, ChangesFloor the
	// highest trimmed away.
	ChangesHead, ChangesFloor uint64
	// Changes is how many changes the log holds.
	Changes int
}

// ErrNotExportable: the file must be opened by this Herald once before it
// can be exported (an older layout, or an account deletion unfinished).
var ErrNotExportable = errors.New("the database must be opened by this Herald once first")

// Export hands the snapshot's contents to v. It refuses a file in an
// older layout, or one holding an unfinished account deletion, which
// Open upgrades or finishes: start this Herald on it once, and stop it.
func (s *Snapshot) Export(v Visitor) (Exported, error) {
	var out Exported
	err := s.bolt.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("it has no layout version: %w", ErrNotExportable)
		}
		if layout := meta.Get(metaLayout); len(layout) != 8 || btoi(layout) != currentLayout || meta.Get(metaOwnerTermsNext) != nil {
			return fmt.Errorf("it is not in the current layout (%d): %w", currentLayout, ErrNotExportable)
		}
		if k, _ := tx.Bucket(bucketDeleting).Cursor().First(); k != nil {
			return fmt.Errorf("the deletion of account %d is unfinished: %w", btoi(k), ErrNotExportable)
		}
		users := tx.Bucket(bucketUsers)
		out.UsersSeq = users.Sequence()
		if err := users.ForEach(func(k, b []byte) error {
			u, err := decodeUser(btoi(k), b)
			if err != nil {
				return err
			}
			return v.User(u)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketTokens).ForEach(func(k, b []byte) error {
			var h model.TokenHash
			copy(h[:], k)
			t, err := decodeToken(h, b)
			if err != nil {
				return err
			}
			return v.Token(t)
		}); err != nil {
			return err
		}
		msgs := tx.Bucket(bucketMessages)
		out.MessagesSeq = msgs.Sequence()
		owners := newOwnerEmails(tx)
		if err := msgs.ForEach(func(k, b []byte) error {
			m, err := decodeMessage(btoi(k), b)
			if err != nil {
				return err
			}
			if !owners.join(m) {
				return fmt.Errorf("message %d has no owner (account %d)", m.ID, m.OwnerID)
			}
			return v.Message(m)
		}); err != nil {
			return err
		}
		log := tx.Bucket(bucketChanges)
		out.ChangesHead, out.ChangesFloor = log.Sequence(), changesFloor(tx)
		return log.ForEach(func(k, b []byte) error {
			ch, err := decodeChange(btoi(k), b)
			if err != nil {
				return err
			}
			out.Changes++
			return v.Change(ch)
		})
	})
	return out, err
}
