package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// User record layout (layout 9): a version byte, createdAt (8 bytes), then
// the e-mail and the password hash each with a 2-byte length, then a role
// count and each role with a 1-byte length, then a flags byte (bit 0:
// suspended) and lastSeenAt (8 bytes, 0 for never), then the handle with
// a 1-byte length and the name with a 2-byte length. Users are read on
// every authenticated request and joined onto every message returned, so
// the record is binary, as messages and tokens are.
//
// Layouts 7 and 8 wrote version 2, the same without the handle and name,
// which decodeUser reads with both empty for the upgrades that run before
// the one to layout 9 gives every account its handle. Layouts 2 to 6
// wrote version 1, without the flags and lastSeenAt; only the upgrade
// reads it (decodeUserV1).
const (
	userRecordVersion   = 3
	userRecordVersionV2 = 2
	userRecordVersionV1 = 1
	userSuspended       = 1 << 0
)

func encodeUser(u *model.User) []byte {
	n := 1 + 8 + 2 + len(u.Email) + 2 + len(u.PasswordHash) + 1 + 1 + 8 + 1 + len(u.Handle) + 2 + len(u.Name)
	for _, r := range u.Roles {
		n += 1 + len(r)
	}
	b := make([]byte, 0, n)
	b = append(b, userRecordVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(timeToMicros(u.CreatedAt)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(u.Email)))
	b = append(b, u.Email...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(u.PasswordHash)))
	b = append(b, u.PasswordHash...)
	b = append(b, byte(len(u.Roles)))
	for _, r := range u.Roles {
		b = append(b, byte(len(r)))
		b = append(b, r...)
	}
	var flags byte
	if u.Suspended {
		flags |= userSuspended
	}
	b = append(b, flags)
	var seen uint64
	if !u.LastSeenAt.IsZero() {
		seen = uint64(timeToMicros(u.LastSeenAt))
	}
	b = binary.BigEndian.AppendUint64(b, seen)
	b = append(b, byte(len(u.Handle)))
	b = append(b, u.Handle...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(u.Name)))
	return append(b, u.Name...)
}

// decodeUser copies everything out of b, which bbolt only lends for the
// life of the transaction. It reads versions 2 and 3.
func decodeUser(id uint64, b []byte) (*model.User, error) {
	if len(b) > 0 && b[0] == userRecordVersionV2 {
		return decodeUserRecord(id, b, userRecordVersionV2)
	}
	return decodeUserRecord(id, b, userRecordVersion)
}

// decodeUserV1 reads a record of layouts 2 to 6, for the upgrade.
func decodeUserV1(id uint64, b []byte) (*model.User, error) {
	return decodeUserRecord(id, b, userRecordVersionV1)
}

// binaryUserRecord reports whether b is a user record of a binary
// version, not layout 1's JSON (which starts with '{').
func binaryUserRecord(b []byte) bool {
	return len(b) > 0 && b[0] >= userRecordVersionV1 && b[0] <= userRecordVersion
}

func decodeUserRecord(id uint64, b []byte, version byte) (*model.User, error) {
	r := recordReader{b: b}
	if r.byte() != version {
		return nil, fmt.Errorf("decode user %d: unknown record version", id)
	}
	u := &model.User{ID: id, CreatedAt: microsToTime(int64(r.uint64()))}
	u.Email = string(r.bytes(int(r.uint16())))
	u.PasswordHash = string(r.bytes(int(r.uint16())))
	u.Roles = make([]string, r.byte())
	for i := range u.Roles {
		u.Roles[i] = string(r.bytes(int(r.byte())))
	}
	if version >= userRecordVersionV2 {
		flags := r.byte()
		u.Suspended = flags&userSuspended != 0
		if seen := int64(r.uint64()); seen != 0 {
			u.LastSeenAt = microsToTime(seen)
		}
		if flags&^userSuspended != 0 {
			return nil, fmt.Errorf("decode user %d: unknown flags %#x", id, flags)
		}
	}
	if version >= userRecordVersion {
		u.Handle = string(r.bytes(int(r.byte())))
		u.Name = string(r.bytes(int(r.uint16())))
	}
	if r.short || len(r.b) != 0 {
		return nil, fmt.Errorf("decode user %d: bad record", id)
	}
	return u, nil
}

// recordReader reads fixed-width fields off the front of a record; reading
// past the end sets short and yields zeros, so a decoder checks once.
type recordReader struct {
	b     []byte
	short bool
}

func (r *recordReader) bytes(n int) []byte {
	if n > len(r.b) {
		r.short, r.b = true, nil
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) byte() byte     { return r.bytes(1)[0] }
func (r *recordReader) uint16() uint16 { return binary.BigEndian.Uint16(r.bytes(2)) }
func (r *recordReader) uint64() uint64 { return binary.BigEndian.Uint64(r.bytes(8)) }

// ownerCard is what a message shows of its owner, and whether the owner
// is suspended (which hides the notifications the owner caused).
type ownerCard struct {
	email, handle, name string
	suspended           bool
}

// readOwnerCard reads a user record's ownerCard. It accepts exactly the
// records decodeUser accepts, but copies nothing else out: a message needs
// only its author's e-mail, handle and name, not the password hash and
// roles. False for a missing or malformed record.
func readOwnerCard(b []byte) (ownerCard, bool) {
	r := recordReader{b: b}
	if len(b) == 0 {
		return ownerCard{}, false
	}
	version := r.byte()
	if version != userRecordVersion && version != userRecordVersionV2 {
		return ownerCard{}, false
	}
	r.uint64() // createdAt
	email := r.bytes(int(r.uint16()))
	r.bytes(int(r.uint16())) // password hash
	for n := r.byte(); n > 0; n-- {
		r.bytes(int(r.byte())) // a role
	}
	flags := r.byte()
	r.uint64() // lastSeenAt
	var handle, name []byte
	if version == userRecordVersion {
		handle = r.bytes(int(r.byte()))
		name = r.bytes(int(r.uint16()))
	}
	if r.short || len(r.b) != 0 || flags&^userSuspended != 0 {
		return ownerCard{}, false
	}
	return ownerCard{email: string(email), handle: string(handle), name: string(name), suspended: flags&userSuspended != 0}, true
}

// userEmail reads the e-mail of a user record; see readOwnerCard.
func userEmail(b []byte) (string, bool) {
	card, ok := readOwnerCard(b)
	return card.email, ok
}

// userRecordJSON is the layout-1 user record, read only to upgrade it.
type userRecordJSON struct {
	Email        string   `json:"email"`
	PasswordHash string   `json:"pw"`
	Roles        []string `json:"roles"`
	CreatedAt    int64    `json:"created"`
}

func decodeUserJSON(id uint64, b []byte) (*model.User, error) {
	var r userRecordJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode layout-1 user %d: %w", id, err)
	}
	return &model.User{
		ID:           id,
		Email:        r.Email,
		PasswordHash: r.PasswordHash,
		Roles:        r.Roles,
		CreatedAt:    microsToTime(r.CreatedAt),
	}, nil
}

// CreateUser stores a new account with model.RoleUser alone and its first
// token, in one transaction: registration hands out a token. With invite,
// the hash of an invitation's code, it takes one use of the invitation in
// that transaction. It sets u.ID, u.Roles, u.CreatedAt and u.LastSeenAt.
// Errors: model.ErrInvalid for a bad e-mail or missing hash, or
// model.InviteRefused; model.ErrConflict when the e-mail is taken (in any
// letter case).
func (db *DB) CreateUser(_ context.Context, u *model.User, tokenHash model.TokenHash, ttl time.Duration, invite *model.TokenHash) (*model.Token, error) {
	nu, err := model.NewAccount(u)
	if err != nil {
		return nil, err
	}
	var tok *model.Token
	err = db.writes.update(func(tx *bbolt.Tx) error {
		// The invitation first: without a good one, nobody learns whether
		// an e-mail is registered.
		if invite != nil {
			if err := db.useInvite(tx, *invite); err != nil {
				return err
			}
		}
		// Whatever u says, an account begins with the role every account
		// has and nothing more.
		if err := db.insertUser(tx, &nu, []string{model.RoleUser}); err != nil {
			return err
		}
		var err error
		tok, err = db.issueToken(tx, tokenHash, nu.ID, nu.CreatedAt, ttl)
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
// machine, in one transaction: herald admin create. It sets u's ID, Roles,
// CreatedAt and LastSeenAt. Errors: model.ErrInvalid, model.ErrConflict.
func (db *DB) CreateAdministrator(_ context.Context, u *model.User) error {
	nu, err := model.NewAccount(u)
	if err != nil {
		return err
	}
	err = db.writes.update(func(tx *bbolt.Tx) error {
		if err := db.insertUser(tx, &nu, []string{model.RoleUser, model.RoleAdmin}); err != nil {
			return err
		}
		return db.appendAudit(tx, nil, &model.AuditEntry{Action: model.AuditGrantAdmin, UserID: nu.ID, UserEmail: nu.Email})
	})
	if err != nil {
		return err
	}
	*u = nu
	return nil
}

// insertUser stores u as a new account holding roles, with its e-mail
// indexed, and sets its ID, Roles, CreatedAt and LastSeenAt. Errors:
// model.ErrConflict when the e-mail is taken (in any letter case) or
// looks like a taken one (model.EmailSkeleton).
func (db *DB) insertUser(tx *bbolt.Tx, u *model.User, roles []string) error {
	byEmail := tx.Bucket(bucketUsersByEmail)
	key := emailKey(u.Email)
	if byEmail.Get(key) != nil {
		return model.EmailTaken(u.Email)
	}
	skeleton := emailSkeleton(u.Email)
	if len(skeletonHolders(tx, skeleton)) > 0 {
		return model.EmailLookAlike(u.Email)
	}
	byHandle := tx.Bucket(bucketUsersByHandle)
	if u.Handle != "" && byHandle.Get([]byte(u.Handle)) != nil {
		return model.HandleTaken(u.Handle)
	}
	id, err := tx.Bucket(bucketUsers).NextSequence()
	if err != nil {
		return err
	}
	if u.Handle == "" {
		u.Handle = freeHandle(byHandle, u.Email)
	}
	if u.Name == "" {
		u.Name = u.Handle
	}
	created := db.clock()
	u.ID, u.Roles, u.CreatedAt, u.LastSeenAt, u.Suspended = id, roles, created, created, false
	if err := db.putUser(tx, u); err != nil {
		return err
	}
	if err := tx.Bucket(bucketUsersBySkeleton).Put(skeletonKey(skeleton, id), nil); err != nil {
		return err
	}
	if err := byHandle.Put([]byte(u.Handle), itob(id)); err != nil {
		return err
	}
	return byEmail.Put(key, itob(id))
}

// freeHandle is the first handle model.HandleCandidate makes from email's
// that no account in byHandle has.
func freeHandle(byHandle *bbolt.Bucket, email string) string {
	base := model.HandleBase(email)
	for n := 1; ; n++ {
		if h := model.HandleCandidate(base, n); byHandle.Get([]byte(h)) == nil {
			return h
		}
	}
}

// putUser stores u's record and keeps the admins bucket in step with its
// roles: the one way an account's record is written once it exists.
func (db *DB) putUser(tx *bbolt.Tx, u *model.User) error {
	if err := tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u)); err != nil {
		return err
	}
	admins := tx.Bucket(bucketAdmins)
	if u.HasRole(model.RoleAdmin) {
		return admins.Put(itob(u.ID), nil)
	}
	return admins.Delete(itob(u.ID))
}

// UserByEmail finds an account by e-mail, in any letter case and with
// surrounding spaces ignored. Errors: model.ErrNotFound.
func (db *DB) UserByEmail(_ context.Context, email string) (*model.User, error) {
	var u *model.User
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketUsersByEmail).Get(emailKey(email))
		if id == nil {
			return model.EmailNotFound()
		}
		var err error
		u, err = userByID(tx, btoi(id))
		return err
	})
	return u, err
}

// UserByID finds an account by ID. Errors: model.ErrNotFound.
func (db *DB) UserByID(_ context.Context, id uint64) (*model.User, error) {
	var u *model.User
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		u, err = userByID(tx, id)
		return err
	})
	return u, err
}

// MissingUsers returns those of ids that name no account, in the order
// given.
func (db *DB) MissingUsers(_ context.Context, ids []uint64) ([]uint64, error) {
	var missing []uint64
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		users := tx.Bucket(bucketUsers)
		for _, id := range ids {
			if users.Get(itob(id)) == nil {
				missing = append(missing, id)
			}
		}
		return nil
	})
	return missing, err
}

func userByID(tx *bbolt.Tx, id uint64) (*model.User, error) {
	b := tx.Bucket(bucketUsers).Get(itob(id))
	if b == nil {
		return nil, model.AccountNotFound(id)
	}
	return decodeUser(id, b)
}

// SetPasswordHash replaces an account's stored hash, used to upgrade old
// hashing parameters on login. It changes nothing unless the stored hash
// is still oldHash: a password changed meanwhile must not be put back.
// Errors: model.ErrNotFound.
func (db *DB) SetPasswordHash(_ context.Context, id uint64, oldHash, hash string) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := userByID(tx, id)
		if err != nil {
			return err
		}
		if u.PasswordHash != oldHash {
			return nil
		}
		u.PasswordHash = hash
		return db.putUser(tx, u)
	})
}

// ChangePassword stores the caller's new password hash and revokes every
// other token of theirs, in one transaction: whoever else held a session
// loses it the moment the new password is in force. The token making the
// request keeps working. Errors: model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) ChangePassword(_ context.Context, by model.Caller, hash string) error {
	if hash == "" {
		return fmt.Errorf("change password: empty password hash")
	}
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		u.PasswordHash = hash
		if err := db.putUser(tx, u); err != nil {
			return err
		}
		keep, _ := by.Token() // a caller acting without a token keeps none
		return db.revokeTokensExcept(tx, u.ID, keep)
	})
}

// UpdateProfile changes the caller's handle and name as p says (p
// normalised and checked here too) and returns the account as it is
// then. Errors: model.ErrInvalid; model.ErrConflict when another account
// has the handle; the caller's own (ErrUnauthorized).
func (db *DB) UpdateProfile(_ context.Context, by model.Caller, p model.ProfileUpdate) (*model.User, error) {
	p.Normalize()
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var u *model.User
	err := db.writes.update(func(tx *bbolt.Tx) error {
		var err error
		if u, err = db.caller(tx, by); err != nil {
			return err
		}
		if p.Handle != nil && *p.Handle != u.Handle {
			byHandle := tx.Bucket(bucketUsersByHandle)
			if byHandle.Get([]byte(*p.Handle)) != nil {
				return model.HandleTaken(*p.Handle)
			}
			if err := byHandle.Delete([]byte(u.Handle)); err != nil {
				return err
			}
			if err := byHandle.Put([]byte(*p.Handle), itob(u.ID)); err != nil {
				return err
			}
		}
		p.Apply(u)
		return db.putUser(tx, u)
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// UserByHandle finds the account with handle, in any letter case.
// Errors: model.ErrNotFound.
func (db *DB) UserByHandle(_ context.Context, handle string) (*model.User, error) {
	handle = model.NormalizeHandle(handle)
	var u *model.User
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketUsersByHandle).Get([]byte(handle))
		if id == nil {
			return model.HandleNotFound()
		}
		var err error
		u, err = userByID(tx, btoi(id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// emailKey is model.EmailKey as the users_by_email bucket's key.
func emailKey(email string) []byte { return []byte(model.EmailKey(email)) }
