package bolt

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// TestCheckTailMissingAndStray: a message above the merge watermark
// without its tail record and a stray tail record at or below the
// watermark leave terms_tail with exactly the number of keys the checker
// expects: counting alone would find nothing wrong, and the check must
// still report both.
func TestCheckTailMissingAndStray(t *testing.T) {
	manualMerges(t)
	path := filepath.Join(t.TempDir(), "herald.db")
	db0, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db0.Close()
	db := &testDB{DB: db0, Path: path}
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m1 := mustCreateMessage(t, db, ada.ID, "apple")
	mergeAll(t, db.DB) // W = m1
	mustCreateMessage(t, db, ada.ID, "river")
	m3 := mustCreateMessage(t, db, ada.ID, "stone")
	err = db.writes.update(func(tx *bbolt.Tx) error {
		tail := tx.Bucket(bucketTermsTail)
		if err := tail.Delete(itob(m3.ID)); err != nil {
			return err
		}
		return tail.Put(itob(m1.ID), encodeTailRecord([]string{"apple"}))
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckInvariants()
	if err != nil {
		t.Fatal(err)
	}
	var missing, stray bool
	for _, p := range problems {
		missing = missing || strings.Contains(p, "missing from the search index's tail")
		stray = stray || strings.Contains(p, "at or below terms_merged")
	}
	if !missing || !stray {
		t.Errorf("CheckInvariants = %q, want both the missing tail record of %d and the stray one of %d", problems, m3.ID, m1.ID)
	}
}

// TestCheckInvariantsFindsTailMissingFromMemory: search finds tail messages
// through memory only, so a posting on disk that memory lacks is a message
// search cannot find.
func TestCheckInvariantsFindsTailMissingFromMemory(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m := mustCreateMessage(t, db, ada.ID, "hello world")
	db.tail.mu.Lock()
	delete(db.tail.terms, "world")
	db.tail.mu.Unlock()
	problems, err := db.CheckInvariants()
	want := fmt.Sprintf(`message %d: word "world" is in its tail record but not in the tail in memory`, m.ID)
	if err != nil || !slices.Contains(problems, want) {
		t.Errorf("CheckInvariants() = %q, %v; want %q", problems, err, want)
	}
	db.tail.add(m.ID, []string{"world"}) // repaired, so the cleanup check passes
}

func TestCheckInvariantsFindsDamage(t *testing.T) {
	tests := []struct {
		name   string
		damage func(tx *bbolt.Tx, m *model.Message) error
		want   string
		// inTail: damage done while message 1 is still in the search
		// index's tail; otherwise it has been merged first.
		inTail bool
	}{
		{"ChangeOfMessageUnindexed", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChangesByMessage).Delete(itob(m.ID))
		}, "changes_by_message: message 1 is missing, or not at change", true},
		{"ChangeOfMessageMisindexed", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChangesByMessage).Put(itob(m.ID), itob(99))
		}, "changes_by_message: message 1 points at change 99, which does not hold its content", true},
		{"MissingTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Delete(itob(m.ID))
		}, "message 1: missing from the search index's tail", true},
		{"WrongTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello"}))
		}, `message 1: its tail record holds ["hello"], its terms are ["@1" "hello" "world"]`, true},
		{"MalformedTailRecord", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), []byte{9, 'x'})
		}, "message 1: its tail record holds", true},
		{"TailRecordOfMissingMessage", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(7), encodeTailRecord([]string{"ghost"}))
		}, "terms_tail: a record of missing message 7", true},
		{"TailRecordBelowWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello", "world"}))
		}, "terms_tail: message 1 is at or below terms_merged 1", false},
		{"TermAboveWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, "hello", m.ID)
		}, `word "hello" of message 1, above terms_merged 0 and any merge`, true},
		{"WatermarkBeyondMessages", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(50))
		}, "meta/terms_merged 50 is beyond the highest message ID ever used, 1", false},
		{"MergeBelowWatermark", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaTermsMerging, mergingValue(1, nil))
		}, "meta/terms_merging: a merge through 1, which is not above terms_merged 1", false},
		{"DanglingTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, "ghost", m.ID)
		}, `term "ghost" points at message 1, which does not have it`, false},
		{"MissingTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return termBlocks(tx.Bucket(bucketPostings), []byte("hello")).remove(m.ID)
		}, `message 1: term "hello" missing from the search index`, false},
		{"TermOfMissingMessage", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(99)); err != nil {
				return err
			}
			return addPosting(tx, "hello", 99)
		}, `word "hello" points at missing message 99`, false},
		{"MalformedBlock", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), m.ID), []byte{0})
		}, `postings: the block of "hello" from message 1 is malformed`, false},
		{"OverlappingBlocks", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(9)); err != nil {
				return err
			}
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), 0), []byte{5})
		}, `postings: word "hello" has a block from message 1, at or below the 5 of the block before`, false},
		{"TouchingBlocks", func(tx *bbolt.Tx, m *model.Message) error { // message 1 in two blocks
			if err := tx.Bucket(bucketMeta).Put(metaTermsMerged, itob(9)); err != nil {
				return err
			}
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("hello"), 0), []byte{1})
		}, `postings: word "hello" has a block from message 1, at or below the 1 of the block before`, false},
		{"OversizedBlock", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPostings).Put(postingKey([]byte("world"), m.ID), bytes.Repeat([]byte{1}, maxBlockBytes+1))
		}, `postings: the block of "world" from message 1 is 257 bytes`, false},
		{"MissingOwnerTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return termBlocks(tx.Bucket(bucketPostings), []byte(ownerTerm(m.OwnerID))).remove(m.ID)
		}, `message 1: term "@1" missing from the search index`, false},
		{"DanglingOwnerTerm", func(tx *bbolt.Tx, m *model.Message) error {
			return addPosting(tx, ownerTerm(m.OwnerID+1), m.ID)
		}, `term "@2" points at message 1, which does not have it`, false},
		{"TailRecordWithoutOwner", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketTermsTail).Put(itob(m.ID), encodeTailRecord([]string{"hello", "world"}))
		}, `message 1: its tail record holds ["hello" "world"], its terms are ["@1" "hello" "world"]`, true},
		{"DanglingEmail", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketUsersByEmail).Put([]byte("ghost@example.com"), itob(77))
		}, `users_by_email["ghost@example.com"] points at missing user`, false},
		{"AdministratorNotListed", func(tx *bbolt.Tx, m *model.Message) error {
			u, err := userByID(tx, m.OwnerID)
			if err != nil {
				return err
			}
			u.Roles = append(u.Roles, model.RoleAdmin)
			return tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u))
		}, "user 1 holds ROLE_ADMIN but is not in the admins bucket", false},
		{"ListedAdministratorWithoutTheRole", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketAdmins).Put(itob(m.OwnerID), nil)
		}, "admins: user 1 does not hold ROLE_ADMIN", false},
		{"InviteWithoutItsCode", func(tx *bbolt.Tx, m *model.Message) error {
			inv := &model.Invite{ID: 1, MaxUses: 1, CodeHash: tokenHash("lost")}
			if err := tx.Bucket(bucketInvites).SetSequence(1); err != nil {
				return err
			}
			return tx.Bucket(bucketInvites).Put(itob(1), encodeInvite(inv))
		}, "invitation 1: invite_codes does not name it", false},
		{"ResetOfMissingUser", func(tx *bbolt.Tx, m *model.Message) error {
			code := tokenHash("orphan")
			if err := tx.Bucket(bucketUserResets).Put(itob(9), code[:]); err != nil {
				return err
			}
			return tx.Bucket(bucketResets).Put(code[:], encodeReset(&model.PasswordReset{UserID: 9}))
		}, "its user 9 does not exist", false},
		{"SuspendedWithTokens", func(tx *bbolt.Tx, m *model.Message) error {
			u, err := userByID(tx, m.OwnerID)
			if err != nil {
				return err
			}
			u.Suspended = true
			return tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u))
		}, "user 1 is suspended but holds 1 tokens", false},
		{"InviteOverused", func(tx *bbolt.Tx, m *model.Message) error {
			inv := &model.Invite{ID: 1, MaxUses: 1, Uses: 2, CodeHash: tokenHash("over")}
			if err := tx.Bucket(bucketInvites).SetSequence(1); err != nil {
				return err
			}
			if err := tx.Bucket(bucketInviteCodes).Put(inv.CodeHash[:], itob(1)); err != nil {
				return err
			}
			return tx.Bucket(bucketInvites).Put(itob(1), encodeInvite(inv))
		}, "invitation 1: used 2 times, more than its 1", false},
		{"PurgeMarkBeyondMessages", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketPurging).Put(itob(m.OwnerID), itob(99))
		}, "purging: account 1 is marked up to message 99", false},
		{"MalformedAuditEntry", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketAudit).SetSequence(1); err != nil {
				return err
			}
			return tx.Bucket(bucketAudit).Put(itob(1), []byte{1, 2})
		}, "audit: decode audit entry 1", false},
		{"UnknownSetting", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketSettings).Put([]byte("colour"), []byte("blue"))
		}, "colour: is not a setting", false},
		{"EmptySetting", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketSettings).Put([]byte(model.SettingRegistration), nil)
		}, "registration: must be a value", false},
		{"SettingsChangeWithAnAccount", func(tx *bbolt.Tx, m *model.Message) error {
			if err := tx.Bucket(bucketChanges).SetSequence(2); err != nil {
				return err
			}
			b := encodeChange(&model.Change{Kind: model.TokensRevoked, UserID: 1})
			b[1] = byte(model.SettingsChanged) // a settings change naming an account
			return tx.Bucket(bucketChanges).Put(itob(2), b)
		}, "changes: decode change 2: bad record", false},
		{"SequenceBehind", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMessages).SetSequence(0)
		}, "messages: sequence 0 is behind the highest ID 1", false},
		{"UpgradeLeftUnfinished", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaUpgradeNext, itob(1))
		}, "a layout upgrade was interrupted", false},
		{"DuplicateTokenID", func(tx *bbolt.Tx, m *model.Message) error {
			h := tokenHash("t")
			first, err := decodeToken(h, tx.Bucket(bucketTokens).Get(h[:]))
			if err != nil {
				return err
			}
			second := *first
			second.Hash = tokenHash("t2")
			return issueTokenRecord(tx, &second)
		}, "holds two tokens with the public ID", false},
		{"ChangeMissing", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChanges).Delete(itob(1))
		}, "changes 1 to 1 are missing from the log", false},
		{"ChangeGap", func(tx *bbolt.Tx, m *model.Message) error {
			log := tx.Bucket(bucketChanges)
			if err := log.Put(itob(3), log.Get(itob(1))); err != nil {
				return err
			}
			return log.SetSequence(3)
		}, "changes 2 to 2 are missing from the log", false},
		{"ChangeUndecodable", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketChanges).Put(itob(1), []byte{9})
		}, "decode change 1: bad record", false},
		{"ChangeBelowFloor", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaChangesFloor, itob(1))
		}, "change 1: at or below the trimmed floor 1", false},
		{"FloorBeyondLog", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMeta).Put(metaChangesFloor, itob(5))
		}, "meta/changes_floor 5 is beyond the change log's sequence 1", false},
		{"OrphanMessage", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketUsers).Delete(itob(m.OwnerID))
		}, "message 1: its owner 1 does not exist", false},
		{"ShortUserKey", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketUsers).Put([]byte{1, 2, 3}, tx.Bucket(bucketUsers).Get(itob(m.OwnerID)))
		}, "users: key 010203 is not an 8-byte ID", false},
		{"ShortMessageKey", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketMessages).Put([]byte{7}, tx.Bucket(bucketMessages).Get(itob(m.ID)))
		}, "messages: key 07 is not an 8-byte ID", false},
		{"EmptyCertValue", func(tx *bbolt.Tx, m *model.Message) error {
			return tx.Bucket(bucketCerts).Put([]byte("herald.example.com"), []byte{})
		}, `certs: "herald.example.com" is empty`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.db")
			db, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			u := &model.User{Email: "ada@example.com", PasswordHash: fakePasswordHash}
			if _, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil); err != nil {
				t.Fatal(err)
			}
			m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), "hello world")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.inTail {
				mergeAll(t, db)
			}
			if problems, err := db.CheckInvariants(); err != nil || len(problems) != 0 {
				t.Fatalf("CheckInvariants() before damage = %q, %v; want none", problems, err)
			}
			if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tt.damage(tx, m) }); err != nil {
				t.Fatal(err)
			}
			problems, err := db.CheckInvariants()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Errorf("CheckInvariants() = %q, want a problem containing %q", problems, tt.want)
			}
		})
	}
}

// TestCheckGuarded: a part of the check that meets what it did not look
// for stops with a problem saying where, and the check goes on with the
// other parts rather than crashing.
func TestCheckGuarded(t *testing.T) {
	var c checker
	c.guarded("broken", func() {
		var short []byte
		_ = btoi(short)
	})
	c.guarded("fine", func() {})
	if len(c.problems) != 1 || !strings.HasPrefix(c.problems[0], "broken: the check stopped at something it could not read") ||
		!strings.Contains(c.problems[0], "herald/bolt.btoi") {
		t.Errorf("problems = %q, want one saying where the broken part stopped", c.problems)
	}
}
