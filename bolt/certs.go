package bolt

import (
	"bytes"
	"context"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// TLS certificates and the ACME account, kept for the server's HTTPS with
// --tls-domain: named values as the ACME client names them (a domain's
// certificate and its private key, the account's key, a challenge's
// answer while an order is under way). They hold private keys, so they
// are kept like the token hashes: in the file, never logged or served;
// a backup carries them.
//
//	certs  name → bytes
var bucketCerts = []byte("certs")

// Cert returns the value stored under name, or an error of kind
// model.ErrNotFound when there is none.
func (db *DB) Cert(_ context.Context, name string) ([]byte, error) {
	var out []byte
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(bucketCerts).Get([]byte(name)); v != nil {
			out = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if out == nil {
		return nil, model.CertNotStored(name)
	}
	return out, nil
}

// PutCert stores data under name, replacing what was there.
func (db *DB) PutCert(_ context.Context, name string, data []byte) error {
	return db.writes.upkeep(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCerts).Put([]byte(name), bytes.Clone(data))
	})
}

// DeleteCert removes the value stored under name, if any.
func (db *DB) DeleteCert(_ context.Context, name string) error {
	return db.writes.upkeep(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCerts).Delete([]byte(name))
	})
}

// certs checks that every value HTTPS with ACME keeps holds something: a
// certificate read back empty would be ordered again on every start.
func (c *checker) certs() {
	_ = c.tx.Bucket(bucketCerts).ForEach(func(k, v []byte) error {
		if len(v) == 0 {
			c.addf("certs: %q is empty", k)
		}
		return nil
	})
}
