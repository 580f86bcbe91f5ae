package bolt

import (
	"bytes"
	"encoding/binary"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// emailSkeleton is model.EmailSkeleton as the users_by_skeleton bucket's
// keys begin.
func emailSkeleton(email string) []byte { return []byte(model.EmailSkeleton(email)) }

// skeletonKey is the users_by_skeleton key of account id, whose e-mail
// has skeleton: the skeleton, a zero byte and the ID. Several accounts may
// share a skeleton, each with its key: those registered before skeletons
// were compared are kept as they were (see indexEmailSkeletons).
func skeletonKey(skeleton []byte, id uint64) []byte {
	k := make([]byte, 0, len(skeleton)+9)
	k = append(append(k, skeleton...), 0)
	return binary.BigEndian.AppendUint64(k, id)
}

// skeletonHolders returns the IDs of the accounts whose e-mail has
// skeleton, in ID order. A key of a longer skeleton that merely begins
// with this one and a zero byte is told apart by its length.
func skeletonHolders(tx *bbolt.Tx, skeleton []byte) []uint64 {
	prefix := append(append([]byte(nil), skeleton...), 0)
	var ids []uint64
	c := tx.Bucket(bucketUsersBySkeleton).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(k) == len(prefix)+8 {
			ids = append(ids, btoi(k[len(prefix):]))
		}
	}
	return ids
}

// lookAlike is two accounts whose e-mails have one skeleton.
type lookAlike struct {
	first, second *model.User
}

// indexEmailSkeletons builds the users_by_skeleton bucket from every
// account, a chunk of accounts per transaction, for the upgrade to layout
// 8, and returns how many accounts it indexed and the pairs that look
// alike. It starts afresh each time it runs, so an upgrade cut short is
// redone whole by the next Open, and what an older Herald might have
// written meanwhile is not trusted. Accounts whose e-mails look alike,
// registered before skeletons were compared, are all kept and indexed as
// they are: the upgrade logs each pair once the index is complete, so
// that an operator can look at them; neither is changed, both still log
// in and post, and a new account looking like either is refused.
func (db *DB) indexEmailSkeletons() (users int, pairs []lookAlike, err error) {
	err = db.bolt.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketUsersBySkeleton); err != nil {
			return err
		}
		_, err := tx.CreateBucket(bucketUsersBySkeleton)
		return err
	})
	if err != nil {
		return 0, nil, err
	}
	for next := uint64(1); next != 0; {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			index := tx.Bucket(bucketUsersBySkeleton)
			c := tx.Bucket(bucketUsers).Cursor()
			n := 0
			k, v := c.Seek(itob(next))
			for ; k != nil && n < upgradeChunk; k, v = c.Next() {
				u, err := decodeUser(btoi(k), v)
				if err != nil {
					return err
				}
				skeleton := emailSkeleton(u.Email)
				for _, id := range skeletonHolders(tx, skeleton) {
					first, err := userByID(tx, id)
					if err != nil {
						return err
					}
					pairs = append(pairs, lookAlike{first, u})
				}
				// Another bucket's: the cursor over users stays where it is.
				if err := index.Put(skeletonKey(skeleton, u.ID), nil); err != nil {
					return err
				}
				n++
			}
			users += n
			next = 0
			if k != nil {
				next = btoi(k)
			}
			return nil
		})
		if err != nil {
			return users, pairs, err
		}
	}
	return users, pairs, nil
}

// logLookAlikes logs each pair of accounts found sharing a skeleton.
func (db *DB) logLookAlikes(pairs []lookAlike) {
	for _, p := range pairs {
		db.log.Warn("two accounts' e-mails look alike; both are kept as they are, and no new account may take an address like theirs",
			"account", p.first.ID, "email", p.first.Email, "look_alike_account", p.second.ID, "look_alike_email", p.second.Email)
	}
}
