package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// maxProblems bounds a report: a badly damaged file should not produce a
// report larger than the file.
const maxProblems = 100

// CheckInvariants walks every record and index and reports each way they
// disagree: an index entry pointing at nothing or at the wrong record, a
// record missing from an index, two accounts with one e-mail, a token of a
// missing user, a sequence behind its highest ID. It reads one consistent
// snapshot. An empty list means the database is sound.
func (db *DB) CheckInvariants() ([]string, error) {
	c := checker{tail: db.tail}
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		c.tx = tx
		if !c.layout() {
			return nil // without its buckets there is nothing more to walk
		}
		c.guarded("users", c.users)
		c.guarded("tokens", c.tokens)
		c.guarded("messages", c.messages)
		c.guarded("changes", c.changes)
		c.guarded("administration", c.administration)
		c.guarded("idempotency", c.idempotency)
		c.guarded("certs", c.certs)
		c.guarded("people", c.people)
		c.guarded("push", c.push)
		return nil
	})
	return c.problems, err
}

// guarded runs walk, one part of the check. The walks check what they
// read (keys of 8 bytes for IDs, records of their layout); should one
// meet what it did not look for, in a file damaged in a way no walk
// foresaw or through a bug of the check's own, that part stops, says so
// with where it stopped, and the other parts are still walked: the check
// reports rather than crashes, and never claims damage it cannot be sure
// of.
func (c *checker) guarded(part string, walk func()) {
	defer func() {
		if r := recover(); r != nil {
			c.addf("%s: the check stopped at something it could not read (%v, at %s): the file may be damaged, or the check may be wrong; the parts after it were not checked",
				part, r, panicSite())
		}
	}()
	walk()
}

// panicSite is where the panic being recovered was raised: the innermost
// function of this package on the stack.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasPrefix(f.Function, "herald/bolt.") && !strings.Contains(f.Function, "panicSite") && !strings.Contains(f.Function, ".guarded") {
			return fmt.Sprintf("%s:%d", f.Function, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// changes checks the change log: records that decode, positions above the
// trimmed floor and no further than the log's sequence, so a stream
// resuming from any position it was given is answered truthfully; and
// that it keeps a message's content in one change only, the newest of a
// message that exists, which changes_by_message finds.
func (c *checker) changes() {
	log := c.tx.Bucket(bucketChanges)
	c.sequenceAhead(bucketChanges)
	floor := changesFloor(c.tx)
	if floor > log.Sequence() {
		c.addf("meta/changes_floor %d is beyond the change log's sequence %d", floor, log.Sequence())
	}
	msgs, byMessage := c.tx.Bucket(bucketMessages), c.tx.Bucket(bucketChangesByMessage)
	// Trimming only removes from the front, so the log runs without a gap
	// from just above the floor to its sequence; a gap would stall every
	// stream resuming across it.
	next := floor + 1
	holding := make(map[uint64]uint64) // message ID → the change that holds its content
	_ = log.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			c.addf("changes: key %x is not an 8-byte position", k)
			return nil
		}
		seq := btoi(k)
		if seq <= floor {
			c.addf("change %d: at or below the trimmed floor %d", seq, floor)
		} else if seq != next {
			c.addf("changes %d to %d are missing from the log", next, seq-1)
		}
		next = seq + 1
		ch, err := decodeChange(seq, v)
		if err != nil {
			c.addf("changes: %v", err)
			return nil
		}
		if ch.Kind != model.MessageCreated && ch.Kind != model.MessageUpdated || ch.Scrubbed {
			return nil
		}
		id := ch.Message.ID
		if before, ok := holding[id]; ok {
			c.addf("changes %d and %d both hold the content of message %d; only the newest may", before, seq, id)
		}
		holding[id] = seq
		if msgs.Get(itob(id)) == nil {
			c.addf("change %d holds the content of message %d, which does not exist", seq, id)
		}
		if v := byMessage.Get(itob(id)); v == nil || btoi(v) != seq {
			c.addf("changes_by_message: message %d is missing, or not at change %d, which holds its content", id, seq)
		}
		return nil
	})
	if seq := log.Sequence(); next <= seq && floor < seq {
		c.addf("changes %d to %d are missing from the log", next, seq)
	}
	_ = byMessage.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) != 8 {
			c.addf("changes_by_message: entry %x → %x is not two 8-byte numbers", k, v)
		} else if holding[btoi(k)] != btoi(v) {
			c.addf("changes_by_message: message %d points at change %d, which does not hold its content", btoi(k), btoi(v))
		}
		return nil
	})
}

type checker struct {
	tx       *bbolt.Tx
	tail     *tailIndex // nil: not checked
	problems []string
}

func (c *checker) addf(format string, args ...any) {
	switch {
	case len(c.problems) < maxProblems:
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	case len(c.problems) == maxProblems:
		c.problems = append(c.problems, "… further problems not listed")
	}
}

// layout reports missing buckets, a layout other than the current one and
// an upgrade left unfinished; it returns false for any of them, as the
// current layout's rules cannot be checked on a file not yet in it.
func (c *checker) layout() bool {
	// An upgrade's marker or the version first: an older layout lacks the
	// buckets of newer ones, and its problem is only that it has not been
	// upgraded, or not wholly.
	if meta := c.tx.Bucket(bucketMeta); meta != nil {
		for _, marker := range [][]byte{metaUpgradeNext, metaOwnerTermsNext, metaUsersNext, metaChangesNext} {
			if meta.Get(marker) != nil {
				c.addf("meta/%s is set: a layout upgrade was interrupted; start herald once to finish it", marker)
				return false
			}
		}
		if v := meta.Get(metaLayout); len(v) != 8 || btoi(v) != currentLayout {
			c.addf("meta/layout is %x, want %d (a database of an older Herald: start herald once to upgrade it)", v, currentLayout)
			return false
		}
	}
	complete := true
	for _, name := range allBuckets {
		if c.tx.Bucket(name) == nil {
			c.addf("bucket %s is missing", name)
			complete = false
		}
	}
	return complete
}

// sequenceAhead reports a bucket whose next ID would reuse a stored one.
func (c *checker) sequenceAhead(name []byte) {
	b := c.tx.Bucket(name)
	if k, _ := b.Cursor().Last(); len(k) == 8 && b.Sequence() < btoi(k) {
		c.addf("%s: sequence %d is behind the highest ID %d", name, b.Sequence(), btoi(k))
	}
}

func (c *checker) users() {
	users, byEmail := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketUsersByEmail)
	bySkeleton, byHandle := c.tx.Bucket(bucketUsersBySkeleton), c.tx.Bucket(bucketUsersByHandle)
	c.sequenceAhead(bucketUsers)
	missing, skeletonMissing, handleMissing := false, false, false
	_ = c.tx.Bucket(bucketDeleting).ForEach(func(k, _ []byte) error {
		if users.Get(k) != nil {
			c.addf("account %d is marked as being deleted but still exists", btoi(k))
		}
		return nil
	})
	n := 0
	_ = users.ForEach(func(k, v []byte) error {
		n++
		if len(k) != 8 {
			c.addf("users: key %x is not an 8-byte ID", k)
			return nil
		}
		u, err := decodeUser(btoi(k), v)
		if err != nil {
			c.addf("users: %v", err)
			return nil
		}
		if got := byEmail.Get(emailKey(u.Email)); !bytes.Equal(got, k) {
			missing = true
			c.addf("user %d: users_by_email[%q] is %x, not this user", u.ID, emailKey(u.Email), got)
		}
		if bySkeleton.Get(skeletonKey(emailSkeleton(u.Email), u.ID)) == nil {
			skeletonMissing = true
			c.addf("user %d: not in users_by_skeleton under %q", u.ID, emailSkeleton(u.Email))
		}
		var rules model.ValidationError
		if rules.CheckHandle("handle", u.Handle); rules.Err() != nil {
			c.addf("user %d: handle %q: %v", u.ID, u.Handle, rules.Err())
		} else if got := byHandle.Get([]byte(u.Handle)); !bytes.Equal(got, k) {
			handleMissing = true
			c.addf("user %d: users_by_handle[%q] is %x, not this user", u.ID, u.Handle, got)
		}
		rules = model.ValidationError{}
		if rules.CheckName("name", u.Name); rules.Err() != nil {
			c.addf("user %d: name %q: %v", u.ID, u.Name, rules.Err())
		}
		return nil
	})
	if got := byHandle.Stats().KeyN; handleMissing || got != n {
		// Each user accounts for one entry above; any other is dangling.
		_ = byHandle.ForEach(func(k, v []byte) error {
			b := users.Get(v)
			if b == nil {
				c.addf("users_by_handle[%q] points at missing user %x", k, v)
				return nil
			}
			if u, err := decodeUser(btoi(v), b); err == nil && u.Handle != string(k) {
				c.addf("users_by_handle[%q] points at user %d, whose handle is %q", k, u.ID, u.Handle)
			}
			return nil
		})
	}
	if got := bySkeleton.Stats().KeyN; skeletonMissing || got != n {
		// Each user accounts for one entry above; any other is dangling.
		_ = bySkeleton.ForEach(func(k, _ []byte) error {
			if len(k) < 9 || k[len(k)-9] != 0 {
				c.addf("users_by_skeleton: key %x is not skeleton‖0‖ID", k)
				return nil
			}
			id, skeleton := btoi(k[len(k)-8:]), k[:len(k)-9]
			b := users.Get(itob(id))
			if b == nil {
				c.addf("users_by_skeleton[%q] points at missing user %d", skeleton, id)
				return nil
			}
			if u, err := decodeUser(id, b); err == nil && !bytes.Equal(emailSkeleton(u.Email), skeleton) {
				c.addf("users_by_skeleton[%q] holds user %d, whose e-mail is %q", skeleton, u.ID, u.Email)
			}
			return nil
		})
	}
	if got := byEmail.Stats().KeyN; missing || got != n {
		// Each user accounts for one entry above; any other is dangling.
		_ = byEmail.ForEach(func(k, v []byte) error {
			b := users.Get(v)
			if b == nil {
				c.addf("users_by_email[%q] points at missing user %x", k, v)
				return nil
			}
			if u, err := decodeUser(btoi(v), b); err == nil && !bytes.Equal(emailKey(u.Email), k) {
				c.addf("users_by_email[%q] points at user %d, whose e-mail is %q", k, u.ID, u.Email)
			}
			return nil
		})
	}
}

func (c *checker) tokens() {
	users, tokens, byUser := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketTokens), c.tx.Bucket(bucketTokensByUser)
	n, missing := 0, false
	// A public ID names one token of its user: revoking by ID must not be
	// able to pick between two.
	ids := make(map[uint64]map[model.TokenID]bool)
	_ = tokens.ForEach(func(k, v []byte) error {
		n++
		var h model.TokenHash
		if len(k) != len(h) {
			c.addf("tokens: key %x is not a SHA-256", k)
			return nil
		}
		copy(h[:], k)
		tok, err := decodeToken(h, v)
		if err != nil {
			c.addf("tokens: %v", err)
			return nil
		}
		// Token hashes are secrets' digests: report a short prefix only.
		if users.Get(itob(tok.UserID)) == nil {
			c.addf("token %x…: its user %d does not exist", k[:4], tok.UserID)
		}
		if byUser.Get(compositeKey(tok.UserID, k)) == nil {
			missing = true
			c.addf("token %x…: no tokens_by_user entry for user %d", k[:4], tok.UserID)
		}
		if ids[tok.UserID] == nil {
			ids[tok.UserID] = make(map[model.TokenID]bool)
		}
		if ids[tok.UserID][tok.ID] {
			c.addf("user %d holds two tokens with the public ID %s", tok.UserID, tok.ID)
		}
		ids[tok.UserID][tok.ID] = true
		return nil
	})
	if got := byUser.Stats().KeyN; missing || got != n {
		_ = byUser.ForEach(func(k, _ []byte) error {
			if len(k) != 8+len(model.TokenHash{}) {
				c.addf("tokens_by_user: key %x is not user‖hash", k)
				return nil
			}
			b := tokens.Get(k[8:])
			if len(b) < 8 || btoi(b[:8]) != btoi(k[:8]) {
				c.addf("tokens_by_user: entry %d‖%x… points at no token of that user", btoi(k[:8]), k[8:12])
			}
			return nil
		})
	}
}

// messages checks every message against the search index, its words and
// its owner's term. Each message
// must have its entries (checked one by one). When none is missing, an
// index holds no other entry exactly when its size equals the number
// expected, so the slower hunt for dangling entries runs only when an entry
// was missing or the sizes differ (a missing and a dangling entry would
// otherwise cancel out).
func (c *checker) messages() {
	users := c.tx.Bucket(bucketUsers)
	msgs := c.tx.Bucket(bucketMessages)
	postings := c.tx.Bucket(bucketPostings)
	c.sequenceAhead(bucketMessages)
	tail := c.tx.Bucket(bucketTermsTail)
	st := readTermsState(c.tx)
	if st.merged > msgs.Sequence() {
		c.addf("meta/terms_merged %d is beyond the highest message ID ever used, %d", st.merged, msgs.Sequence())
	}
	if st.mergingTo != 0 && st.mergingTo <= st.merged {
		c.addf("meta/terms_merging: a merge through %d, which is not above terms_merged %d", st.mergingTo, st.merged)
	}
	n, nTerms, nTail := 0, 0, 0
	var newest time.Time // creation times must not fall as IDs rise
	var newestID uint64
	var missingTerms, missingTail bool
	_ = msgs.ForEach(func(k, v []byte) error {
		n++
		if len(k) != 8 {
			c.addf("messages: key %x is not an 8-byte ID", k)
			return nil
		}
		m, err := decodeMessage(btoi(k), v)
		if err != nil {
			c.addf("messages: %v", err)
			return nil
		}
		if m.CreatedAt.Before(newest) {
			c.addf("message %d: created at %s, before message %d (%s); search would miss it in time ranges", m.ID,
				m.CreatedAt.Format(time.RFC3339Nano), newestID, newest.Format(time.RFC3339Nano))
		} else {
			newest, newestID = m.CreatedAt, m.ID
		}
		if users.Get(itob(m.OwnerID)) == nil && c.tx.Bucket(bucketDeleting).Get(itob(m.OwnerID)) == nil {
			c.addf("message %d: its owner %d does not exist", m.ID, m.OwnerID)
		}
		if m.ID > st.merged {
			nTail++
			if !c.tailRecord(tail, m) {
				missingTail = true
			}
			return nil
		}
		for _, term := range messageTerms(m) {
			nTerms++
			if found, err := termBlocks(postings, []byte(term)).has(m.ID); err != nil || !found {
				missingTerms = true
				c.addf("message %d: term %q missing from the search index", m.ID, term)
			}
		}
		return nil
	})
	// As with the indexes below: a missing record and a stray one would
	// otherwise cancel out in the count.
	if missingTail || tail.Stats().KeyN != nTail {
		_ = tail.ForEach(func(k, _ []byte) error {
			switch {
			case len(k) != 8:
				c.addf("terms_tail: key %x is not an 8-byte ID", k)
			case btoi(k) <= st.merged:
				c.addf("terms_tail: message %d is at or below terms_merged %d, so search never reads it", btoi(k), st.merged)
			case c.message(k) == nil:
				c.addf("terms_tail: a record of missing message %d", btoi(k))
			}
			return nil
		})
	}
	if c.postings(postings) != nTerms || missingTerms || st.mergingTo != 0 {
		c.danglingPostings(postings, st)
	}
}

// postings checks the shape of every block — its key, its IDs rising,
// below the next block's, its size — and counts the IDs they hold.
func (c *checker) postings(b *bbolt.Bucket) int {
	n := 0
	var term []byte
	var last uint64 // the last ID of term's blocks so far
	var ids []uint64
	_ = b.ForEach(func(k, v []byte) error {
		sep := len(k) - 9
		if sep < 1 || k[sep] != termSeparator {
			c.addf("postings: key %x is not term‖0‖first", k)
			return nil
		}
		first := btoi(k[sep+1:])
		if !bytes.Equal(k[:sep], term) {
			term, last = bytes.Clone(k[:sep]), 0
		} else if first <= last {
			c.addf("postings: word %q has a block from message %d, at or below the %d of the block before", term, first, last)
		}
		var ok bool
		if ids, ok = decodeBlock(ids[:0], first, v); !ok {
			c.addf("postings: the block of %q from message %d is malformed", term, first)
			return nil
		}
		if len(v) > maxBlockBytes {
			c.addf("postings: the block of %q from message %d is %d bytes, above the %d a block may hold", term, first, len(v), maxBlockBytes)
		}
		n += len(ids)
		last = ids[len(ids)-1]
		return nil
	})
	return n
}

// danglingPostings reports every posting that names no message, a message
// without the word, or one above the merge watermark and any merge.
// Postings above the watermark are a merge's work in progress: search
// ignores them, but they must be right when the merge ends.
func (c *checker) danglingPostings(b *bbolt.Bucket, st termsState) {
	var ids []uint64
	_ = b.ForEach(func(k, v []byte) error {
		sep := len(k) - 9
		if sep < 1 || k[sep] != termSeparator {
			return nil // reported by postings
		}
		term := k[:sep]
		ids, _ = decodeBlock(ids[:0], btoi(k[sep+1:]), v)
		for _, id := range ids {
			if id > st.mainUpTo() {
				c.addf("search index: word %q of message %d, above terms_merged %d and any merge", term, id, st.merged)
				continue
			}
			m := c.message(itob(id))
			if m == nil {
				c.addf("search index: word %q points at missing message %d", term, id)
				continue
			}
			if !slices.Contains(messageTerms(m), string(term)) {
				c.addf("search index: term %q points at message %d, which does not have it", term, m.ID)
			}
		}
		return nil
	})
}

// tailRecord checks that message m, above the merge watermark, has a tail
// record holding exactly its words, and that the in-memory tail can find
// it by each of them. It reports false when the record is missing.
func (c *checker) tailRecord(tail *bbolt.Bucket, m *model.Message) bool {
	rec := tail.Get(itob(m.ID))
	if rec == nil {
		c.addf("message %d: missing from the search index's tail", m.ID)
		return false
	}
	got, ok := tailRecordTerms(rec)
	if want := messageTerms(m); !ok || !slices.Equal(got, want) {
		c.addf("message %d: its tail record holds %q, its terms are %q", m.ID, got, want)
		return true
	}
	if c.tail == nil {
		return true
	}
	base, lists := c.tail.lists(got)
	if base > readTermsState(c.tx).merged {
		return true // a merge ended after this snapshot: memory has moved past it
	}
	for i, ids := range lists {
		if _, found := slices.BinarySearch(ids, m.ID); !found {
			c.addf("message %d: word %q is in its tail record but not in the tail in memory", m.ID, got[i])
		}
	}
	return true
}

// message is the record an index entry points at, nil for none.
func (c *checker) message(id []byte) *model.Message {
	m, err := messageRecord(c.tx, btoi(id))
	if err != nil {
		return nil
	}
	return m
}

// administration checks what administrators keep: the admins bucket lists
// exactly the accounts holding the role; every invitation is found by its
// code and every code names an invitation; every password reset is its
// account's one, of an account that exists; audit entries and removal
// marks read.
func (c *checker) administration() {
	users, admins := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketAdmins)
	_ = users.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return nil // users() reported it
		}
		u, err := decodeUser(btoi(k), v)
		if err != nil {
			return nil // users() reported it
		}
		if u.HasRole(model.RoleAdmin) && admins.Get(k) == nil {
			c.addf("user %d holds %s but is not in the admins bucket", u.ID, model.RoleAdmin)
		}
		if u.Suspended {
			// A suspension deletes the account's tokens and its reset.
			if held, _ := userTokens(c.tx, u.ID); len(held) > 0 {
				c.addf("user %d is suspended but holds %d tokens", u.ID, len(held))
			}
			if c.tx.Bucket(bucketUserResets).Get(k) != nil {
				c.addf("user %d is suspended but holds a password reset", u.ID)
			}
		}
		return nil
	})
	_ = admins.ForEach(func(k, _ []byte) error {
		b := users.Get(k)
		if b == nil {
			c.addf("admins: user %x does not exist", k)
			return nil
		}
		if len(k) != 8 {
			c.addf("admins: key %x is not an 8-byte ID", k)
			return nil
		}
		if u, err := decodeUser(btoi(k), b); err == nil && !u.HasRole(model.RoleAdmin) {
			c.addf("admins: user %d does not hold %s", u.ID, model.RoleAdmin)
		}
		return nil
	})

	invites, codes := c.tx.Bucket(bucketInvites), c.tx.Bucket(bucketInviteCodes)
	c.sequenceAhead(bucketInvites)
	_ = invites.ForEach(func(k, v []byte) error {
		inv, err := decodeInvite(btoi(k), v)
		if err != nil {
			c.addf("invites: %v", err)
			return nil
		}
		if got := codes.Get(inv.CodeHash[:]); !bytes.Equal(got, k) {
			c.addf("invitation %d: invite_codes does not name it", inv.ID)
		}
		if inv.Uses > inv.MaxUses {
			c.addf("invitation %d: used %d times, more than its %d", inv.ID, inv.Uses, inv.MaxUses)
		}
		return nil
	})
	_ = codes.ForEach(func(k, v []byte) error {
		if len(v) != 8 || invites.Get(v) == nil {
			c.addf("invite_codes: a code %x… names no invitation", k[:min(4, len(k))])
		}
		return nil
	})

	resets, byUser := c.tx.Bucket(bucketResets), c.tx.Bucket(bucketUserResets)
	_ = resets.ForEach(func(k, v []byte) error {
		var code model.TokenHash
		if len(k) != len(code) {
			c.addf("resets: key %x is not a SHA-256", k)
			return nil
		}
		copy(code[:], k)
		r, err := decodeReset(code, v)
		if err != nil {
			c.addf("resets: %v", err)
			return nil
		}
		if users.Get(itob(r.UserID)) == nil {
			c.addf("password reset %x…: its user %d does not exist", k[:4], r.UserID)
		}
		if got := byUser.Get(itob(r.UserID)); !bytes.Equal(got, k) {
			c.addf("password reset %x…: user_resets does not name it for user %d", k[:4], r.UserID)
		}
		return nil
	})
	_ = byUser.ForEach(func(k, v []byte) error {
		if resets.Get(v) == nil {
			c.addf("user_resets: user %x names a password reset that does not exist", k)
		}
		return nil
	})

	c.sequenceAhead(bucketAudit)
	_ = c.tx.Bucket(bucketAudit).ForEach(func(k, v []byte) error {
		if _, err := decodeAudit(btoi(k), v); err != nil {
			c.addf("audit: %v", err)
		}
		return nil
	})
	if err := model.ValidateSettingsStored(readSettings(c.tx)); err != nil {
		c.addf("settings: %v", err)
	}
	highest := c.tx.Bucket(bucketMessages).Sequence()
	_ = c.tx.Bucket(bucketPurging).ForEach(func(k, v []byte) error {
		switch {
		case len(k) != 8 || len(v) != 8:
			c.addf("purging: entry %x → %x is not account → message ID", k, v)
		case btoi(v) > highest:
			c.addf("purging: account %d is marked up to message %d, beyond the highest ever used, %d", btoi(k), btoi(v), highest)
		}
		return nil
	})
}

// notificationOf reports whether account userID keeps a notification
// about message msgID, walking its at most model.MaxNotifications.
func notificationOf(tx *bbolt.Tx, userID, msgID uint64) bool {
	prefix := itob(userID)
	c := tx.Bucket(bucketNotifications).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if len(v) == notificationRecordLen && binary.BigEndian.Uint64(v[17:]) == msgID {
			return true
		}
	}
	return false
}

// people checks replies and notifications: every reply is listed under
// the message it answers, and only replies are; each message's count is
// how many are listed; every notification decodes, belongs to an account
// that exists, and is listed in its message's notified record while the
// message exists;
// each account's marks count what it keeps, within model.MaxNotifications.
func (c *checker) people() {
	msgs, replies, counts := c.tx.Bucket(bucketMessages), c.tx.Bucket(bucketReplies), c.tx.Bucket(bucketReplyCounts)
	listed := map[uint64]uint64{}
	_ = replies.ForEach(func(k, _ []byte) error {
		if len(k) != 16 {
			c.addf("replies: key %x is not two 8-byte IDs", k)
			return nil
		}
		parent, id := btoi(k[:8]), btoi(k[8:])
		listed[parent]++
		rec := msgs.Get(itob(id))
		if rec == nil {
			c.addf("replies: message %d, listed as a reply to %d, does not exist", id, parent)
			return nil
		}
		if m, err := decodeMessage(id, rec); err == nil && m.ReplyTo != parent {
			c.addf("replies: message %d is listed as a reply to %d but answers %d", id, parent, m.ReplyTo)
		}
		return nil
	})
	_ = msgs.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return nil // messages() reported it
		}
		if m, err := decodeMessage(btoi(k), v); err == nil && m.ReplyTo != 0 && replies.Get(pairKey(m.ReplyTo, m.ID)) == nil {
			c.addf("message %d answers %d but is not listed among its replies", m.ID, m.ReplyTo)
		}
		return nil
	})
	_ = counts.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) != 8 {
			c.addf("reply_counts: entry %x → %x is not an ID and a count", k, v)
			return nil
		}
		if got, want := btoi(v), listed[btoi(k)]; got != want {
			c.addf("message %d counts %d replies, but %d are listed", btoi(k), got, want)
		}
		delete(listed, btoi(k))
		return nil
	})
	for parent, n := range listed {
		c.addf("message %d has %d replies listed and no count", parent, n)
	}

	users, notified, marks := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketNotified), c.tx.Bucket(bucketNotificationMarks)
	kept := map[uint64]uint64{}
	_ = c.tx.Bucket(bucketNotifications).ForEach(func(k, v []byte) error {
		if len(k) != 16 {
			c.addf("notifications: key %x is not an account and an ID", k)
			return nil
		}
		userID, id := btoi(k[:8]), btoi(k[8:])
		n, err := decodeNotification(userID, id, v)
		if err != nil {
			c.addf("notifications: %v", err)
			return nil
		}
		kept[userID]++
		if users.Get(itob(userID)) == nil {
			c.addf("notification %d: its account %d does not exist", id, userID)
		}
		if msgs.Get(itob(n.MessageID)) != nil && !notifiedHas(notified.Get(itob(n.MessageID)), userID) {
			c.addf("notification %d: message %d does not list account %d as notified", id, n.MessageID, userID)
		}
		return nil
	})
	_ = notified.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v)%8 != 0 || len(v) == 0 {
			c.addf("notified: entry %x → %x is not a message and the accounts it notified", k, v)
			return nil
		}
		if msgs.Get(k) == nil {
			c.addf("notified: message %d does not exist", btoi(k))
		}
		for i := 0; i+8 <= len(v); i += 8 {
			userID := binary.BigEndian.Uint64(v[i:])
			if users.Get(v[i:i+8]) == nil {
				continue // its account went, with its notifications
			}
			if !notificationOf(c.tx, userID, btoi(k)) {
				c.addf("notified: message %d lists account %d, which keeps no notification of it", btoi(k), userID)
			}
		}
		return nil
	})
	_ = marks.ForEach(func(k, v []byte) error {
		if len(k) != 8 || len(v) != 16 {
			c.addf("notification_marks: entry %x → %x is not an account, a read mark and a count", k, v)
			return nil
		}
		userID := btoi(k)
		if got, want := btoi(v[8:]), kept[userID]; got != want {
			c.addf("account %d counts %d notifications, but keeps %d", userID, got, want)
		}
		if kept[userID] > model.MaxNotifications {
			c.addf("account %d keeps %d notifications, beyond %d", userID, kept[userID], model.MaxNotifications)
		}
		delete(kept, userID)
		return nil
	})
	for userID, n := range kept {
		c.addf("account %d keeps %d notifications and no count of them", userID, n)
	}
}
