package storetest

import (
	"bytes"
	"errors"

	"herald/model"
)

// testCerts: the values HTTPS with ACME keeps (certificates with their
// keys, the account's key) are read back byte for byte, whatever bytes
// they hold, replaced, and deleted; a name never stored, or deleted, is
// not found, and deleting it again is no error.
func testCerts(e *env) {
	ctx := e.ctx()
	if _, err := e.Store.Cert(ctx, "herald.example.com"); !errors.Is(err, model.ErrNotFound) {
		e.t.Errorf("Cert of a name never stored = %v, want ErrNotFound", err)
	}
	binary := bytes.Repeat([]byte{0, 0xff, '\n', 'k'}, 16<<10)
	values := map[string][]byte{
		"herald.example.com":     []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"),
		"herald.example.com+rsa": binary,
		"acme_account+key":       []byte("account"),
	}
	for name, v := range values {
		if err := e.Store.PutCert(ctx, name, v); err != nil {
			e.t.Fatalf("PutCert(%q) = %v", name, err)
		}
	}
	for name, v := range values {
		if got, err := e.Store.Cert(ctx, name); err != nil || !bytes.Equal(got, v) {
			e.t.Errorf("Cert(%q) = %d bytes, %v; want the %d stored", name, len(got), err, len(v))
		}
	}
	if err := e.Store.PutCert(ctx, "herald.example.com", []byte("renewed")); err != nil {
		e.t.Fatal(err)
	}
	if got, err := e.Store.Cert(ctx, "herald.example.com"); err != nil || string(got) != "renewed" {
		e.t.Errorf("Cert after a replacement = %q, %v; want %q", got, err, "renewed")
	}
	for range 2 {
		if err := e.Store.DeleteCert(ctx, "herald.example.com+rsa"); err != nil {
			e.t.Errorf("DeleteCert = %v", err)
		}
	}
	if _, err := e.Store.Cert(ctx, "herald.example.com+rsa"); !errors.Is(err, model.ErrNotFound) {
		e.t.Errorf("Cert of a deleted name = %v, want ErrNotFound", err)
	}
	if got, err := e.Store.Cert(ctx, "acme_account+key"); err != nil || string(got) != "account" {
		e.t.Errorf("a deletion took another name with it: %q, %v", got, err)
	}
}
