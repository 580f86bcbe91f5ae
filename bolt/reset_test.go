package bolt

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"herald/model"
)

// TestPasswordResets: a code sets a new password once, before it expires,
// and takes every token of the account with it; a new code replaces the
// account's old one; deleting the account takes its code.
func TestPasswordResets(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	ada, adaTok := mustCreateUser(t, db, "ada@example.com")
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("first"), time.Hour); err != nil {
		t.Fatal(err)
	}
	r, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("second"), time.Hour)
	if err != nil || !r.ExpiresAt.Equal(db.clock().Add(time.Hour)) {
		t.Fatalf("second reset = %+v, %v", r, err)
	}
	bad := func(name string, err error) {
		t.Helper()
		if got := violationFields(t, err); !slices.Equal(got, []string{"code"}) {
			t.Errorf("%s: violations %v, want code", name, got)
		}
	}
	bad("replaced", db.ResetPassword(ctx, tokenHash("first"), "new hash"))
	if got, err := db.PasswordReset(ctx, tokenHash("second")); err != nil || got.UserID != ada.ID {
		t.Errorf("PasswordReset(second) = %+v, %v", got, err)
	}
	if err := db.ResetPassword(ctx, tokenHash("second"), "new hash"); err != nil {
		t.Fatal(err)
	}
	if u, _ := db.UserByEmail(ctx, "ada@example.com"); u.PasswordHash != "new hash" {
		t.Errorf("password hash %q after the reset", u.PasswordHash)
	}
	if _, _, err := db.Authenticate(ctx, adaTok); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a token from before the reset: %v, want revoked", err)
	}
	bad("used", db.ResetPassword(ctx, tokenHash("second"), "again"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("third"), time.Hour); err != nil {
		t.Fatal(err)
	}
	db.Clock.Add(time.Hour)
	bad("expired", db.ResetPassword(ctx, tokenHash("third"), "late"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("fourth"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, model.ByUser(ada.ID)); err != nil {
		t.Fatal(err)
	}
	bad("account deleted", db.ResetPassword(ctx, tokenHash("fourth"), "gone"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("fifth"), time.Hour); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("a reset of a deleted account: %v, want ErrNotFound", err)
	}
}
