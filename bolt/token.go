package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// Token record: userID, createdAt, expiresAt, lastUsedAt (8 bytes each),
// then the public ID. Tokens are read on every authenticated request, so
// the record is fixed-size binary.
const tokenRecordLen = 8*4 + len(model.TokenID{})

func encodeToken(t *model.Token) []byte {
	b := make([]byte, tokenRecordLen)
	binary.BigEndian.PutUint64(b[0:], t.UserID)
	binary.BigEndian.PutUint64(b[8:], uint64(timeToMicros(t.CreatedAt)))
	binary.BigEndian.PutUint64(b[16:], uint64(timeToMicros(t.ExpiresAt)))
	binary.BigEndian.PutUint64(b[24:], uint64(timeToMicros(t.LastUsedAt)))
	copy(b[32:], t.ID[:])
	return b
}

func decodeToken(hash model.TokenHash, b []byte) (*model.Token, error) {
	if len(b) != tokenRecordLen {
		return nil, fmt.Errorf("decode token: record is %d bytes, want %d", len(b), tokenRecordLen)
	}
	t := &model.Token{
		Hash:       hash,
		UserID:     binary.BigEndian.Uint64(b[0:]),
		CreatedAt:  microsToTime(int64(binary.BigEndian.Uint64(b[8:]))),
		ExpiresAt:  microsToTime(int64(binary.BigEndian.Uint64(b[16:]))),
		LastUsedAt: microsToTime(int64(binary.BigEndian.Uint64(b[24:]))),
	}
	copy(t.ID[:], b[32:])
	return t, nil
}

// layout1TokenLen is the first release's token record: userID, createdAt,
// expiresAt. Read only to upgrade it.
const layout1TokenLen = 24

// issueToken writes a new token for userID and its per-user index entry,
// dropping the user's oldest tokens beyond model.MaxTokensPerUser; callers hold
// the write transaction. A hash already present is refused rather than
// overwritten, which would orphan the other user's index entry.
func (db *DB) issueToken(tx *bbolt.Tx, hash model.TokenHash, userID uint64, now time.Time, ttl time.Duration) (*model.Token, error) {
	tokens := tx.Bucket(bucketTokens)
	if tokens.Get(hash[:]) != nil {
		return nil, model.TokenAlreadyIssued()
	}
	held, err := userTokens(tx, userID)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(held, func(a, b *model.Token) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if over := len(held) - (model.MaxTokensPerUser - 1); over > 0 {
		if err := db.revoke(tx, userID, held[:over]); err != nil {
			return nil, err
		}
	}
	t := &model.Token{Hash: hash, ID: model.NewTokenID(), UserID: userID, CreatedAt: now, LastUsedAt: now, ExpiresAt: model.TokenExpiry(now, ttl)}
	if err := tokens.Put(hash[:], encodeToken(t)); err != nil {
		return nil, err
	}
	if err := tx.Bucket(bucketTokensByUser).Put(compositeKey(userID, hash[:]), nil); err != nil {
		return nil, err
	}
	return t, nil
}

// revoke deletes toks, tokens of userID, and records in the change log
// that the account lost tokens, once: the one way a token stops working
// before its time.
func (db *DB) revoke(tx *bbolt.Tx, userID uint64, toks []*model.Token) error {
	if len(toks) == 0 {
		return nil
	}
	for _, t := range toks {
		if err := deleteToken(tx, t); err != nil {
			return err
		}
	}
	return db.recordRevocation(tx, userID)
}

// deleteToken removes t's records inside tx.
func deleteToken(tx *bbolt.Tx, t *model.Token) error {
	if err := tx.Bucket(bucketTokens).Delete(t.Hash[:]); err != nil {
		return err
	}
	return tx.Bucket(bucketTokensByUser).Delete(compositeKey(t.UserID, t.Hash[:]))
}

// userTokens lists every token of a user, expired ones included.
func userTokens(tx *bbolt.Tx, userID uint64) ([]*model.Token, error) {
	var out []*model.Token
	tokens := tx.Bucket(bucketTokens)
	prefix := itob(userID)
	c := tx.Bucket(bucketTokensByUser).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		var h model.TokenHash
		copy(h[:], k[8:])
		b := tokens.Get(h[:])
		if b == nil {
			return nil, fmt.Errorf("tokens of user %d: index points at missing token", userID)
		}
		t, err := decodeToken(h, b)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// IssueLoginToken issues a token for a login whose password was checked
// against checkedHash. The check took the time of a hash, and the password
// may have changed, or the account gone, meanwhile; so the transaction
// first makes sure checkedHash is still the account's, and a login that
// raced a password change or a deletion gets nothing. It notes the login
// as the account's last sight. Errors: model.ErrUnauthorized,
// model.ErrForbidden for a suspended account.
func (db *DB) IssueLoginToken(_ context.Context, userID uint64, checkedHash string, hash model.TokenHash, ttl time.Duration) (*model.Token, error) {
	var tok *model.Token
	err := db.writes.update(func(tx *bbolt.Tx) error {
		u, err := userByID(tx, userID)
		if err != nil || u.PasswordHash != checkedHash {
			return model.BadCredentials()
		}
		if u.Suspended {
			return model.AccountSuspended()
		}
		now := db.clock()
		// Never earlier than a sighting already kept: a clock stepped
		// back must not make the account look less recently used.
		if now.After(u.LastSeenAt) {
			u.LastSeenAt = now
		}
		if err := db.putUser(tx, u); err != nil {
			return err
		}
		tok, err = db.issueToken(tx, hash, userID, now, ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// Authenticate finds the user a token belongs to. Errors: model.ErrUnauthorized
// when the token is unknown, revoked, expired, or its user is gone.
func (db *DB) Authenticate(_ context.Context, hash model.TokenHash) (*model.User, *model.Token, error) {
	var (
		u   *model.User
		tok *model.Token
	)
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		u, tok, err = db.authenticate(tx, hash)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return u, tok, nil
}

// authenticate is Authenticate inside a transaction the caller holds, so
// that reads and writes can check their token in their own transaction. A
// successful use is noted for LastUsedAt.
func (db *DB) authenticate(tx *bbolt.Tx, hash model.TokenHash) (*model.User, *model.Token, error) {
	now := db.clock()
	b := tx.Bucket(bucketTokens).Get(hash[:])
	if b == nil {
		return nil, nil, model.TokenUnknown()
	}
	tok, err := decodeToken(hash, b)
	if err != nil {
		return nil, nil, err
	}
	if !now.Before(tok.ExpiresAt) {
		return nil, nil, model.TokenExpired()
	}
	u, err := userByID(tx, tok.UserID)
	if errors.Is(err, model.ErrNotFound) {
		return nil, nil, model.TokenAccountGone()
	}
	if err != nil {
		return nil, nil, err // a record that does not read is the server's fault, not the token's
	}
	if u.Suspended {
		// A suspension deletes the account's tokens; this is a second line.
		return nil, nil, model.TokenAccountSuspended()
	}
	db.uses.Note(tok, now)
	return u, tok, nil
}

// RevokeToken deletes a token so it stops working at once. Errors:
// model.ErrNotFound when no such token exists.
func (db *DB) RevokeToken(_ context.Context, hash model.TokenHash) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketTokens).Get(hash[:])
		if b == nil {
			return model.TokenNotFound()
		}
		tok, err := decodeToken(hash, b)
		if err != nil {
			return err
		}
		return db.revoke(tx, tok.UserID, []*model.Token{tok})
	})
}

// RevokeTokenByID revokes the caller's token with public handle id, which
// may be the one making the request. Errors: model.ErrUnauthorized, model.ErrNotFound
// when the caller holds no token with that handle (another user's included).
func (db *DB) RevokeTokenByID(_ context.Context, by model.Caller, id model.TokenID) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		held, err := userTokens(tx, u.ID)
		if err != nil {
			return err
		}
		for _, t := range held {
			if t.ID == id {
				return db.revoke(tx, u.ID, []*model.Token{t})
			}
		}
		return model.TokenNotHeld(id.String())
	})
}

// RevokeAllTokens logs the caller out everywhere: every token of theirs
// stops working, the one making the request included. Errors:
// model.ErrUnauthorized, model.ErrNotFound.
func (db *DB) RevokeAllTokens(_ context.Context, by model.Caller) error {
	return db.writes.update(func(tx *bbolt.Tx) error {
		u, err := db.caller(tx, by)
		if err != nil {
			return err
		}
		return db.revokeTokensExcept(tx, u.ID, model.TokenHash{})
	})
}

// revokeTokensExcept deletes every token of userID but keep; the zero
// hash, which no token has, keeps none.
func (db *DB) revokeTokensExcept(tx *bbolt.Tx, userID uint64, keep model.TokenHash) error {
	held, err := userTokens(tx, userID)
	if err != nil {
		return err
	}
	held = slices.DeleteFunc(held, func(t *model.Token) bool { return t.Hash == keep })
	return db.revoke(tx, userID, held)
}

// Tokens lists the tokens a user holds that still work, newest first.
func (db *DB) Tokens(_ context.Context, userID uint64) ([]*model.Token, error) {
	var out []*model.Token
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		var err error
		out, err = userTokens(tx, userID)
		return err
	})
	if err != nil {
		return nil, err
	}
	now := db.clock()
	out = slices.DeleteFunc(out, func(t *model.Token) bool { return !now.Before(t.ExpiresAt) })
	for _, t := range out {
		t.LastUsedAt = db.uses.LastUse(t)
	}
	slices.SortFunc(out, func(a, b *model.Token) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// sweepChunk bounds the tokens one sweep transaction looks at, so a sweep
// never holds the writer for long.
const sweepChunk = 500

// SweepExpiredTokens deletes expired tokens, sweepChunk per transaction,
// and returns how many it deleted. Expired tokens are refused anyway; the
// sweep keeps them from piling up in the file.
func (db *DB) SweepExpiredTokens(ctx context.Context) (int, error) {
	deleted := 0
	var from []byte
	for {
		if err := ctx.Err(); err != nil {
			return deleted, err
		}
		var next []byte
		n := 0
		err := db.writes.upkeep(func(tx *bbolt.Tx) error {
			n, next = 0, nil
			now := db.clock()
			c := tx.Bucket(bucketTokens).Cursor()
			k, v := c.First()
			if from != nil {
				k, v = c.Seek(from)
			}
			var expired []*model.Token
			for seen := 0; k != nil; k, v = c.Next() {
				if seen++; seen > sweepChunk {
					next = bytes.Clone(k)
					break
				}
				var h model.TokenHash
				copy(h[:], k)
				t, err := decodeToken(h, v)
				if err != nil {
					return err
				}
				if !now.Before(t.ExpiresAt) {
					expired = append(expired, t)
				}
			}
			// Deleting while the cursor walks would move it; delete after.
			// Streams end on their token's expiry by themselves, so no
			// revocation is recorded.
			for _, t := range expired {
				if err := deleteToken(tx, t); err != nil {
					return err
				}
			}
			n = len(expired)
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if next == nil {
			return deleted, nil
		}
		from = next
	}
}
