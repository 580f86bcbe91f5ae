package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// skeletonChunk is how many accounts fillEmailSkeletons reads and writes
// at a time, so that memory stays bounded however many there are.
const skeletonChunk = 5000

// lookAlike is two accounts whose e-mails have one skeleton.
type lookAlike struct {
	firstID, secondID       int64
	firstEmail, secondEmail string
}

// fillEmailSkeletons computes every account's email_skeleton, in the
// transaction of the migration that added the column, then makes it NOT
// NULL. Accounts whose e-mails look alike, registered before look-alikes
// were refused, are all kept as they are: the oldest of each holds the
// skeleton, the others are its twins (settleSkeletonTwins). It returns
// those pairs, for the caller to log once the migration is committed.
func fillEmailSkeletons(ctx context.Context, tx pgx.Tx) ([]lookAlike, error) {
	for after := int64(0); ; {
		rows, err := tx.Query(ctx, `SELECT id, email FROM users WHERE id > $1 ORDER BY id LIMIT $2`, after, skeletonChunk)
		if err != nil {
			return nil, err
		}
		var ids []int64
		var skeletons []string
		for rows.Next() {
			var id int64
			var email string
			if err := rows.Scan(&id, &email); err != nil {
				rows.Close()
				return nil, err
			}
			ids = append(ids, id)
			skeletons = append(skeletons, model.EmailSkeleton(email))
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			break
		}
		// Each a twin of its own until settled: no two rows collide meanwhile.
		if _, err := tx.Exec(ctx, `UPDATE users SET email_skeleton = v.skeleton, skeleton_twin = users.id
			FROM unnest($1::bigint[], $2::text[]) AS v (id, skeleton) WHERE users.id = v.id`, ids, skeletons); err != nil {
			return nil, fmt.Errorf("filling in the e-mails' skeletons: %w", err)
		}
		after = ids[len(ids)-1]
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE users ALTER COLUMN email_skeleton SET NOT NULL`); err != nil {
		return nil, err
	}
	if err := settleSkeletonTwins(ctx, tx); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT a.id, a.email, b.id, b.email FROM users a
		JOIN users b ON b.email_skeleton = a.email_skeleton AND b.id > a.id
		ORDER BY a.id, b.id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (lookAlike, error) {
		var p lookAlike
		err := row.Scan(&p.firstID, &p.firstEmail, &p.secondID, &p.secondEmail)
		return p, err
	})
}

// settleSkeletonTwins makes the oldest account of each skeleton its
// holder, skeleton_twin 0, leaving the others, all twins of their own,
// beside it. Every account must be a twin of its own before.
func settleSkeletonTwins(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `UPDATE users SET skeleton_twin = 0
		WHERE id IN (SELECT min(id) FROM users GROUP BY email_skeleton)`)
	if err != nil {
		return fmt.Errorf("settling the accounts that look alike: %w", err)
	}
	return nil
}

// logLookAlikes logs each pair of accounts found sharing a skeleton.
func (db *DB) logLookAlikes(pairs []lookAlike) {
	for _, p := range pairs {
		db.log.Warn("two accounts' e-mails look alike; both are kept as they are, and no new account may take an address like theirs",
			"account", p.firstID, "email", p.firstEmail, "look_alike_account", p.secondID, "look_alike_email", p.secondEmail)
	}
}
