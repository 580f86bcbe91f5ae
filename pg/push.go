package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Web Push (migration 8): the server's VAPID key pair, the accounts'
// subscriptions, and the sender's place in the change log with the
// deliveries it has queued and not yet finished. Only the leading
// instance sends, but a delivery is claimed by a statement that puts it
// off for a lease, so that even two senders never take the same one at
// once.

// VAPIDKeys returns the stored key pair, storing the one generate makes
// when there is none yet. Instances starting together each insert theirs
// if none is there, and every one of them reads back the one that won.
func (db *DB) VAPIDKeys(ctx context.Context, generate func() (model.VAPIDKeys, error)) (keys model.VAPIDKeys, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	err = db.pool.QueryRow(ctx, `SELECT private_key, public_key FROM push_keys`).Scan(&keys.Private, &keys.Public)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return keys, err
	}
	made, err := generate()
	if err != nil {
		return keys, err
	}
	if len(made.Private) != 32 || len(made.Public) != 65 {
		return keys, fmt.Errorf("a VAPID key pair of %d and %d bytes, want 32 and 65", len(made.Private), len(made.Public))
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO push_keys (private_key, public_key) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		made.Private, made.Public); err != nil {
		return keys, err
	}
	err = db.pool.QueryRow(ctx, `SELECT private_key, public_key FROM push_keys`).Scan(&keys.Private, &keys.Public)
	return keys, err
}

// pushOriginSQL is model.PushOrigin of s.endpoint: everything before the
// first /, ? or # after the scheme's "://" (never NULL).
const pushOriginSQL = `coalesce(substring(s.endpoint from '^[^:/?#]+://[^/?#]*'), '')`

const pushSubColumns = `id, user_id, endpoint, p256dh, auth, expiration_time, created_at, last_success_at`

func scanPushSub(row pgx.Row) (*model.PushSubscription, error) {
	var s model.PushSubscription
	var id, user int64
	var expires, lastSuccess *time.Time
	if err := row.Scan(&id, &user, &s.Endpoint, &s.P256dh, &s.Auth, &expires, &s.CreatedAt, &lastSuccess); err != nil {
		return nil, err
	}
	s.ID, s.UserID, s.CreatedAt = uint64(id), uint64(user), s.CreatedAt.UTC()
	if expires != nil {
		s.ExpirationTime = expires.UTC()
	}
	if lastSuccess != nil {
		s.LastSuccessAt = lastSuccess.UTC()
	}
	return &s, nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// SavePushSubscription stores sub for the caller: a new one (created),
// the caller's own endpoint updated, or another account's endpoint moved
// to the caller (created), its queued deliveries dropped. It sets sub's
// ID, UserID, CreatedAt and LastSuccessAt. Errors: model.ErrConflict
// (model.PushSubscriptionLimit) for one beyond the caller's
// model.MaxPushSubscriptions.
func (db *DB) SavePushSubscription(ctx context.Context, by model.Caller, sub *model.PushSubscription) (created bool, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var saved *model.PushSubscription
	err = db.write(ctx, func(w *writeTx) error {
		created = false
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		// The account's row orders its subscriptions' writes, so two at
		// once cannot both take the tenth place.
		if _, err := w.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, int64(u.ID)); err != nil {
			return err
		}
		var ownerID, subID int64
		err = w.QueryRow(ctx, `SELECT id, user_id FROM push_subscriptions WHERE endpoint = $1 FOR UPDATE`, sub.Endpoint).Scan(&subID, &ownerID)
		found := err == nil
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		now := db.clock()
		if found && uint64(ownerID) == u.ID {
			saved, err = scanPushSub(w.QueryRow(ctx, `UPDATE push_subscriptions SET p256dh = $2, auth = $3, expiration_time = $4
				WHERE id = $1 RETURNING `+pushSubColumns, subID, sub.P256dh, sub.Auth, nullTime(sub.ExpirationTime)))
			return err
		}
		var held int
		if err := w.QueryRow(ctx, `SELECT count(*) FROM push_subscriptions WHERE user_id = $1`, int64(u.ID)).Scan(&held); err != nil {
			return err
		}
		if held >= model.MaxPushSubscriptions {
			return model.PushSubscriptionLimit()
		}
		created = true
		if found {
			if _, err := w.Exec(ctx, `DELETE FROM push_pending WHERE subscription_id = $1`, subID); err != nil {
				return err
			}
			saved, err = scanPushSub(w.QueryRow(ctx, `UPDATE push_subscriptions SET user_id = $2, p256dh = $3, auth = $4,
				expiration_time = $5, created_at = $6, last_success_at = NULL
				WHERE id = $1 RETURNING `+pushSubColumns, subID, int64(u.ID), sub.P256dh, sub.Auth, nullTime(sub.ExpirationTime), now))
			return err
		}
		saved, err = scanPushSub(w.QueryRow(ctx, `INSERT INTO push_subscriptions (user_id, endpoint, p256dh, auth, expiration_time, created_at)
			VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+pushSubColumns,
			int64(u.ID), sub.Endpoint, sub.P256dh, sub.Auth, nullTime(sub.ExpirationTime), now))
		return err
	})
	if err == nil {
		*sub = *saved
	}
	return created, err
}

// PushSubscriptions lists the caller's subscriptions, newest first.
func (db *DB) PushSubscriptions(ctx context.Context, by model.Caller) (_ []*model.PushSubscription, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var subs []*model.PushSubscription
	err = db.write(ctx, func(w *writeTx) error {
		subs = subs[:0]
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		rows, err := w.Query(ctx, `SELECT `+pushSubColumns+` FROM push_subscriptions WHERE user_id = $1
			ORDER BY created_at DESC, id DESC`, int64(u.ID))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			s, err := scanPushSub(rows)
			if err != nil {
				return err
			}
			subs = append(subs, s)
		}
		return rows.Err()
	})
	return subs, err
}

// DeletePushSubscription deletes the caller's subscription id with its
// queued deliveries. Errors: model.ErrNotFound when the caller holds no
// such subscription.
func (db *DB) DeletePushSubscription(ctx context.Context, by model.Caller, id uint64) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		tag, err := w.Exec(ctx, `DELETE FROM push_subscriptions WHERE id = $1 AND user_id = $2`, int64(min(id, 1<<63-1)), int64(u.ID))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return model.PushSubscriptionNotFound(id)
		}
		return nil
	})
}

// PushPosition returns the last change whose pushes the sender has
// queued, and false when it has never stored one.
func (db *DB) PushPosition(ctx context.Context) (_ uint64, _ bool, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var seq int64
	err = db.pool.QueryRow(ctx, `SELECT seq FROM push_position`).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return uint64(seq), err == nil, err
}

// QueuePushes queues each notice's push to every subscription its account
// holds and moves the position from from to to, in one transaction.
// Errors: model.ErrConflict when the position is not from (0: never
// stored) any more: another sender moved it.
func (db *DB) QueuePushes(ctx context.Context, from, to uint64, notices []model.PushNotice) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		var cur int64
		err := w.QueryRow(ctx, `INSERT INTO push_position (seq) VALUES (0) ON CONFLICT (one) DO UPDATE SET seq = push_position.seq
			RETURNING seq`).Scan(&cur)
		if err != nil {
			return err
		}
		if uint64(cur) != from {
			return model.Errorf(model.ErrConflict, "the push position is %d, not %d", cur, from)
		}
		for _, n := range notices {
			if _, err := w.Exec(ctx, `INSERT INTO push_pending (notification_id, subscription_id, kind, payload, expires)
				SELECT $1, id, $3, $4, $5 FROM push_subscriptions WHERE user_id = $2
				ON CONFLICT DO NOTHING`, int64(n.NotificationID), int64(n.UserID), int16(n.Kind), n.Payload, n.Expires); err != nil {
				return err
			}
		}
		_, err = w.Exec(ctx, `UPDATE push_position SET seq = $1`, int64(to))
		return err
	})
}

// ClaimPushes returns up to max queued deliveries due by now, each with
// its subscription, but none to the push services busy names
// (model.PushOrigin, which pushOriginSQL computes alike), and puts each
// off until now+lease: a sender that dies with it leaves it to be
// claimed again then. SKIP LOCKED lets two senders claim at once without
// taking the same delivery.
func (db *DB) ClaimPushes(ctx context.Context, now time.Time, lease time.Duration, max int, busy []string) (_ []*model.PushDelivery, err error) {
	if busy == nil {
		busy = []string{}
	}
	ctx, end := db.call(ctx, &err)
	defer end()
	var out []*model.PushDelivery
	err = db.write(ctx, func(w *writeTx) error {
		out = out[:0]
		rows, err := w.Query(ctx, `WITH due AS (
				SELECT p.notification_id, p.subscription_id FROM push_pending p
				JOIN push_subscriptions s ON s.id = p.subscription_id
				WHERE p.not_before <= $1 AND NOT (`+pushOriginSQL+` = ANY($4::text[]))
				ORDER BY p.not_before, p.notification_id LIMIT $3 FOR UPDATE OF p SKIP LOCKED
			), claimed AS (
				UPDATE push_pending p SET not_before = $2 FROM due
				WHERE p.notification_id = due.notification_id AND p.subscription_id = due.subscription_id
				RETURNING p.notification_id, p.subscription_id, p.kind, p.payload, p.expires, p.attempts
			)
			SELECT c.notification_id, c.kind, c.payload, c.expires, c.attempts,
				s.id, s.user_id, s.endpoint, s.p256dh, s.auth, s.expiration_time, s.created_at, s.last_success_at
			FROM claimed c JOIN push_subscriptions s ON s.id = c.subscription_id
			ORDER BY c.notification_id, s.id`, now, now.Add(lease), max, busy)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d model.PushDelivery
			var notif int64
			var kind int16
			var sid, user int64
			var expires, lastSuccess *time.Time
			s := &d.Subscription
			if err := rows.Scan(&notif, &kind, &d.Payload, &d.Expires, &d.Attempts,
				&sid, &user, &s.Endpoint, &s.P256dh, &s.Auth, &expires, &s.CreatedAt, &lastSuccess); err != nil {
				return err
			}
			d.NotificationID, d.Kind, d.Expires = uint64(notif), model.NotificationKind(kind), d.Expires.UTC()
			s.ID, s.UserID, s.CreatedAt = uint64(sid), uint64(user), s.CreatedAt.UTC()
			d.SubscriptionID = s.ID
			if expires != nil {
				s.ExpirationTime = expires.UTC()
			}
			if lastSuccess != nil {
				s.LastSuccessAt = lastSuccess.UTC()
			}
			out = append(out, &d)
		}
		return rows.Err()
	})
	return out, err
}

// FinishPush records how delivery d went: done, its subscription gone,
// dropped, or to be tried again at at (also the time of a success).
func (db *DB) FinishPush(ctx context.Context, d *model.PushDelivery, outcome model.PushOutcome, at time.Time) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	notif, sub := int64(d.NotificationID), int64(d.SubscriptionID)
	return db.write(ctx, func(w *writeTx) error {
		var err error
		switch outcome {
		case model.PushDelivered:
			if _, err = w.Exec(ctx, `UPDATE push_subscriptions SET last_success_at = $2 WHERE id = $1`, sub, at); err == nil {
				_, err = w.Exec(ctx, `DELETE FROM push_pending WHERE notification_id = $1 AND subscription_id = $2`, notif, sub)
			}
		case model.PushSubscriptionGone:
			_, err = w.Exec(ctx, `DELETE FROM push_subscriptions WHERE id = $1 AND endpoint = $2`, sub, d.Subscription.Endpoint)
			if err == nil {
				_, err = w.Exec(ctx, `DELETE FROM push_pending WHERE notification_id = $1 AND subscription_id = $2`, notif, sub)
			}
		case model.PushRetry:
			_, err = w.Exec(ctx, `UPDATE push_pending SET attempts = attempts + 1, not_before = $3
				WHERE notification_id = $1 AND subscription_id = $2`, notif, sub, at)
		default:
			_, err = w.Exec(ctx, `DELETE FROM push_pending WHERE notification_id = $1 AND subscription_id = $2`, notif, sub)
		}
		return err
	})
}
