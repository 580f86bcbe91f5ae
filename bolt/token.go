package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// TokenHash is the SHA-256 of a bearer token. Only the hash is stored, so a
// copy of the database file does not hand out working tokens.
type TokenHash [32]byte

// Token is one issued bearer token; a user may hold several (one per device).
type Token struct {
	Hash      TokenHash
	UserID    uint64
	CreatedAt time.Time
	ExpiresAt time.Time
}

// tokenRecordLen: userID, createdAt, expiresAt, 8 bytes each. Tokens are read
// on every authenticated request, so the record is fixed-size binary.
const tokenRecordLen = 24

func encodeToken(t *Token) []byte {
	b := make([]byte, tokenRecordLen)
	binary.BigEndian.PutUint64(b[0:], t.UserID)
	binary.BigEndian.PutUint64(b[8:], uint64(timeToMicros(t.CreatedAt)))
	binary.BigEndian.PutUint64(b[16:], uint64(timeToMicros(t.ExpiresAt)))
	return b
}

func decodeToken(hash TokenHash, b []byte) (*Token, error) {
	if len(b) != tokenRecordLen {
		return nil, fmt.Errorf("decode token: record is %d bytes, want %d", len(b), tokenRecordLen)
	}
	return &Token{
		Hash:      hash,
		UserID:    binary.BigEndian.Uint64(b[0:]),
		CreatedAt: microsToTime(int64(binary.BigEndian.Uint64(b[8:]))),
		ExpiresAt: microsToTime(int64(binary.BigEndian.Uint64(b[16:]))),
	}, nil
}

// expiry is when a token issued at created with lifetime ttl stops working,
// at the precision the store keeps, so the time a client is told is the
// time that is enforced.
func expiry(created time.Time, ttl time.Duration) time.Time {
	return created.Add(ttl).Truncate(time.Microsecond)
}

// putToken writes a new token and its per-user index entry; callers hold
// the write transaction. A hash already present is refused rather than
// overwritten, which would orphan the other user's index entry.
func putToken(tx *bbolt.Tx, t *Token) error {
	tokens := tx.Bucket(bucketTokens)
	if tokens.Get(t.Hash[:]) != nil {
		return refuse(ErrConflict, "this token was already issued")
	}
	if err := tokens.Put(t.Hash[:], encodeToken(t)); err != nil {
		return err
	}
	return tx.Bucket(bucketTokensByUser).Put(compositeKey(t.UserID, t.Hash[:]), nil)
}

// CreateToken issues a token for an existing user, valid for ttl from now.
// Errors: ErrNotFound when the user does not exist.
func (db *DB) CreateToken(userID uint64, hash TokenHash, ttl time.Duration) (*Token, error) {
	var tok *Token
	err := db.bolt.Update(func(tx *bbolt.Tx) error {
		if _, err := userByID(tx, userID); err != nil {
			return err
		}
		now := db.clock()
		tok = &Token{Hash: hash, UserID: userID, CreatedAt: now, ExpiresAt: expiry(now, ttl)}
		return putToken(tx, tok)
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// Authenticate finds the user a token belongs to. Errors: ErrUnauthorized
// when the token is unknown, revoked, expired, or its user is gone.
func (db *DB) Authenticate(hash TokenHash) (*User, *Token, error) {
	var (
		u   *User
		tok *Token
	)
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		u, tok, err = authenticate(tx, hash, db.clock())
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, tok, nil
}

// authenticate is Authenticate inside a transaction the caller holds, so
// that reads and writes can check their token in their own transaction.
func authenticate(tx *bbolt.Tx, hash TokenHash, now time.Time) (*User, *Token, error) {
	b := tx.Bucket(bucketTokens).Get(hash[:])
	if b == nil {
		return nil, nil, refuse(ErrUnauthorized, "the bearer token is unknown or was revoked")
	}
	tok, err := decodeToken(hash, b)
	if err != nil {
		return nil, nil, err
	}
	if !now.Before(tok.ExpiresAt) {
		return nil, nil, refuse(ErrUnauthorized, "the bearer token has expired; log in again")
	}
	u, err := userByID(tx, tok.UserID)
	if err != nil {
		return nil, nil, refuse(ErrUnauthorized, "the bearer token's account no longer exists")
	}
	return u, tok, nil
}

// RevokeToken deletes a token so it stops working at once. Errors:
// ErrNotFound when no such token exists.
func (db *DB) RevokeToken(hash TokenHash) error {
	return db.bolt.Update(func(tx *bbolt.Tx) error {
		tokens := tx.Bucket(bucketTokens)
		b := tokens.Get(hash[:])
		if b == nil {
			return refuse(ErrNotFound, "the token does not exist")
		}
		tok, err := decodeToken(hash, b)
		if err != nil {
			return err
		}
		if err := tokens.Delete(hash[:]); err != nil {
			return err
		}
		return tx.Bucket(bucketTokensByUser).Delete(compositeKey(tok.UserID, hash[:]))
	})
}

// Tokens lists the tokens a user holds, expired ones included, in order of
// their hashes. It exists so listing and sweeping can build on the index.
func (db *DB) Tokens(userID uint64) ([]*Token, error) {
	var out []*Token
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		tokens := tx.Bucket(bucketTokens)
		prefix := itob(userID)
		c := tx.Bucket(bucketTokensByUser).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			var h TokenHash
			copy(h[:], k[8:])
			b := tokens.Get(h[:])
			if b == nil {
				return fmt.Errorf("tokens of user %d: index points at missing token", userID)
			}
			tok, err := decodeToken(h, b)
			if err != nil {
				return err
			}
			out = append(out, tok)
		}
		return nil
	})
	return out, err
}
