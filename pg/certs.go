package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// TLS certificates and the ACME account, kept for the server's HTTPS with
// --tls-domain in the certs table: named values as the ACME client names
// them (a domain's certificate and its private key, the account's key, a
// challenge's answer while an order is under way). Every instance reads
// the same rows, so a certificate one instance obtained serves them all,
// and a challenge the CA sends to any of them is answered. They hold
// private keys, so they are kept like the token hashes: never logged or
// served.

// lockCerts is the advisory lock an instance holds while it orders a
// certificate (see LockCerts).
const lockCerts = 4

// Cert returns the value stored under name, or an error of kind
// model.ErrNotFound when there is none.
func (db *DB) Cert(ctx context.Context, name string) (_ []byte, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	var data []byte
	err = db.pool.QueryRow(ctx, `SELECT data FROM certs WHERE name = $1`, name).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, model.CertNotStored(name)
	}
	return data, err
}

// PutCert stores data under name, replacing what was there.
func (db *DB) PutCert(ctx context.Context, name string, data []byte) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		_, err := w.Exec(ctx, `INSERT INTO certs (name, data, updated_at) VALUES ($1, $2, now())
			ON CONFLICT (name) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`, name, data)
		return err
	})
}

// DeleteCert removes the value stored under name, if any.
func (db *DB) DeleteCert(ctx context.Context, name string) (err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	return db.write(ctx, func(w *writeTx) error {
		_, err := w.Exec(ctx, `DELETE FROM certs WHERE name = $1`, name)
		return err
	})
}

// unlockTimeout bounds giving the certificates' lock back.
const unlockTimeout = 5 * time.Second

// LockCerts waits until no other instance orders a certificate, and
// returns the lock, to be given back by calling unlock once the order is
// done and stored. Instances starting together then make one order: the
// first takes the lock, finds no certificate and orders one; the others
// wait, then find it stored. The lock is PostgreSQL's, a session-level
// advisory lock on a connection kept for it: an instance that dies while
// ordering gives it back with its connection, so nothing waits on a lock
// no one will release. Waiting ends with ctx.
func (db *DB) LockCerts(ctx context.Context) (unlock func(), err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, classify(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockSpace, lockCerts); err != nil {
		// A wait cut short may leave the connection mid-statement: it is
		// closed rather than handed to another caller.
		_ = conn.Hijack().Close(context.Background())
		return nil, classify(err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockSpace, lockCerts); err != nil {
			// Closing the session is what gives the lock back then.
			_ = conn.Hijack().Close(context.Background())
			return
		}
		conn.Release()
	}, nil
}
