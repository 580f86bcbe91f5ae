package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
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
//	6  a message's owner is a term of the search index (see ownerTerm),
//	   and the owner and time indexes are gone. An older Herald would
//	   write owner entries and no owner terms, so it must refuse the file.
//	7  administration: user records (version 2) keep whether the account
//	   is suspended and when it was last seen, and roles stored with the
//	   account make administrators (the admins bucket lists them); new
//	   buckets keep invitations, password resets, the audit log and
//	   administrators' removal of an account's messages; and the change
//	   log also records that an account's tokens were revoked
//	   (model.TokensRevoked), so that live streams learn of it from the
//	   log as of messages. An older Herald could read none of it, so it
//	   must refuse the file.
//	8  accounts are indexed by the skeleton of their e-mail
//	   (users_by_skeleton, see skeletonKey), so that an address that looks
//	   like an account's is taken; accounts that already looked alike are
//	   kept, each indexed, and logged by the upgrade. And the change log
//	   keeps a message's content in its newest change only: the write that
//	   edits or deletes a message scrubs it from the one before (change
//	   records version 2, which also drop the content an update replaced),
//	   and changes_by_message finds that change. And creates made with an
//	   Idempotency-Key are recorded in the idempotency buckets (see
//	   idempotency.go), which an account's deletion empties of its
//	   records. An older Herald would register accounts the index does not
//	   know, log without scrubbing, leave a deleted account's records
//	   behind and create again on a retry, so it must refuse the file.
//	9  the settings an administrator changes at run time are kept in the
//	   settings bucket (see settings.go), their changes in audit records
//	   of version 2 and in the change log as model.SettingsChanged; and
//	   the certificates HTTPS with ACME keeps, in the certs bucket. An
//	   older Herald could read neither those audit records nor that
//	   change, and would not follow the settings, so it must refuse the
//	   file. Nothing stored before changes: the upgrade only raises the
//	   layout.
//	10 every account has a handle and a name: user records of version 3,
//	   and users_by_handle indexes the handles. An older Herald could not
//	   read the records, so it must refuse the file.
//	11 Web Push: the server's VAPID key pair, the accounts' push
//	   subscriptions and the sender's queue and place in the change log,
//	   in the push buckets (see push.go). An older Herald would not delete
//	   an account's subscriptions with it, so it must refuse the file.
//	   Nothing stored before changes: the upgrade only raises the layout.
const currentLayout = 11

// Buckets of older layouts, which only upgrades read or write:
//
//	terms          term‖0x00‖messageID → nil: layout 4's index
//	msgs_by_owner  ownerID‖messageID → nil: layouts 1 to 5
//	msgs_by_time   createdAt‖messageID → nil: layouts 2 to 5
var (
	bucketTerms       = []byte("terms")
	bucketMsgsByOwner = []byte("msgs_by_owner")
	bucketMsgsByTime  = []byte("msgs_by_time")
)

var (
	metaLayout      = []byte("layout")
	metaUpgradeNext = []byte("upgrade_next") // first message ID not yet indexed
	// metaOwnerTermsNext is the first message ID whose owner term the
	// upgrade to layout 6 has not added yet; absent once it is done.
	metaOwnerTermsNext = []byte("owner_terms_next")
	// metaUsersNext is the first user ID whose record the upgrade to
	// layout 7 has not rewritten yet; absent once it is done.
	metaUsersNext = []byte("users_next")
	// metaChangesNext is the first change the upgrade to layout 8 has
	// not rewritten yet; absent once it is done.
	metaChangesNext = []byte("changes_next")
)

// upgradeChunk is how many messages one upgrade transaction indexes: small
// enough that the transaction's dirty pages stay a few MiB, large enough
// that a million messages take a few hundred commits.
const upgradeChunk = 5000

// prepareLayout creates a new database's buckets, or brings an existing one
// up to currentLayout. A crash during an upgrade leaves the progress
// recorded, and the next Open goes on from there. legacyAdmins are
// Options.LegacyAdmins; keep is Options.KeepLayout.
func (db *DB) prepareLayout(legacyAdmins []string, keep bool) error {
	var layout uint64
	var ownerTermsPending, usersPending, changesPending bool
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		fresh, err := heraldFile(tx)
		if err != nil {
			return err
		}
		layout = 1 // the first release had no meta bucket
		if meta := tx.Bucket(bucketMeta); meta != nil {
			ownerTermsPending = meta.Get(metaOwnerTermsNext) != nil
			usersPending = meta.Get(metaUsersNext) != nil
			changesPending = meta.Get(metaChangesNext) != nil
			switch v := meta.Get(metaLayout); {
			case v != nil && len(v) != 8:
				return fmt.Errorf("meta/layout is %d bytes, want 8", len(v))
			case v != nil:
				layout = btoi(v)
			}
		}
		if fresh {
			layout = currentLayout
		}
		// Refusals come before anything is written: the transaction rolls
		// back, and the file stays as it was.
		if layout > currentLayout {
			return fmt.Errorf("the database was written by a newer Herald (layout %d; this one reads up to %d)", layout, currentLayout)
		}
		if keep && (layout < currentLayout || ownerTermsPending || usersPending || changesPending) {
			return ErrNeedsUpgrade
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if fresh {
			return tx.Bucket(bucketMeta).Put(metaLayout, itob(currentLayout))
		}
		if layout < 6 {
			// The upgrades before layout 6 keep the owner and time indexes
			// up to date, as their layouts had them (layout 1 had no time
			// index); the upgrade to 6 drops both.
			for _, name := range [][]byte{bucketMsgsByOwner, bucketMsgsByTime} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return fmt.Errorf("create bucket %s: %w", name, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Administrators named by configuration are made by the upgrade from
	// layout 6 alone, once.
	if layout >= 7 && !usersPending && len(legacyAdmins) > 0 {
		return ErrLegacyAdmins
	}
	if layout == currentLayout && !ownerTermsPending && !usersPending && !changesPending {
		return nil
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
	if layout <= 4 {
		if err := db.upgradeFrom4(); err != nil {
			return err
		}
	}
	if err := db.upgradeFrom5(); err != nil {
		return err
	}
	if err := db.upgradeFrom6(legacyAdmins); err != nil {
		return err
	}
	if err := db.upgradeFrom7(); err != nil {
		return err
	}
	if err := db.upgradeFrom8(); err != nil {
		return err
	}
	if err := db.upgradeFrom9(); err != nil {
		return err
	}
	return db.upgradeFrom10()
}

// upgradeFrom10 brings a file of layout 10 to layout 11. What layout 11
// adds are buckets, which Open has created, so raising the layout, which
// an older Herald then refuses, is the whole upgrade.
func (db *DB) upgradeFrom10() error {
	var layout uint64
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if layout = btoi(meta.Get(metaLayout)); layout >= 11 {
			return nil
		}
		return meta.Put(metaLayout, itob(11))
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 11: %w", err)
	}
	if layout < 11 {
		db.log.Info("database upgraded to layout 11: buckets for Web Push's key pair, subscriptions and queue")
	}
	return nil
}

// upgradeFrom9 brings a file of layout 9 to layout 10 in one transaction:
// every account without a handle gets the one it would get registering
// now (made from its e-mail, a number added until it is free, in the
// order the accounts were made, so the oldest keeps the plain one) and
// its handle as its name. A crash leaves the file as it was, and the
// next Open does it again.
func (db *DB) upgradeFrom9() error {
	start := time.Now()
	var layout uint64
	users := 0
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if layout = btoi(meta.Get(metaLayout)); layout >= 10 {
			return nil
		}
		var named []*model.User
		err := tx.Bucket(bucketUsers).ForEach(func(k, v []byte) error {
			u, err := decodeUser(btoi(k), v)
			if err != nil {
				return err
			}
			if u.Handle == "" {
				named = append(named, u)
			}
			return nil
		})
		if err != nil {
			return err
		}
		byHandle := tx.Bucket(bucketUsersByHandle)
		// Putting while ForEach walks would move it; put after.
		for _, u := range named {
			u.Handle = freeHandle(byHandle, u.Email)
			u.Name = u.Handle
			if err := db.putUser(tx, u); err != nil {
				return err
			}
			if err := byHandle.Put([]byte(u.Handle), itob(u.ID)); err != nil {
				return err
			}
		}
		users = len(named)
		return meta.Put(metaLayout, itob(10))
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 10: %w", err)
	}
	if layout < 10 {
		db.log.Info("database upgraded to layout 10: every account has a handle and a name, made from its e-mail", "users", users, "took", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}

// upgradeFrom8 brings a file of layout 8 to layout 9. What layout 9 adds
// are buckets, which Open has created, and records that only writes made
// from now on hold, so raising the layout, which an older Herald then
// refuses, is the whole upgrade.
func (db *DB) upgradeFrom8() error {
	raised := false
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if btoi(meta.Get(metaLayout)) >= 9 {
			return nil
		}
		raised = true
		return meta.Put(metaLayout, itob(9))
	})
	if err != nil {
		return fmt.Errorf("upgrading to layout 9: %w", err)
	}
	if raised {
		db.log.Info("database upgraded to layout 9: settings changed at run time and HTTPS certificates are kept; an older Herald refuses the file")
	}
	return nil
}

// upgradeFrom7 brings a file of layout 7 to layout 8: its accounts indexed
// by the skeleton of their e-mail (indexEmailSkeletons), its change log
// scrubbed (scrubChangeLog). Its first transaction raises the layout to 8
// and sets meta/changes_next, so from then on an older Herald refuses the
// file; while that is set the upgrade is unfinished, and the next Open
// builds the index again and goes on scrubbing from there.
func (db *DB) upgradeFrom7() error {
	start := time.Now()
	next := uint64(0) // the first change not yet rewritten; 0: nothing to do
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaChangesNext); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("meta/%s is %d bytes, want 8", metaChangesNext, len(v))
			}
			next = btoi(v)
			return nil
		}
		if btoi(meta.Get(metaLayout)) >= 8 {
			return nil
		}
		next = 1
		if err := meta.Put(metaChangesNext, itob(next)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(8))
	})
	if err != nil || next == 0 {
		return err
	}
	db.log.Info("upgrading database layout 7 to 8: accounts indexed by the look of their e-mail, and the change log keeping only what messages hold now; this runs once")
	users, pairs, err := db.indexEmailSkeletons()
	if err != nil {
		return fmt.Errorf("upgrading to layout 8: %w", err)
	}
	changes, scrubbed, err := db.scrubChangeLog(next)
	if err != nil {
		return fmt.Errorf("upgrading to layout 8: %w", err)
	}
	db.log.Info("database upgraded to layout 8: an address that looks like an account's is taken, and the change log keeps only what messages hold now",
		"users", users, "look_alikes", len(pairs), "changes", changes, "scrubbed", scrubbed, "took", time.Since(start).Round(time.Millisecond).String())
	db.logLookAlikes(pairs)
	return nil
}

// scrubChangeLog rewrites every change record from position next on in
// version 2: a change is kept whole when it is the newest of a message
// that still exists, and indexed as such in changes_by_message; every
// other change of a message loses its content, and an update the content
// it replaced. meta/changes_next records how far it got, and is deleted by
// its last transaction. Which change is a message's newest is read from
// the whole log first, in memory: the log holds at most --changes-max
// changes, a few MiB of IDs. It returns how many changes it rewrote and
// how many of them it scrubbed.
func (db *DB) scrubChangeLog(next uint64) (changes, scrubbed int, err error) {
	newest := make(map[uint64]uint64) // message ID → its newest change
	err = db.bolt.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketChanges).ForEach(func(k, v []byte) error {
			ch, err := upgradedChange(btoi(k), v)
			if err != nil {
				return err
			}
			if ch.Kind != model.TokensRevoked {
				newest[ch.Message.ID] = ch.Seq
			}
			return nil
		})
	})
	if err != nil {
		return 0, 0, err
	}
	for next != 0 {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			log, msgs, byMessage := tx.Bucket(bucketChanges), tx.Bucket(bucketMessages), tx.Bucket(bucketChangesByMessage)
			c := log.Cursor()
			n := 0
			k, v := c.Seek(itob(next))
			var rewrite []*model.Change
			for ; k != nil && n < upgradeChunk; k, v = c.Next() {
				n++
				ch, err := upgradedChange(btoi(k), v)
				if err != nil {
					return err
				}
				rewrite = append(rewrite, ch)
			}
			if k != nil {
				next = btoi(k)
			} else {
				next = 0
			}
			// Putting while the cursor walks would move it; put after.
			for _, ch := range rewrite {
				if ch.Kind == model.MessageCreated || ch.Kind == model.MessageUpdated {
					id := ch.Message.ID
					if newest[id] == ch.Seq && msgs.Get(itob(id)) != nil {
						if err := byMessage.Put(itob(id), itob(ch.Seq)); err != nil {
							return err
						}
					} else if !ch.Scrubbed {
						ch.Scrubbed = true
						scrubbed++
					}
				}
				if err := log.Put(itob(ch.Seq), encodeChange(ch)); err != nil {
					return err
				}
			}
			changes += len(rewrite)
			meta := tx.Bucket(bucketMeta)
			if next != 0 {
				return meta.Put(metaChangesNext, itob(next))
			}
			return meta.Delete(metaChangesNext)
		})
		if err != nil {
			return changes, scrubbed, err
		}
	}
	return changes, scrubbed, nil
}

// upgradedChange decodes change seq as the upgrade to layout 8 finds it,
// in either record version.
func upgradedChange(seq uint64, v []byte) (*model.Change, error) {
	if len(v) > 0 && v[0] == changeRecordVersionV1 {
		return decodeChangeV1(seq, v)
	}
	return decodeChange(seq, v)
}

// upgradeFrom6 rewrites every user record in version 2, with the time
// the account was last seen taken from its tokens, and makes
// administrators of the accounts that legacyAdmins, the e-mails the
// previous release named administrators by, have now. Its first
// transaction raises the layout to 7 and makes the administrators (an
// audit entry each, made on the server's machine), so the role is stored
// before anything else can happen and the setting is never read again;
// meta/users_next records how far the rewrite got.
func (db *DB) upgradeFrom6(legacyAdmins []string) error {
	start := time.Now()
	next := uint64(0) // 0: nothing to do
	var granted, unknown []string
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaUsersNext); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("meta/%s is %d bytes, want 8", metaUsersNext, len(v))
			}
			// Resumed: the administrators were made by the transaction
			// that began the upgrade.
			next = btoi(v)
			return nil
		}
		if btoi(meta.Get(metaLayout)) >= 7 {
			return nil
		}
		next = 1
		granted, unknown = nil, nil
		for _, email := range legacyAdmins {
			id := tx.Bucket(bucketUsersByEmail).Get(emailKey(email))
			if id == nil {
				unknown = append(unknown, email)
				continue
			}
			u, err := upgradedUser(tx, btoi(id))
			if err != nil {
				return err
			}
			if u.HasRole(model.RoleAdmin) {
				continue
			}
			u.Roles = append(u.Roles, model.RoleAdmin)
			if err := db.putUser(tx, u); err != nil {
				return err
			}
			entry := &model.AuditEntry{Action: model.AuditGrantAdmin, UserID: u.ID, UserEmail: u.Email}
			if err := db.appendAudit(tx, nil, entry); err != nil {
				return err
			}
			granted = append(granted, u.Email)
		}
		if err := meta.Put(metaUsersNext, itob(next)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(7))
	})
	if err != nil || next == 0 {
		return err
	}
	db.log.Info("upgrading database layout 6 to 7: administrators are stored with their accounts; this runs once")
	if len(legacyAdmins) > 0 {
		db.log.Info("administrators named by --admins are now stored with their accounts; the setting is no longer read, so remove it",
			"made", strings.Join(granted, ","), "without an account", strings.Join(unknown, ","))
	}
	users := 0
	for next != 0 {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			c := tx.Bucket(bucketUsers).Cursor()
			n := 0
			k, v := c.Seek(itob(next))
			var rewrite []*model.User
			for ; k != nil && n < upgradeChunk; k, v = c.Next() {
				n++
				if len(v) > 0 && v[0] >= userRecordVersionV2 && v[0] <= userRecordVersion {
					continue // made an administrator, or written whole by the upgrade from layout 1
				}
				u, err := upgradedUser(tx, btoi(k))
				if err != nil {
					return err
				}
				rewrite = append(rewrite, u)
			}
			meta := tx.Bucket(bucketMeta)
			if k != nil {
				next = btoi(k)
			} else {
				next = 0
			}
			// Putting while the cursor walks would move it; put after.
			for _, u := range rewrite {
				if err := db.putUser(tx, u); err != nil {
					return err
				}
			}
			users += n
			if next != 0 {
				return meta.Put(metaUsersNext, itob(next))
			}
			return meta.Delete(metaUsersNext)
		})
		if err != nil {
			return fmt.Errorf("upgrading to layout 7: %w", err)
		}
	}
	db.log.Info("database upgraded to layout 7: accounts keep their roles, suspension and last use", "users", users, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// upgradedUser reads user id as the upgrade to layout 7 finds it, in
// either record version, with LastSeenAt, which version 1 did not keep,
// taken from the last use of its tokens.
func upgradedUser(tx *bbolt.Tx, id uint64) (*model.User, error) {
	b := tx.Bucket(bucketUsers).Get(itob(id))
	if len(b) > 0 && b[0] >= userRecordVersionV2 && b[0] <= userRecordVersion {
		return decodeUser(id, b)
	}
	u, err := decodeUserV1(id, b)
	if err != nil {
		return nil, err
	}
	toks, err := userTokens(tx, id)
	if err != nil {
		return nil, err
	}
	for _, t := range toks {
		if t.LastUsedAt.After(u.LastSeenAt) {
			u.LastSeenAt = t.LastUsedAt
		}
	}
	return u, nil
}

// upgradeFrom5 adds every message's owner term to the search index, then
// drops the owner and time indexes. Its first transaction raises the
// layout to 6, so from then on an older Herald refuses the file rather
// than write messages without owner terms; meta/owner_terms_next records
// how far the upgrade got, and an Open after a crash goes on from there.
// Every step is idempotent: an owner posting already there stays once, a
// tail record already holding its owner term is left alone.
//
// Each message's owner posting goes where its word postings are: the
// postings bucket up to the merge watermark, and the tail above it. A
// merge a crash interrupted has copied the terms before meta's next term
// of the messages it merges; the owner terms among those are copied too,
// and the merge copies the rest when it goes on.
func (db *DB) upgradeFrom5() error {
	start := time.Now()
	next := uint64(0) // 0: nothing to do
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaOwnerTermsNext); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("meta/%s is %d bytes, want 8", metaOwnerTermsNext, len(v))
			}
			next = btoi(v)
			return nil
		}
		if btoi(meta.Get(metaLayout)) >= 6 {
			return nil
		}
		next = 1
		if err := meta.Put(metaOwnerTermsNext, itob(next)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(6))
	})
	if err != nil || next == 0 {
		return err
	}
	db.log.Info("upgrading database layout 5 to 6: adding message owners to the search index; this runs once")
	messages := 0
	for next != 0 {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			fillGrowingBuckets(tx)
			st := readTermsState(tx)
			postings, tail := tx.Bucket(bucketPostings), tx.Bucket(bucketTermsTail)
			owned := make(map[uint64][]uint64) // owner → IDs for the postings bucket
			c := tx.Bucket(bucketMessages).Cursor()
			n := 0
			k, v := c.Seek(itob(next))
			for ; k != nil && n < upgradeChunk; k, v = c.Next() {
				m, err := decodeMessage(btoi(k), v)
				if err != nil {
					return err
				}
				term := ownerTerm(m.OwnerID)
				merging := m.ID <= st.mergingTo && len(st.nextTerm) > 0 && term < string(st.nextTerm)
				if m.ID <= st.merged || merging {
					owned[m.OwnerID] = append(owned[m.OwnerID], m.ID)
				}
				if m.ID > st.merged {
					if err := addOwnerToTailRecord(tail, m.ID, term); err != nil {
						return err
					}
				}
				n++
			}
			owners := slices.Sorted(maps.Keys(owned))
			for _, owner := range owners {
				if err := termBlocks(postings, []byte(ownerTerm(owner))).add(owned[owner]); err != nil {
					return err
				}
			}
			messages += n
			meta := tx.Bucket(bucketMeta)
			if k != nil {
				next = btoi(k)
				return meta.Put(metaOwnerTermsNext, itob(next))
			}
			next = 0
			for _, name := range [][]byte{bucketMsgsByOwner, bucketMsgsByTime} {
				if tx.Bucket(name) != nil {
					if err := tx.DeleteBucket(name); err != nil {
						return err
					}
				}
			}
			return meta.Delete(metaOwnerTermsNext)
		})
		if err != nil {
			return fmt.Errorf("upgrading to layout 6: %w", err)
		}
	}
	db.log.Info("database upgraded to layout 6: message owners are terms of the search index", "messages", messages, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// addOwnerToTailRecord puts term into message id's tail record, unless it
// is there. A message without a record is left so: CheckInvariants
// reports that, and inventing a record would hide it.
func addOwnerToTailRecord(tail *bbolt.Bucket, id uint64, term string) error {
	rec := tail.Get(itob(id))
	if rec == nil || tailRecordHas(rec, []byte(term)) {
		return nil
	}
	terms, ok := tailRecordTerms(rec)
	if !ok {
		return fmt.Errorf("terms_tail: malformed record %d", id)
	}
	i, _ := slices.BinarySearch(terms, term)
	return tail.Put(itob(id), encodeTailRecord(slices.Insert(terms, i, term)))
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
			if binaryUserRecord(v) {
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
			t := &model.Token{
				ID:         model.NewTokenID(),
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
			var chunk []*model.Message
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
func indexLayout2(tx *bbolt.Tx, msgs []*model.Message) error {
	terms, err := tx.CreateBucketIfNotExists(bucketTerms)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := indexOwnerAndTime(tx, m); err != nil {
			return err
		}
		for _, term := range model.SortedTerms(m.Content) {
			// term‖0‖id: a block key's shape, one posting to a key.
			if err := terms.Put(postingKey([]byte(term), m.ID), nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexOwnerAndTime adds m's entries to the owner and time indexes of
// layouts 2 to 5.
func indexOwnerAndTime(tx *bbolt.Tx, m *model.Message) error {
	if err := tx.Bucket(bucketMsgsByOwner).Put(compositeKey(m.OwnerID, itob(m.ID)), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketMsgsByTime).Put(timeIndexKey(m.CreatedAt, m.ID), nil)
}

func timeIndexKey(t time.Time, id uint64) []byte {
	return binary.BigEndian.AppendUint64(timeKey(t), id)
}

// timeFromKey reads the instant at the start of a msgs_by_time key.
func timeFromKey(k []byte) time.Time {
	return microsToTime(int64(binary.BigEndian.Uint64(k) ^ (1 << 63)))
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
