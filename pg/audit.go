package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// The audit log: every administrative act, written in the transaction of
// the act itself, so an act is in the log if and only if it happened. It
// is trimmed by age and count, as the change log is.

// audit writes e to the audit log in the act's transaction, with the time
// and its actor (nil: the server's machine).
func (w *writeTx) audit(ctx context.Context, actor *model.User, e *model.AuditEntry) error {
	e.At = w.db.clock()
	if actor != nil {
		e.ActorID, e.ActorEmail = actor.ID, actor.Email
	}
	return w.QueryRow(ctx, `INSERT INTO audit (at, action, actor_id, actor_email, user_id, user_email, message_id, invite_id, count, settings)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
		e.At, string(e.Action), int64(e.ActorID), e.ActorEmail, int64(e.UserID), e.UserEmail,
		int64(e.MessageID), int64(e.InviteID), e.Count, auditSettings(e)).Scan(&e.ID)
}

// auditSettings is what the audit table's settings column keeps of e: the
// settings it changed, or NULL.
func auditSettings(e *model.AuditEntry) any {
	if len(e.Settings) == 0 {
		return nil
	}
	return map[string]string(e.Settings)
}

// AuditLog pages through the audit log, newest first. Errors:
// model.ErrForbidden for a caller who is not an administrator.
func (db *DB) AuditLog(ctx context.Context, by model.Caller, q model.AuditQuery) (_ *model.AuditPage, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	limit := q.PageLimit()
	before := idsBelow(q.BeforeID)
	page := &model.AuditPage{}
	err = db.adminRead(ctx, by, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, at, action, actor_id, actor_email, user_id, user_email, message_id, invite_id, count, settings
			FROM audit WHERE id < $1 ORDER BY id DESC LIMIT $2`, before, limit+1)
		if err != nil {
			return err
		}
		page.Entries, err = collectRows(rows, func(row pgx.Row) (*model.AuditEntry, error) {
			e := &model.AuditEntry{}
			var (
				id, actor, user, msg, inv int64
				action                    string
			)
			var settings map[string]string
			if err := row.Scan(&id, &e.At, &action, &actor, &e.ActorEmail, &user, &e.UserEmail, &msg, &inv, &e.Count, &settings); err != nil {
				return nil, err
			}
			if len(settings) > 0 {
				e.Settings = settings
			}
			e.ID, e.At, e.Action = uint64(id), e.At.UTC(), model.AuditAction(action)
			e.ActorID, e.UserID, e.MessageID, e.InviteID = uint64(actor), uint64(user), uint64(msg), uint64(inv)
			return e, nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(page.Entries) > limit {
		page.Entries = page.Entries[:limit]
		page.NextBeforeID = page.Entries[limit-1].ID
	}
	return page, nil
}

// RecordBackup writes to the audit log that the caller downloads a
// backup. A PostgreSQL store offers no download (its backups are
// PostgreSQL's), so only a server answering 501 after the check calls it.
func (db *DB) RecordBackup(ctx context.Context, by model.Caller) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		return w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditDownloadBackup})
	})
}

// TrimAudit removes audit entries older than keepFor, and the oldest
// beyond the newest keepMax, and returns how many it removed. A zero
// keepFor or keepMax leaves that bound off.
func (db *DB) TrimAudit(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	removed := 0
	if keepFor > 0 {
		tag, err := db.pool.Exec(ctx, `DELETE FROM audit WHERE at < $1`, db.clock().Add(-keepFor))
		if err != nil {
			return removed, err
		}
		removed += rowsAffected(tag)
	}
	if keepMax > 0 {
		tag, err := db.pool.Exec(ctx, `DELETE FROM audit WHERE id <= (
			SELECT id FROM audit ORDER BY id DESC OFFSET $1 LIMIT 1)`, keepMax)
		if err != nil {
			return removed, err
		}
		removed += rowsAffected(tag)
	}
	return removed, nil
}
