package bolt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/model"
)

// TestInvites: an invitation lets its uses register until it expires, is
// refused with one answer once used up, revoked, expired or unknown, and
// is kept only as its code's hash; expired ones are swept.
func TestInvites(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	now := db.clock()
	for _, bad := range []model.Invite{
		{MaxUses: 0, ExpiresAt: now.Add(time.Hour)},
		{MaxUses: model.MaxInviteUses + 1, ExpiresAt: now.Add(time.Hour)},
		{MaxUses: 1, ExpiresAt: now},
		{MaxUses: 1, ExpiresAt: now.Add(model.MaxInviteLifetime + time.Hour)},
	} {
		if err := db.CreateInvite(ctx, model.ByToken(rootTok), &bad); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CreateInvite(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	two := &model.Invite{MaxUses: 2, ExpiresAt: now.Add(time.Hour), CodeHash: tokenHash("two")}
	once := &model.Invite{MaxUses: 1, ExpiresAt: now.Add(2 * time.Hour), CodeHash: tokenHash("once")}
	for _, inv := range []*model.Invite{two, once} {
		if err := db.CreateInvite(ctx, model.ByToken(rootTok), inv); err != nil {
			t.Fatal(err)
		}
	}
	register := func(email string, code model.TokenHash) error {
		_, err := db.CreateUser(ctx, &model.User{Email: email, PasswordHash: fakePasswordHash}, tokenHash(email), defaultTTL, &code)
		return err
	}
	badInvite := func(name string, err error) {
		t.Helper()
		if got := violationFields(t, err); !slices.Equal(got, []string{"invite"}) {
			t.Errorf("%s: violations %v, want invite", name, got)
		}
	}
	for _, email := range []string{"a@example.com", "b@example.com"} {
		if err := register(email, tokenHash("two")); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
	}
	badInvite("used up", register("c@example.com", tokenHash("two")))
	badInvite("unknown", register("c@example.com", tokenHash("nope")))
	if err := db.RevokeInvite(ctx, model.ByToken(rootTok), once.ID); err != nil {
		t.Fatal(err)
	}
	badInvite("revoked", register("c@example.com", tokenHash("once")))
	if _, err := db.UserByEmail(ctx, "c@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("c registered with a refused invitation: %v", err)
	}
	later := &model.Invite{MaxUses: 5, ExpiresAt: now.Add(time.Hour), CodeHash: tokenHash("later")}
	if err := db.CreateInvite(ctx, model.ByToken(rootTok), later); err != nil {
		t.Fatal(err)
	}
	invites, err := db.Invites(ctx, model.ByToken(rootTok))
	if err != nil || len(invites) != 2 || invites[0].ID != later.ID || invites[1].Uses != 2 {
		t.Errorf("Invites = %+v, %v; want later, then two used twice", invites, err)
	}
	db.Clock.Add(time.Hour)
	badInvite("expired", register("d@example.com", tokenHash("later")))
	if n, err := db.SweepExpiredCodes(ctx); err != nil || n != 2 {
		t.Errorf("SweepExpiredCodes = %d, %v; want the two expired", n, err)
	}
	want := []string{fmt.Sprintf("create-invite root@example.com→invite %d", later.ID),
		fmt.Sprintf("revoke-invite root@example.com→invite %d", once.ID),
		fmt.Sprintf("create-invite root@example.com→invite %d", once.ID),
		fmt.Sprintf("create-invite root@example.com→invite %d", two.ID),
		"grant-admin server→root@example.com"}
	if got := auditActions(t, db); !slices.Equal(got, want) {
		t.Errorf("audit log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
