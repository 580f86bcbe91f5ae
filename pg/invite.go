package pg

import (
	"context"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Invitations: while registration needs one, a registration takes one use
// of an invitation in its own transaction (see CreateUser).

const inviteColumns = `id, code_hash, max_uses, uses, created_at, expires_at, created_by`

func scanInvite(row pgx.Row) (*model.Invite, error) {
	inv := &model.Invite{}
	var (
		id, by int64
		code   []byte
	)
	if err := row.Scan(&id, &code, &inv.MaxUses, &inv.Uses, &inv.CreatedAt, &inv.ExpiresAt, &by); err != nil {
		return nil, err
	}
	inv.ID, inv.CreatedBy = uint64(id), uint64(by)
	copy(inv.CodeHash[:], code)
	inv.CreatedAt, inv.ExpiresAt = inv.CreatedAt.UTC(), inv.ExpiresAt.UTC()
	return inv, nil
}

// CreateInvite stores inv, whose MaxUses, ExpiresAt and CodeHash are set,
// and sets its ID, Uses, CreatedAt and CreatedBy. Errors:
// model.ErrForbidden, model.ErrInvalid, model.ErrConflict for a code
// already in use.
func (db *DB) CreateInvite(ctx context.Context, by model.Caller, inv *model.Invite) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	now := db.clock()
	if err := inv.Validate(now); err != nil {
		return err
	}
	stored := *inv
	err = db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		stored.Uses, stored.CreatedAt, stored.CreatedBy = 0, now, 0
		if actor != nil {
			stored.CreatedBy = actor.ID
		}
		var id int64
		err = w.QueryRow(ctx, `INSERT INTO invites (code_hash, max_uses, created_at, expires_at, created_by)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`,
			stored.CodeHash[:], stored.MaxUses, stored.CreatedAt, stored.ExpiresAt, int64(stored.CreatedBy)).Scan(&id)
		if uniqueViolation(err, "invites_code_unique") {
			return model.InviteCodeAlreadyIssued()
		}
		if err != nil {
			return err
		}
		stored.ID = uint64(id)
		return w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditCreateInvite, InviteID: stored.ID})
	})
	if err != nil {
		return err
	}
	*inv = stored
	return nil
}

// Invites lists the invitations, newest first, expired ones until the
// sweep removes them. Errors: model.ErrForbidden.
func (db *DB) Invites(ctx context.Context, by model.Caller) (_ []*model.Invite, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var out []*model.Invite
	err = db.adminRead(ctx, by, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+inviteColumns+` FROM invites ORDER BY id DESC`)
		if err != nil {
			return err
		}
		out, err = collectRows(rows, scanInvite)
		return err
	})
	return out, err
}

// RevokeInvite deletes invitation id. Errors: model.ErrForbidden,
// model.ErrNotFound.
func (db *DB) RevokeInvite(ctx context.Context, by model.Caller, id uint64) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		tag, err := w.Exec(ctx, `DELETE FROM invites WHERE id = $1`, int64(id))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return model.InviteNotFound(id)
		}
		return w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditRevokeInvite, InviteID: id})
	})
}
