package bolt

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	bbolt "go.etcd.io/bbolt"
	"golang.org/x/text/unicode/norm"
)

// RoleUser is the role every registered account holds; creating messages
// requires it.
const RoleUser = "ROLE_USER"

// RoleAdmin is held by the administrators a server is configured with; it
// is not stored, so naming or un-naming an administrator takes a restart,
// not a write.
const RoleAdmin = "ROLE_ADMIN"

// Limits on account fields.
const (
	MaxEmailBytes    = 254 // RFC 5321's path limit, less the angle brackets
	MinPasswordChars = 8
	MaxPasswordBytes = 1024 // bounds the work a single login can ask of argon2
)

// User is an account. PasswordHash is an encoded argon2id string and never
// leaves the server.
type User struct {
	ID           uint64
	Email        string // as registered, trimmed; unique case-insensitively
	PasswordHash string
	Roles        []string
	CreatedAt    time.Time
}

// HasRole reports whether the user holds role.
func (u *User) HasRole(role string) bool {
	for _, r := range u.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Registration is what a client sends to create an account, before the
// password is hashed.
type Registration struct {
	Email    string
	Password string
}

// Normalize trims the e-mail; spaces around an address are never meant.
func (r *Registration) Normalize() { r.Email = NormalizeEmail(r.Email) }

// Validate reports every rule the registration breaks.
func (r *Registration) Validate() error {
	var v ValidationError
	validateEmail(&v, "email", r.Email)
	validatePassword(&v, "password", r.Password)
	return v.Err()
}

// CheckNewPassword adds to v a violation naming field when password breaks
// the rules for a new password.
func (v *ValidationError) CheckNewPassword(field, password string) {
	validatePassword(v, field, password)
}

func validatePassword(v *ValidationError, field, password string) {
	switch {
	case strings.TrimSpace(password) == "":
		v.Add(field, "must not be blank or only spaces")
	case !utf8.ValidString(password):
		v.Add(field, "must be valid UTF-8")
	case utf8.RuneCountInString(password) < MinPasswordChars:
		v.Add(field, fmt.Sprintf("must be at least %d characters", MinPasswordChars))
	case len(password) > MaxPasswordBytes:
		v.Add(field, fmt.Sprintf("must be at most %d bytes", MaxPasswordBytes))
	}
}

// NormalizeEmail is the form an address is stored and shown in.
func NormalizeEmail(s string) string { return strings.TrimSpace(s) }

// EmailKey is the form an address is compared in, as a string: the key for
// anything that must treat two spellings of one address as one (the
// guessing limits, say).
func EmailKey(email string) string { return string(emailKey(email)) }

// emailKey is the form an address is indexed and compared in, so that
// Ada@Example.com and ada@example.com are one account. NFC first: "é" may
// arrive as one code point or as "e" plus a combining accent, and two
// spellings of one address must not become two accounts.
func emailKey(email string) []byte {
	return []byte(Fold(norm.NFC.String(NormalizeEmail(email))))
}

// validateEmail accepts any plausible address: one '@' with something on each
// side, no spaces or control characters. Deliverability is not ours to judge.
func validateEmail(v *ValidationError, field, email string) {
	switch {
	case email == "":
		v.Add(field, "must not be blank")
		return
	case !utf8.ValidString(email):
		v.Add(field, "must be valid UTF-8")
		return
	case len(email) > MaxEmailBytes:
		v.Add(field, fmt.Sprintf("must be at most %d bytes", MaxEmailBytes))
		return
	}
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		v.Add(field, "must be an e-mail address like name@example.com")
		return
	}
	if strings.IndexFunc(email, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		v.Add(field, "must not contain spaces or control characters")
		return
	}
	// The owner's e-mail is what other people see on every message, so it
	// must look like what it is.
	if i := strings.IndexFunc(email, isInvisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(email[i:])
		v.Add(field, fmt.Sprintf("must not contain invisible characters (U+%04X)", r))
		return
	}
	for _, part := range append([]string{local}, strings.Split(domain, ".")...) {
		if a, b, mixed := mixedScripts(part); mixed {
			v.Add(field, fmt.Sprintf("must not mix %s and %s letters in one part (%q), a common way to imitate another address", a, b, part))
			return
		}
	}
}

// isInvisible reports runes that render as nothing or as blank space, the
// raw material of an address that looks like someone else's: format
// characters (zero-width spaces and joiners, bidirectional overrides, the
// soft hyphen), private-use, surrogate and unassigned code points, variation
// selectors, and the fillers that draw as blanks.
func isInvisible(r rune) bool {
	// Not printable: format, control, private-use, surrogate and unassigned
	// code points, and every space but U+0020 (refused before this).
	if !unicode.IsPrint(r) || unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	switch r {
	case '\u034F', // combining grapheme joiner
		'\u115F', '\u1160', '\u3164', '\uFFA0', // Hangul fillers
		'\u2800': // braille blank
		return true
	}
	return false
}

// confusableScripts are the scripts whose letters imitate each other most
// (Latin a, Cyrillic а, Greek α); one part of an address may use only one
// of them. Other scripts may mix freely: Japanese mixes Han, Hiragana and
// Katakana by design, and a whole-script look-alike (every letter
// Cyrillic) cannot be told from a real Cyrillic address by any simple rule.
var confusableScripts = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin},
	{"Cyrillic", unicode.Cyrillic},
	{"Greek", unicode.Greek},
}

// mixedScripts reports whether part has letters from two confusable
// scripts, and which.
func mixedScripts(part string) (first, second string, mixed bool) {
	for _, r := range part {
		for _, s := range confusableScripts {
			if !unicode.Is(s.table, r) {
				continue
			}
			switch {
			case first == "":
				first = s.name
			case first != s.name:
				return first, s.name, true
			}
		}
	}
	return "", "", false
}

// User record layout (layout 2): a version byte, createdAt (8 bytes), then
// the e-mail and the password hash each with a 2-byte length, then a role
// count and each role with a 1-byte length. Users are read on every
// authenticated request and joined onto every message returned, so the
// record is binary, as messages and tokens are.
const userRecordVersion = 1

func encodeUser(u *User) []byte {
	n := 1 + 8 + 2 + len(u.Email) + 2 + len(u.PasswordHash) + 1
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
	return b
}

// decodeUser copies everything out of b, which bbolt only lends for the
// life of the transaction.
func decodeUser(id uint64, b []byte) (*User, error) {
	r := recordReader{b: b}
	if r.byte() != userRecordVersion {
		return nil, fmt.Errorf("decode user %d: unknown record version", id)
	}
	u := &User{ID: id, CreatedAt: microsToTime(int64(r.uint64()))}
	u.Email = string(r.bytes(int(r.uint16())))
	u.PasswordHash = string(r.bytes(int(r.uint16())))
	u.Roles = make([]string, r.byte())
	for i := range u.Roles {
		u.Roles[i] = string(r.bytes(int(r.byte())))
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

// userRecordJSON is the layout-1 user record, read only to upgrade it.
type userRecordJSON struct {
	Email        string   `json:"email"`
	PasswordHash string   `json:"pw"`
	Roles        []string `json:"roles"`
	CreatedAt    int64    `json:"created"`
}

func decodeUserJSON(id uint64, b []byte) (*User, error) {
	var r userRecordJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode layout-1 user %d: %w", id, err)
	}
	return &User{
		ID:           id,
		Email:        r.Email,
		PasswordHash: r.PasswordHash,
		Roles:        r.Roles,
		CreatedAt:    microsToTime(r.CreatedAt),
	}, nil
}

// CreateUser stores a new account with RoleUser and its first token, in one
// transaction: the seed has registration hand out a token. It sets u.ID,
// u.Roles and u.CreatedAt. Errors: ErrInvalid for a bad e-mail or missing
// hash, ErrConflict when the e-mail is taken (in any letter case).
func (db *DB) CreateUser(u *User, tokenHash TokenHash, ttl time.Duration) (*Token, error) {
	nu := *u
	nu.Email = NormalizeEmail(nu.Email)
	var v ValidationError
	validateEmail(&v, "email", nu.Email)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if nu.PasswordHash == "" {
		return nil, fmt.Errorf("create user: empty password hash")
	}
	var tok *Token
	err := db.writes.update(func(tx *bbolt.Tx) error {
		byEmail := tx.Bucket(bucketUsersByEmail)
		key := emailKey(nu.Email)
		if byEmail.Get(key) != nil {
			return refuse(ErrConflict, "the e-mail %s is already registered", nu.Email)
		}
		users := tx.Bucket(bucketUsers)
		id, err := users.NextSequence()
		if err != nil {
			return err
		}
		created := db.clock()
		nu.ID, nu.Roles, nu.CreatedAt = id, []string{RoleUser}, created
		if err := users.Put(itob(id), encodeUser(&nu)); err != nil {
			return err
		}
		if err := byEmail.Put(key, itob(id)); err != nil {
			return err
		}
		tok, err = db.issueToken(tx, tokenHash, id, created, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Only now, after the commit, so a failed write leaves u untouched.
	*u = nu
	return tok, nil
}

// UserByEmail finds an account by e-mail, in any letter case and with
// surrounding spaces ignored. Errors: ErrNotFound.
func (db *DB) UserByEmail(email string) (*User, error) {
	var u *User
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketUsersByEmail).Get(emailKey(email))
		if id == nil {
			return refuse(ErrNotFound, "no account has this e-mail")
		}
		var err error
		u, err = userByID(tx, btoi(id))
		return err
	})
	return u, err
}

// UserByID finds an account by ID. Errors: ErrNotFound.
func (db *DB) UserByID(id uint64) (*User, error) {
	var u *User
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		u, err = userByID(tx, id)
		return err
	})
	return u, err
}

func userByID(tx *bbolt.Tx, id uint64) (*User, error) {
	b := tx.Bucket(bucketUsers).Get(itob(id))
	if b == nil {
		return nil, refuse(ErrNotFound, "account %d does not exist", id)
	}
	return decodeUser(id, b)
}

// SetPasswordHash replaces an account's stored hash, used to upgrade old
// hashing parameters on login. It changes nothing unless the stored hash
// is still oldHash: a password changed meanwhile must not be put back.
// Errors: ErrNotFound.
func (db *DB) SetPasswordHash(id uint64, oldHash, hash string) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := userByID(tx, id)
		if err != nil {
			return err
		}
		if u.PasswordHash != oldHash {
			return nil
		}
		u.PasswordHash = hash
		return tx.Bucket(bucketUsers).Put(itob(id), encodeUser(u))
	})
}

// ChangePassword stores the caller's new password hash and revokes every
// other token of theirs, in one transaction: whoever else held a session
// loses it the moment the new password is in force. The token making the
// request keeps working. Errors: ErrUnauthorized, ErrNotFound.
func (db *DB) ChangePassword(by Caller, hash string) error {
	if hash == "" {
		return fmt.Errorf("change password: empty password hash")
	}
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := by.user(tx, db)
		if err != nil {
			return err
		}
		u.PasswordHash = hash
		if err := tx.Bucket(bucketUsers).Put(itob(u.ID), encodeUser(u)); err != nil {
			return err
		}
		return db.revokeTokensExcept(tx, u.ID, by.token)
	})
}
