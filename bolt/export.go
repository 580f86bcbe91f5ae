package bolt

import (
	"bytes"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Export reads everything a stopped database holds, for herald migrate
// to copy into another store: accounts with their password hashes, roles,
// suspensions and last sightings, tokens by hash with their handles and
// times, messages as stored, the change log as trimming left it,
// invitations with their uses, outstanding password resets, the audit
// log and the records of creates made with an Idempotency-Key (so a
// client retrying across the copy still gets its first answer), with the
// counters that say where IDs and positions go on. It reads
// in one read transaction, so what it hands over is one consistent state,
// and it never writes. The other buckets are indexes of these (by e-mail,
// token owner, role, invitation code, word), which the copy's store keeps
// its own way.

// Visitor receives what Export reads, in that order: every user, every
// token, every message by ascending ID, every change by ascending
// position, every invitation by ascending ID, every password reset, and
// every audit entry by ascending ID, every idempotency record, every
// notification and every account's notification marks, and the values
// HTTPS with ACME keeps, and the settings.
// Accounts come first, so a reset or a record comes after the account it
// is for. A function that returns an error
// ends the export with it.
type Visitor struct {
	User    func(*model.User) error
	Token   func(*model.Token) error
	Message func(*model.Message) error
	Change  func(*model.Change) error
	Invite  func(*model.Invite) error
	Reset   func(*model.PasswordReset) error
	Audit   func(*model.AuditEntry) error
	// IdempotencyKey receives records live or not: the copy's store
	// tells them apart by their time, as this one does.
	IdempotencyKey func(*model.IdempotencyRecord) error
	// Notification receives every notification, by account and ID, as
	// stored: its actor's ID only, no message, Read false.
	Notification func(*model.Notification) error
	// NotificationMark receives every account's notification marks: the
	// ID its notifications are read up to (and including).
	NotificationMark func(userID, readUpTo uint64) error
	// Cert receives the values HTTPS with ACME keeps, by name.
	Cert func(name string, data []byte) error
	// PushKeys receives Web Push's key pair, once, when there is one;
	// PushSubscription every subscription, by ascending ID; PushDelivery
	// every queued push; PushPosition the sender's place in the change
	// log, once, when it has one. Each may be nil (not read).
	PushKeys         func(model.VAPIDKeys) error
	PushSubscription func(*model.PushSubscription) error
	PushDelivery     func(*model.PushDelivery) error
	PushPosition     func(uint64) error
	// Settings receives the settings the database holds, last, once.
	Settings func(model.Settings) error
}

// Exported is where the database's counters stand, and how many records
// of the kinds the store does not count (see Counts) Export read.
type Exported struct {
	// UsersSeq, MessagesSeq, InvitesSeq and AuditSeq are the last IDs
	// given out, deleted (revoked, trimmed) ones included: a copy must not
	// give them out again.
	UsersSeq, MessagesSeq, InvitesSeq, AuditSeq uint64
	// ChangesHead is the newest change's position, ChangesFloor the
	// highest trimmed away.
	ChangesHead, ChangesFloor uint64
	// Changes is how many changes the log holds, Invites how many
	// invitations, Resets how many password resets, Audit how many audit
	// entries, IdempotencyKeys how many idempotency records,
	// Notifications how many notifications.
	Changes, Invites, Resets, Audit, IdempotencyKeys, Notifications int
	// Certs is how many values HTTPS with ACME keeps.
	Certs int
	// PushSubscriptionsSeq is the last push subscription ID given out;
	// PushSubscriptions and PushPending how many subscriptions and
	// queued pushes Export read.
	PushSubscriptionsSeq           uint64
	PushSubscriptions, PushPending int
}

// ErrNotExportable: the file must be opened by this Herald once before it
// can be exported (an older layout, or an account deletion or an
// administrator's removal of messages unfinished).
var ErrNotExportable = errors.New("the database must be opened by this Herald once first")

// Export hands the snapshot's contents to v. It refuses a file in an
// older layout, or one holding an unfinished account deletion or removal
// of an account's messages, which Open upgrades or finishes: start this
// Herald on it once, and stop it. A copy of an unfinished removal would
// bring back messages that were removed for everyone else, or lose the
// mark that finishes it.
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
		if k, _ := tx.Bucket(bucketPurging).Cursor().First(); k != nil {
			return fmt.Errorf("an administrator's removal of the messages of account %d is unfinished: %w", btoi(k), ErrNotExportable)
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
		if err := log.ForEach(func(k, b []byte) error {
			ch, err := decodeChange(btoi(k), b)
			if err != nil {
				return err
			}
			out.Changes++
			return v.Change(ch)
		}); err != nil {
			return err
		}
		invites := tx.Bucket(bucketInvites)
		out.InvitesSeq = invites.Sequence()
		if err := invites.ForEach(func(k, b []byte) error {
			inv, err := decodeInvite(btoi(k), b)
			if err != nil {
				return err
			}
			out.Invites++
			return v.Invite(inv)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketResets).ForEach(func(k, b []byte) error {
			var code model.TokenHash
			if len(k) != len(code) {
				return fmt.Errorf("resets: key %x is not a SHA-256", k)
			}
			copy(code[:], k)
			r, err := decodeReset(code, b)
			if err != nil {
				return err
			}
			if users.Get(itob(r.UserID)) == nil {
				return fmt.Errorf("password reset %x…: its account %d does not exist", code[:4], r.UserID)
			}
			out.Resets++
			return v.Reset(r)
		}); err != nil {
			return err
		}
		audit := tx.Bucket(bucketAudit)
		out.AuditSeq = audit.Sequence()
		if err := audit.ForEach(func(k, b []byte) error {
			e, err := decodeAudit(btoi(k), b)
			if err != nil {
				return err
			}
			out.Audit++
			return v.Audit(e)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketIdempotency).ForEach(func(k, b []byte) error {
			r, err := decodeIdempotency(k, b)
			if err != nil {
				return err
			}
			out.IdempotencyKeys++
			return v.IdempotencyKey(r)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketNotifications).ForEach(func(k, b []byte) error {
			if len(k) != 16 {
				return fmt.Errorf("notifications: bad key %x", k)
			}
			n, err := decodeNotification(btoi(k[:8]), btoi(k[8:]), b)
			if err != nil {
				return err
			}
			out.Notifications++
			return v.Notification(n)
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketNotificationMarks).ForEach(func(k, b []byte) error {
			if len(k) != 8 || len(b) != 16 {
				return fmt.Errorf("notification marks: bad record of %x", k)
			}
			return v.NotificationMark(btoi(k), btoi(b[:8]))
		}); err != nil {
			return err
		}
		err := tx.Bucket(bucketCerts).ForEach(func(k, b []byte) error {
			out.Certs++
			return v.Cert(string(k), bytes.Clone(b))
		})
		if err != nil {
			return err
		}
		if err := exportPush(tx, v, &out); err != nil {
			return err
		}
		return v.Settings(readSettings(tx))
	})
	return out, err
}
