package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"herald/model"
)

// querier is what a pool and a transaction both offer.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

const userColumns = `id, email, password_hash, roles, created_at, suspended, last_seen_at, handle, name`

// scanUser reads a row of userColumns.
func scanUser(row pgx.Row) (*model.User, error) {
	var (
		u       model.User
		id      int64
		created time.Time
		seen    *time.Time
	)
	if err := row.Scan(&id, &u.Email, &u.PasswordHash, &u.Roles, &created, &u.Suspended, &seen, &u.Handle, &u.Name); err != nil {
		return nil, err
	}
	u.ID, u.CreatedAt = uint64(id), created.UTC()
	if seen != nil {
		u.LastSeenAt = seen.UTC()
	}
	return &u, nil
}

// CreateUser stores a new account with model.RoleUser alone and its first
// token, in one transaction: registration hands out a token. With invite,
// the hash of an invitation's code, it takes one use of the invitation in
// that transaction. It sets u.ID, u.Roles, u.CreatedAt and u.LastSeenAt.
// Errors: model.ErrInvalid for a bad e-mail, or model.InviteRefused;
// model.ErrConflict when the e-mail is taken (in any letter case).
func (db *DB) CreateUser(ctx context.Context, u *model.User, tokenHash model.TokenHash, ttl time.Duration, invite *model.TokenHash) (_ *model.Token, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	nu, err := model.NewAccount(u)
	if err != nil {
		return nil, err
	}
	var tok *model.Token
	err = db.write(ctx, func(w *writeTx) error {
		created := db.clock()
		// The invitation first: without a good one, nobody learns whether
		// an e-mail is registered. The row's update lock orders two
		// registrations racing for its last use.
		if invite != nil {
			var id int64
			err := w.QueryRow(ctx, `UPDATE invites SET uses = uses + 1
				WHERE code_hash = $1 AND uses < max_uses AND expires_at > $2 RETURNING id`, invite[:], created).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return model.InviteRefused()
			}
			if err != nil {
				return err
			}
		}
		// Whatever u says, an account begins with the role every account
		// has and nothing more.
		if err := w.insertUser(ctx, &nu, []string{model.RoleUser}, created); err != nil {
			return err
		}
		tok, err = w.issueToken(ctx, tokenHash, nu.ID, created, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Only now, after the commit, so a failed write leaves u untouched.
	*u = nu
	return tok, nil
}

// CreateAdministrator stores a new account holding model.RoleAdmin, with
// no token, and writes the grant to the audit log as made on the server's
// machine, in one transaction: herald admin create. It sets u's ID,
// Roles, CreatedAt and LastSeenAt. Errors: model.ErrInvalid,
// model.ErrConflict.
func (db *DB) CreateAdministrator(ctx context.Context, u *model.User) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	nu, err := model.NewAccount(u)
	if err != nil {
		return err
	}
	err = db.write(ctx, func(w *writeTx) error {
		if err := w.insertUser(ctx, &nu, []string{model.RoleUser, model.RoleAdmin}, db.clock()); err != nil {
			return err
		}
		return w.audit(ctx, nil, &model.AuditEntry{Action: model.AuditGrantAdmin, UserID: nu.ID, UserEmail: nu.Email})
	})
	if err != nil {
		return err
	}
	*u = nu
	return nil
}

// insertUser stores u as a new account holding roles, created at now, and
// sets its ID, Roles, CreatedAt and LastSeenAt. Errors: model.ErrConflict
// when the e-mail is taken (in any letter case) or looks like a taken one
// (model.EmailSkeleton).
func (w *writeTx) insertUser(ctx context.Context, u *model.User, roles []string, now time.Time) error {
	// An address already taken is found before the insert, not by the
	// unique constraints alone: an insert a constraint refuses has drawn
	// its ID already, and the next account would show the gap, where
	// bbolt's shows none. The constraints still settle two registrations
	// of one address, or of two that look alike, racing, and those draw
	// an ID, as does a registration its transaction refuses after the
	// insert (a token hash already issued). Every holder of a skeleton,
	// twins included, is found by the skeleton constraint's index.
	key, skeleton := model.EmailKey(u.Email), model.EmailSkeleton(u.Email)
	handle, err := w.takeHandle(ctx, u.Handle, u.Email)
	if err != nil {
		return err
	}
	name := u.Name
	if name == "" {
		name = handle
	}
	var id int64
	err = w.QueryRow(ctx, `INSERT INTO users (email, email_key, email_skeleton, password_hash, roles, created_at, last_seen_at, handle, name)
		SELECT $1::text, $2::text, $3::text, $4::text, $5::text[], $6::timestamptz, $6::timestamptz, $7::text, $8::text
		WHERE NOT EXISTS (SELECT 1 FROM users WHERE email_key = $2::text)
			AND NOT EXISTS (SELECT 1 FROM users WHERE email_skeleton = $3::text)
		RETURNING id`,
		u.Email, key, skeleton, u.PasswordHash, roles, now, handle, name).Scan(&id)
	switch {
	case uniqueViolation(err, "users_handle_unique"):
		return model.HandleTaken(handle)
	case uniqueViolation(err, "users_email_key_unique"):
		return model.EmailTaken(u.Email)
	case uniqueViolation(err, "users_email_skeleton_unique"):
		return model.EmailLookAlike(u.Email)
	case errors.Is(err, pgx.ErrNoRows):
		// Which of the two: the same address is the plainer answer.
		var taken bool
		if err := w.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE email_key = $1::text)`, key).Scan(&taken); err != nil {
			return err
		}
		if taken {
			return model.EmailTaken(u.Email)
		}
		return model.EmailLookAlike(u.Email)
	case err != nil:
		return err
	}
	u.ID, u.Roles, u.CreatedAt, u.LastSeenAt, u.Suspended = uint64(id), roles, now, now, false
	u.Handle, u.Name = handle, name
	return nil
}

// takeHandle is the handle a new account gets: asked, the one it asked
// for unless another account has it; otherwise the first that
// model.HandleCandidate makes from email and no account has. Handles are
// given under a lock held to the commit, so two registrations never pick
// the same free one and one of them fail for a handle it never asked for.
func (w *writeTx) takeHandle(ctx context.Context, asked, email string) (string, error) {
	if _, err := w.Exec(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, lockSpace, lockHandles); err != nil {
		return "", err
	}
	taken := func(h string) (bool, error) {
		var taken bool
		err := w.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE handle = $1)`, h).Scan(&taken)
		return taken, err
	}
	if asked != "" {
		if t, err := taken(asked); err != nil || t {
			if err == nil {
				err = model.HandleTaken(asked)
			}
			return "", err
		}
		return asked, nil
	}
	base := model.HandleBase(email)
	for n := 1; ; n++ {
		h := model.HandleCandidate(base, n)
		if t, err := taken(h); err != nil || !t {
			return h, err
		}
	}
}

// UpdateProfile changes the caller's handle and name as p says (p
// normalised and checked here too) and returns the account as it is
// then. Errors: model.ErrInvalid; model.ErrConflict when another account
// has the handle; the caller's own (ErrUnauthorized).
func (db *DB) UpdateProfile(ctx context.Context, by model.Caller, p model.ProfileUpdate) (_ *model.User, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	p.Normalize()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var u *model.User
	err = db.write(ctx, func(w *writeTx) error {
		var err error
		if u, err = w.caller(ctx, by); err != nil {
			return err
		}
		if p.Handle != nil && *p.Handle != u.Handle {
			if _, err := w.takeHandle(ctx, *p.Handle, ""); err != nil {
				return err
			}
		}
		p.Apply(u)
		// Every instance forgets the owner it keeps (owners.go) when
		// this commits.
		_, err = w.Exec(ctx, `WITH u AS (UPDATE users SET handle = $2, name = $3 WHERE id = $1)
			SELECT pg_notify('`+ownersChannel+`', $1::bigint::text)`, int64(u.ID), u.Handle, u.Name)
		if uniqueViolation(err, "users_handle_unique") {
			return model.HandleTaken(u.Handle)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	// This instance at once, before its listener hears it.
	db.owners.forget(u.ID)
	return u, nil
}

// UserByHandle finds the account with handle, in any letter case.
// Errors: model.ErrNotFound.
func (db *DB) UserByHandle(ctx context.Context, handle string) (_ *model.User, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	handle = model.NormalizeHandle(handle)
	u, err := scanUser(db.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE handle = $1`, handle))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.HandleNotFound()
	}
	return u, err
}

// fillHandles gives every account of a schema older than handlesVersion
// the handle it would get registering now, in the order the accounts were
// made (so the oldest keeps the plain one), named by it, as bbolt's
// upgrade to layout 9 does; then neither column may be empty. It runs in
// the migration's transaction and returns how many accounts it named.
func fillHandles(ctx context.Context, tx pgx.Tx) (int, error) {
	rows, err := tx.Query(ctx, `SELECT id, email FROM users ORDER BY id`)
	if err != nil {
		return 0, err
	}
	type account struct {
		id    int64
		email string
	}
	accounts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (account, error) {
		var a account
		err := row.Scan(&a.id, &a.email)
		return a, err
	})
	if err != nil {
		return 0, err
	}
	taken := make(map[string]bool, len(accounts))
	ids := make([]int64, 0, len(accounts))
	handles := make([]string, 0, len(accounts))
	for _, a := range accounts {
		base := model.HandleBase(a.email)
		h := base
		for n := 2; taken[h]; n++ {
			h = model.HandleCandidate(base, n)
		}
		taken[h] = true
		ids, handles = append(ids, a.id), append(handles, h)
	}
	if _, err := tx.Exec(ctx, `UPDATE users SET handle = v.handle, name = v.handle
		FROM unnest($1::bigint[], $2::text[]) AS v (id, handle) WHERE users.id = v.id`, ids, handles); err != nil {
		return 0, fmt.Errorf("giving accounts handles: %w", err)
	}
	if _, err := tx.Exec(ctx, `ALTER TABLE users ALTER COLUMN handle SET NOT NULL, ALTER COLUMN name SET NOT NULL`); err != nil {
		return 0, err
	}
	return len(accounts), nil
}

// UserByEmail finds an account by e-mail, in any letter case and with
// surrounding spaces ignored. Errors: model.ErrNotFound.
func (db *DB) UserByEmail(ctx context.Context, email string) (_ *model.User, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	key := model.EmailKey(email)
	if holdsNUL(key) {
		return nil, model.EmailNotFound()
	}
	u, err := scanUser(db.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email_key = $1`, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.EmailNotFound()
	}
	return u, err
}

// holdsNUL reports whether s holds U+0000, which PostgreSQL's text cannot:
// a text parameter holding one is refused, not compared. No stored e-mail
// holds one (an address with a control character is refused before it is
// stored), so a key or a match holding one finds no account, as on bbolt.
func holdsNUL(s string) bool { return strings.IndexByte(s, 0) >= 0 }

// UserByID finds an account by ID. Errors: model.ErrNotFound.
func (db *DB) UserByID(ctx context.Context, id uint64) (_ *model.User, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return userByID(ctx, db.pool, id)
}

// MissingUsers returns those of ids that name no account, in the order
// given, in one read sent with others: a stream catching up asks it for
// every author of the changes it replays, and after an instance stops
// every stream it served catches up at once on the others.
func (db *DB) MissingUsers(ctx context.Context, ids []uint64) (_ []uint64, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if len(ids) == 0 {
		return nil, nil
	}
	asked := make([]int64, len(ids))
	for i, id := range ids {
		asked[i] = int64(id) // beyond int64, a negative ID: no account has one either
	}
	found := make(map[int64]bool, len(ids))
	err = db.readTogether(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT id FROM users WHERE id = ANY($1)`, asked)
	}, func(br pgx.BatchResults) error {
		clear(found)
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		var id int64
		for rows.Next() {
			if err := scanWire(rows, &id); err != nil {
				return err
			}
			found[id] = true
		}
		return rows.Err()
	})
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	var missing []uint64
	for i, id := range asked {
		if !found[id] {
			missing = append(missing, ids[i])
		}
	}
	return missing, nil
}

func userByID(ctx context.Context, q querier, id uint64) (*model.User, error) {
	u, err := scanUser(q.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, int64(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.AccountNotFound(id)
	}
	return u, err
}

// SetPasswordHash replaces an account's stored hash, used to upgrade old
// hashing parameters on login. It changes nothing unless the stored hash
// is still oldHash: a password changed meanwhile must not be put back.
// Errors: model.ErrNotFound.
func (db *DB) SetPasswordHash(ctx context.Context, id uint64, oldHash, hash string) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var exists bool
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	err = conn.QueryRow(ctx, `WITH u AS (
			UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2
		) SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, int64(id), oldHash, hash).Scan(&exists)
	if err != nil {
		return sentCommit(err) // the statement commits by itself
	}
	if !exists {
		return model.AccountNotFound(id)
	}
	return nil
}

// ChangePassword stores the caller's new password hash and revokes every
// other token of theirs, in one transaction: whoever else held a session
// loses it the moment the new password is in force. The token making the
// request keeps working. Errors: model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) ChangePassword(ctx context.Context, by model.Caller, hash string) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if hash == "" {
		return fmt.Errorf("change password: empty password hash")
	}
	return db.write(ctx, func(w *writeTx) error {
		u, err := w.caller(ctx, by)
		if err != nil {
			return err
		}
		if _, err := w.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, int64(u.ID), hash); err != nil {
			return err
		}
		keep, _ := by.Token() // a caller acting without a token keeps none
		return w.revokeTokensExcept(ctx, u.ID, keep)
	})
}
