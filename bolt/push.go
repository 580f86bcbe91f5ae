package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Web Push (layout 11): the server's VAPID key pair, the accounts'
// subscriptions, and the sender's place in the change log with the
// deliveries it has queued and not yet finished. Records are JSON: they
// are few and small, read by the sender and a person's settings page,
// never by a search.
var (
	// "vapid" → private scalar (32) ‖ public point (65); "position" →
	// the last change the sender has queued the pushes of
	bucketPush = []byte("push")
	// subscriptionID → pushSubRecord
	bucketPushSubs = []byte("push_subs")
	// userID‖subscriptionID → nil
	bucketPushSubsByUser = []byte("push_subs_by_user")
	// endpoint → subscriptionID: an endpoint belongs to one account
	bucketPushSubsByEndpoint = []byte("push_subs_by_endpoint")
	// notificationID‖subscriptionID → pushDeliveryRecord
	bucketPushPending = []byte("push_pending")

	pushKeyVAPID    = []byte("vapid")
	pushKeyPosition = []byte("position")
)

type pushSubRecord struct {
	UserID         uint64 `json:"u"`
	Endpoint       string `json:"e"`
	P256dh         []byte `json:"p"`
	Auth           []byte `json:"a"`
	ExpirationTime int64  `json:"x,omitempty"` // Unix microseconds, 0 for none
	CreatedAt      int64  `json:"c"`
	LastSuccessAt  int64  `json:"s,omitempty"`
}

type pushDeliveryRecord struct {
	Kind      model.NotificationKind `json:"k"`
	Payload   []byte                 `json:"p"`
	Expires   int64                  `json:"x"`
	Attempts  int                    `json:"a,omitempty"`
	NotBefore int64                  `json:"n,omitempty"`
}

func (r *pushSubRecord) subscription(id uint64) *model.PushSubscription {
	s := &model.PushSubscription{ID: id, UserID: r.UserID, Endpoint: r.Endpoint,
		P256dh: slices.Clone(r.P256dh), Auth: slices.Clone(r.Auth), CreatedAt: microsToTime(r.CreatedAt)}
	if r.ExpirationTime != 0 {
		s.ExpirationTime = microsToTime(r.ExpirationTime)
	}
	if r.LastSuccessAt != 0 {
		s.LastSuccessAt = microsToTime(r.LastSuccessAt)
	}
	return s
}

func optionalMicros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return timeToMicros(t)
}

func readPushSub(tx *bbolt.Tx, id uint64) (*pushSubRecord, error) {
	v := tx.Bucket(bucketPushSubs).Get(itob(id))
	if v == nil {
		return nil, nil
	}
	var r pushSubRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("push subscription %d: %w", id, err)
	}
	return &r, nil
}

func putPushSub(tx *bbolt.Tx, id uint64, r *pushSubRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketPushSubs).Put(itob(id), v)
}

// pushSubsOf returns the IDs of userID's subscriptions, oldest first.
func pushSubsOf(tx *bbolt.Tx, userID uint64) []uint64 {
	var ids []uint64
	prefix := itob(userID)
	c := tx.Bucket(bucketPushSubsByUser).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		ids = append(ids, btoi(k[8:]))
	}
	return ids
}

// VAPIDKeys returns the stored key pair, storing the one generate makes
// when there is none yet.
func (db *DB) VAPIDKeys(_ context.Context, generate func() (model.VAPIDKeys, error)) (model.VAPIDKeys, error) {
	var keys model.VAPIDKeys
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		keys = decodeVAPID(tx.Bucket(bucketPush).Get(pushKeyVAPID))
		return nil
	})
	if err != nil || keys.Private != nil {
		return keys, err
	}
	made, err := generate()
	if err != nil {
		return keys, err
	}
	if len(made.Private) != 32 || len(made.Public) != 65 {
		return keys, fmt.Errorf("a VAPID key pair of %d and %d bytes, want 32 and 65", len(made.Private), len(made.Public))
	}
	err = db.writes.upkeep(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketPush)
		if keys = decodeVAPID(b.Get(pushKeyVAPID)); keys.Private != nil {
			return nil
		}
		keys = made
		return b.Put(pushKeyVAPID, append(slices.Clone(made.Private), made.Public...))
	})
	return keys, err
}

func decodeVAPID(v []byte) model.VAPIDKeys {
	if len(v) != 32+65 {
		return model.VAPIDKeys{}
	}
	return model.VAPIDKeys{Private: slices.Clone(v[:32]), Public: slices.Clone(v[32:])}
}

// SavePushSubscription stores sub for the caller: a new one (created),
// the caller's own endpoint updated, or another account's endpoint moved
// to the caller (created), its queued deliveries dropped. It sets sub's
// ID, UserID, CreatedAt and LastSuccessAt. Errors: model.ErrConflict
// (model.PushSubscriptionLimit) for one beyond the caller's
// model.MaxPushSubscriptions.
func (db *DB) SavePushSubscription(_ context.Context, by model.Caller, sub *model.PushSubscription) (created bool, err error) {
	err = db.writes.update(func(tx *bbolt.Tx) error {
		created = false
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		byEndpoint := tx.Bucket(bucketPushSubsByEndpoint)
		var id uint64
		var rec *pushSubRecord
		if v := byEndpoint.Get([]byte(sub.Endpoint)); v != nil {
			id = btoi(v)
			if rec, err = readPushSub(tx, id); err != nil {
				return err
			}
		}
		now := timeToMicros(db.clock())
		switch {
		case rec != nil && rec.UserID == u.ID:
			rec.P256dh, rec.Auth, rec.ExpirationTime = sub.P256dh, sub.Auth, optionalMicros(sub.ExpirationTime)
		default:
			if len(pushSubsOf(tx, u.ID)) >= model.MaxPushSubscriptions {
				return model.PushSubscriptionLimit()
			}
			created = true
			if rec != nil {
				if err := tx.Bucket(bucketPushSubsByUser).Delete(compositeKey(rec.UserID, itob(id))); err != nil {
					return err
				}
				if err := deletePendingOf(tx, id); err != nil {
					return err
				}
			} else {
				if id, err = tx.Bucket(bucketPushSubs).NextSequence(); err != nil {
					return err
				}
				if err := byEndpoint.Put([]byte(sub.Endpoint), itob(id)); err != nil {
					return err
				}
			}
			rec = &pushSubRecord{UserID: u.ID, Endpoint: sub.Endpoint, P256dh: sub.P256dh, Auth: sub.Auth,
				ExpirationTime: optionalMicros(sub.ExpirationTime), CreatedAt: now}
			if err := tx.Bucket(bucketPushSubsByUser).Put(compositeKey(u.ID, itob(id)), nil); err != nil {
				return err
			}
		}
		if err := putPushSub(tx, id, rec); err != nil {
			return err
		}
		*sub = *rec.subscription(id)
		return nil
	})
	return created, err
}

// PushSubscriptions lists the caller's subscriptions, newest first.
func (db *DB) PushSubscriptions(_ context.Context, by model.Caller) ([]*model.PushSubscription, error) {
	var subs []*model.PushSubscription
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		subs = subs[:0]
		for _, id := range pushSubsOf(tx, u.ID) {
			rec, err := readPushSub(tx, id)
			if err != nil {
				return err
			}
			if rec != nil {
				subs = append(subs, rec.subscription(id))
			}
		}
		return nil
	})
	sortNewestFirst(subs)
	return subs, err
}

// sortNewestFirst orders subscriptions as the API lists them.
func sortNewestFirst(subs []*model.PushSubscription) {
	slices.SortFunc(subs, func(a, b *model.PushSubscription) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return int(b.ID) - int(a.ID)
	})
}

// DeletePushSubscription deletes the caller's subscription id with its
// queued deliveries. Errors: model.ErrNotFound when the caller holds no
// such subscription.
func (db *DB) DeletePushSubscription(_ context.Context, by model.Caller, id uint64) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		rec, err := readPushSub(tx, id)
		if err != nil {
			return err
		}
		if rec == nil || rec.UserID != u.ID {
			return model.PushSubscriptionNotFound(id)
		}
		return deletePushSub(tx, id, rec)
	})
}

func deletePushSub(tx *bbolt.Tx, id uint64, rec *pushSubRecord) error {
	if err := tx.Bucket(bucketPushSubs).Delete(itob(id)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketPushSubsByUser).Delete(compositeKey(rec.UserID, itob(id))); err != nil {
		return err
	}
	if err := tx.Bucket(bucketPushSubsByEndpoint).Delete([]byte(rec.Endpoint)); err != nil {
		return err
	}
	return deletePendingOf(tx, id)
}

// removePushSubscriptionsOf deletes an account's subscriptions, in its
// deletion's transaction.
func removePushSubscriptionsOf(tx *bbolt.Tx, userID uint64) error {
	for _, id := range pushSubsOf(tx, userID) {
		rec, err := readPushSub(tx, id)
		if err != nil {
			return err
		}
		if rec == nil {
			continue
		}
		if err := deletePushSub(tx, id, rec); err != nil {
			return err
		}
	}
	return nil
}

// deletePendingOf deletes the queued deliveries to subscription id. The
// queue holds at most a day of pushes, so a walk over it is short.
func deletePendingOf(tx *bbolt.Tx, id uint64) error {
	var doomed [][]byte
	err := tx.Bucket(bucketPushPending).ForEach(func(k, _ []byte) error {
		if len(k) == 16 && btoi(k[8:]) == id {
			doomed = append(doomed, slices.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range doomed {
		if err := tx.Bucket(bucketPushPending).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// PushPosition returns the last change whose pushes the sender has
// queued, and false when it has never stored one.
func (db *DB) PushPosition(context.Context) (uint64, bool, error) {
	var pos uint64
	var ok bool
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketPush).Get(pushKeyPosition); len(v) == 8 {
			pos, ok = btoi(v), true
		}
		return nil
	})
	return pos, ok, err
}

// QueuePushes queues each notice's push to every subscription its account
// holds and moves the position from from to to, in one transaction.
// Errors: model.ErrConflict when the position is not from (0: never
// stored) any more: another sender moved it.
func (db *DB) QueuePushes(_ context.Context, from, to uint64, notices []model.PushNotice) error {
	return db.writes.upkeep(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketPush)
		var cur uint64
		if v := b.Get(pushKeyPosition); len(v) == 8 {
			cur = btoi(v)
		}
		if cur != from {
			return model.Errorf(model.ErrConflict, "the push position is %d, not %d", cur, from)
		}
		pending := tx.Bucket(bucketPushPending)
		for _, n := range notices {
			v, err := json.Marshal(&pushDeliveryRecord{Kind: n.Kind, Payload: n.Payload, Expires: timeToMicros(n.Expires)})
			if err != nil {
				return err
			}
			for _, id := range pushSubsOf(tx, n.UserID) {
				if err := pending.Put(compositeKey(n.NotificationID, itob(id)), v); err != nil {
					return err
				}
			}
		}
		return b.Put(pushKeyPosition, itob(to))
	})
}

// ClaimPushes returns up to max queued deliveries due by now, each with
// its subscription, but none to the push services busy names
// (model.PushOrigin), and puts each off until now+lease: a sender that
// dies with it leaves it to be claimed again then. Deliveries whose
// subscription is gone are deleted.
func (db *DB) ClaimPushes(_ context.Context, now time.Time, lease time.Duration, max int, busy []string) ([]*model.PushDelivery, error) {
	var out []*model.PushDelivery
	err := db.writes.upkeep(func(tx *bbolt.Tx) error {
		out = out[:0]
		pending := tx.Bucket(bucketPushPending)
		type put struct{ k, v []byte }
		var puts []put
		var doomed [][]byte
		due, until := timeToMicros(now), timeToMicros(now.Add(lease))
		err := pending.ForEach(func(k, v []byte) error {
			if len(out) >= max || len(k) != 16 {
				return nil
			}
			var r pushDeliveryRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("push delivery %x: %w", k, err)
			}
			if r.NotBefore > due {
				return nil
			}
			subID := btoi(k[8:])
			sub, err := readPushSub(tx, subID)
			if err != nil {
				return err
			}
			if sub == nil {
				doomed = append(doomed, slices.Clone(k))
				return nil
			}
			if slices.Contains(busy, model.PushOrigin(sub.Endpoint)) {
				return nil
			}
			d := &model.PushDelivery{NotificationID: btoi(k[:8]), SubscriptionID: subID, Kind: r.Kind,
				Payload: slices.Clone(r.Payload), Expires: microsToTime(r.Expires), Attempts: r.Attempts,
				NotBefore: microsToTime(r.NotBefore), Subscription: *sub.subscription(subID)}
			out = append(out, d)
			r.NotBefore = until
			nv, err := json.Marshal(&r)
			if err != nil {
				return err
			}
			puts = append(puts, put{slices.Clone(k), nv})
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range puts {
			if err := pending.Put(p.k, p.v); err != nil {
				return err
			}
		}
		for _, k := range doomed {
			if err := pending.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// FinishPush records how delivery d went: done, its subscription gone,
// dropped, or to be tried again at at (also the time of a success).
func (db *DB) FinishPush(_ context.Context, d *model.PushDelivery, outcome model.PushOutcome, at time.Time) error {
	return db.writes.upkeep(func(tx *bbolt.Tx) error {
		pending := tx.Bucket(bucketPushPending)
		key := compositeKey(d.NotificationID, itob(d.SubscriptionID))
		sub, err := readPushSub(tx, d.SubscriptionID)
		if err != nil {
			return err
		}
		switch outcome {
		case model.PushDelivered:
			if sub != nil {
				sub.LastSuccessAt = timeToMicros(at)
				if err := putPushSub(tx, d.SubscriptionID, sub); err != nil {
					return err
				}
			}
			return pending.Delete(key)
		case model.PushSubscriptionGone:
			if sub != nil && sub.Endpoint == d.Subscription.Endpoint {
				return deletePushSub(tx, d.SubscriptionID, sub)
			}
			return pending.Delete(key)
		case model.PushRetry:
			v := pending.Get(key)
			if v == nil {
				return nil
			}
			var r pushDeliveryRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			r.Attempts++
			r.NotBefore = timeToMicros(at)
			nv, err := json.Marshal(&r)
			if err != nil {
				return err
			}
			return pending.Put(key, nv)
		default:
			return pending.Delete(key)
		}
	})
}

// push checks the push buckets: the key pair's size, every subscription
// decodes, belongs to an account and is found by both its indexes (and
// they hold nothing else), at most model.MaxPushSubscriptions an account,
// and every queued delivery is to a subscription that exists.
func (c *checker) push() {
	b := c.tx.Bucket(bucketPush)
	if v := b.Get(pushKeyVAPID); v != nil && len(v) != 32+65 {
		c.addf("push/vapid is %d bytes, want 97", len(v))
	}
	if v := b.Get(pushKeyPosition); v != nil && len(v) != 8 {
		c.addf("push/position is %d bytes, want 8", len(v))
	}
	c.sequenceAhead(bucketPushSubs)
	users, byUser, byEndpoint := c.tx.Bucket(bucketUsers), c.tx.Bucket(bucketPushSubsByUser), c.tx.Bucket(bucketPushSubsByEndpoint)
	subs := make(map[uint64]*pushSubRecord)
	perUser := make(map[uint64]int)
	_ = c.tx.Bucket(bucketPushSubs).ForEach(func(k, v []byte) error {
		var r pushSubRecord
		if len(k) != 8 || json.Unmarshal(v, &r) != nil {
			c.addf("push_subs: entry %x does not decode", k)
			return nil
		}
		id := btoi(k)
		subs[id] = &r
		perUser[r.UserID]++
		if users.Get(itob(r.UserID)) == nil {
			c.addf("push subscription %d: account %d does not exist", id, r.UserID)
		}
		if byUser.Get(compositeKey(r.UserID, k)) == nil {
			c.addf("push_subs_by_user: subscription %d of account %d is missing", id, r.UserID)
		}
		if v := byEndpoint.Get([]byte(r.Endpoint)); v == nil || btoi(v) != id {
			c.addf("push_subs_by_endpoint: subscription %d's endpoint is missing or points elsewhere", id)
		}
		return nil
	})
	for user, n := range perUser {
		if n > model.MaxPushSubscriptions {
			c.addf("account %d holds %d push subscriptions, more than %d", user, n, model.MaxPushSubscriptions)
		}
	}
	_ = byUser.ForEach(func(k, _ []byte) error {
		if len(k) != 16 {
			c.addf("push_subs_by_user: key %x is not two 8-byte numbers", k)
		} else if r := subs[btoi(k[8:])]; r == nil || r.UserID != btoi(k[:8]) {
			c.addf("push_subs_by_user: entry %x points at no subscription of that account", k)
		}
		return nil
	})
	_ = byEndpoint.ForEach(func(_, v []byte) error {
		if len(v) != 8 || subs[btoi(v)] == nil {
			c.addf("push_subs_by_endpoint: an entry points at subscription %x, which does not exist", v)
		}
		return nil
	})
	_ = c.tx.Bucket(bucketPushPending).ForEach(func(k, _ []byte) error {
		if len(k) != 16 || subs[btoi(k[8:])] == nil {
			c.addf("push_pending: delivery %x is to no subscription", k)
		}
		return nil
	})
}

// exportPush hands Export's visitor what Web Push keeps.
func exportPush(tx *bbolt.Tx, v Visitor, out *Exported) error {
	b := tx.Bucket(bucketPush)
	if keys := decodeVAPID(b.Get(pushKeyVAPID)); keys.Private != nil && v.PushKeys != nil {
		if err := v.PushKeys(keys); err != nil {
			return err
		}
	}
	subs := tx.Bucket(bucketPushSubs)
	out.PushSubscriptionsSeq = subs.Sequence()
	err := subs.ForEach(func(k, _ []byte) error {
		rec, err := readPushSub(tx, btoi(k))
		if err != nil || rec == nil {
			return err
		}
		out.PushSubscriptions++
		if v.PushSubscription == nil {
			return nil
		}
		return v.PushSubscription(rec.subscription(btoi(k)))
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketPushPending).ForEach(func(k, val []byte) error {
		var r pushDeliveryRecord
		if len(k) != 16 || json.Unmarshal(val, &r) != nil {
			return fmt.Errorf("push_pending: entry %x does not decode", k)
		}
		out.PushPending++
		if v.PushDelivery == nil {
			return nil
		}
		return v.PushDelivery(&model.PushDelivery{NotificationID: btoi(k[:8]), SubscriptionID: btoi(k[8:]), Kind: r.Kind,
			Payload: slices.Clone(r.Payload), Expires: microsToTime(r.Expires), Attempts: r.Attempts, NotBefore: microsToTime(r.NotBefore)})
	})
	if err != nil {
		return err
	}
	if pos := b.Get(pushKeyPosition); len(pos) == 8 && v.PushPosition != nil {
		return v.PushPosition(btoi(pos))
	}
	return nil
}
