package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"herald/model"
)

// testHandles: an account registered without a handle gets the first free
// one made from its e-mail and is named by it; one asked for is kept,
// lower-cased, unless another account has it, a conflict that names the
// field and takes no account ID; a malformed one is a violation of the
// field; the handle is free again once its account is gone.
func testHandles(e *env) {
	t := e.t
	ctx := e.ctx()
	register := func(email, handle, name string) (*model.User, error) {
		u := &model.User{Email: email, Handle: handle, Name: name, PasswordHash: FakePasswordHash}
		_, err := e.Store.CreateUser(ctx, u, TokenHash("handles "+email), ttl, nil)
		return u, err
	}
	for _, tc := range []struct {
		email, handle, name  string
		wantHandle, wantName string
	}{
		{"Ada@example.com", "", "", "ada", "ada"},
		{"ada@example.org", "", "", "ada2", "ada2"},
		{"ada@example.net", "", " Ada Lovelace ", "ada3", "Ada Lovelace"},
		{"lovelace@example.com", "ADA_L", "", "ada_l", "ada_l"},
		{"9@example.com", "", "", "user", "user"},
	} {
		u, err := register(tc.email, tc.handle, tc.name)
		if err != nil {
			t.Fatalf("CreateUser(%s) = %v", tc.email, err)
		}
		got, err := e.Store.UserByID(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Handle != tc.wantHandle || got.Name != tc.wantName || u.Handle != tc.wantHandle || u.Name != tc.wantName {
			t.Errorf("%s: stored handle %q, name %q (returned %q, %q); want %q, %q", tc.email, got.Handle, got.Name, u.Handle, u.Name, tc.wantHandle, tc.wantName)
		}
	}
	before := e.counts()
	_, err := register("other@example.com", "Ada2", "")
	wantKind(t, "CreateUser with a taken handle", err, model.ErrConflict, model.HandleTaken("ada2").Error())
	var refusal *model.Error
	if errors.As(err, &refusal) && refusal.Field != "handle" {
		t.Errorf("the refusal names field %q, want handle", refusal.Field)
	}
	var invalid *model.ValidationError
	if _, err := register("bad@example.com", "9lives", ""); !errors.As(err, &invalid) || invalid.Violations[0].Field != "handle" {
		t.Errorf("CreateUser with a malformed handle = %v, want a violation of handle", err)
	}
	if after := e.counts(); after != before {
		t.Errorf("refused registrations changed the counts: %+v, then %+v", before, after)
	}
	// The next account takes the next ID: the refusals drew none.
	next, err := register("next@example.com", "", "")
	if err != nil || next.ID != 6 {
		t.Errorf("the account after the refusals: ID %d, %v; want 6", next.ID, err)
	}
	// Gone with its account, the handle is anyone's.
	ada, err := e.Store.UserByEmail(ctx, "ada@example.org")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.DeleteAccount(ctx, model.ByToken(TokenHash("handles ada@example.org"))); err != nil {
		t.Fatal(err)
	}
	if u, err := register("new@example.com", "ada2", ""); err != nil || u.Handle != "ada2" || u.ID == ada.ID {
		t.Errorf("ada2 after its account was deleted: %+v, %v; want it taken by the new account", u, err)
	}
}

// testHandleRace: accounts registering at once from e-mails that make the
// same handle each get a different one, none refused for a handle it
// never asked for.
func testHandleRace(e *env) {
	t := e.t
	const n = 8
	handles := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u := &model.User{Email: fmt.Sprintf("same@example%d.com", i), PasswordHash: FakePasswordHash}
			if _, err := e.Store.CreateUser(e.ctx(), u, TokenHash(u.Email), ttl, nil); err != nil {
				t.Errorf("CreateUser(%s) = %v", u.Email, err)
			}
			handles[i] = u.Handle
		})
	}
	wg.Wait()
	slices.Sort(handles)
	want := []string{"same", "same2", "same3", "same4", "same5", "same6", "same7", "same8"}
	if !slices.Equal(handles, want) {
		t.Errorf("handles %q, want %q", handles, want)
	}
}

// testProfiles: an account changes its handle and name; the handle it
// left is anyone's, one another account has is refused (naming the
// field), one malformed is a violation; a handle is found in any letter
// case, a suspended account's too.
func testProfiles(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaToken := e.user("ada@example.com")
	bob, _ := e.user("bob@example.com")
	got, err := e.Store.UpdateProfile(ctx, model.ByToken(adaToken), model.ProfileUpdate{Handle: ptr("Lovelace"), Name: ptr("  Ada Lovelace ")})
	if err != nil || got.Handle != "lovelace" || got.Name != "Ada Lovelace" || got.ID != ada.ID {
		t.Fatalf("UpdateProfile = %+v, %v; want lovelace, Ada Lovelace", got, err)
	}
	if u, err := e.Store.UserByHandle(ctx, "LOVELACE"); err != nil || u.ID != ada.ID || u.Name != "Ada Lovelace" {
		t.Errorf("UserByHandle(LOVELACE) = %+v, %v; want ada", u, err)
	}
	_, err = e.Store.UserByHandle(ctx, "ada")
	wantKind(t, "UserByHandle of the handle ada left", err, model.ErrNotFound, model.HandleNotFound().Error())
	// Only the name: the handle stays.
	if got, err := e.Store.UpdateProfile(ctx, model.ByToken(adaToken), model.ProfileUpdate{Name: ptr("Ada")}); err != nil || got.Handle != "lovelace" || got.Name != "Ada" {
		t.Errorf("UpdateProfile of the name = %+v, %v", got, err)
	}
	// The handle ada left is anyone's: bob takes it.
	if got, err := e.Store.UpdateProfile(ctx, model.ByUser(bob.ID), model.ProfileUpdate{Handle: ptr("ada")}); err != nil || got.Handle != "ada" {
		t.Errorf("bob taking ada = %+v, %v", got, err)
	}
	_, err = e.Store.UpdateProfile(ctx, model.ByToken(adaToken), model.ProfileUpdate{Handle: ptr("ADA")})
	wantKind(t, "UpdateProfile to a taken handle", err, model.ErrConflict, model.HandleTaken("ada").Error())
	for _, p := range []model.ProfileUpdate{{Handle: ptr("a")}, {Name: ptr("   ")}, {Name: ptr("x\u200by")}} {
		var invalid *model.ValidationError
		if _, err := e.Store.UpdateProfile(ctx, model.ByToken(adaToken), p); !errors.As(err, &invalid) {
			t.Errorf("UpdateProfile(%+v) = %v, want a violation", p, err)
		}
	}
	if u, err := e.Store.UserByID(ctx, ada.ID); err != nil || u.Handle != "lovelace" || u.Name != "Ada" {
		t.Errorf("after the refusals ada is %+v, %v; want lovelace, Ada", u, err)
	}
	_, rootToken := e.admin("root@example.com")
	if _, err := e.Store.UpdateAccount(ctx, model.ByToken(rootToken), ada.ID, model.AccountUpdate{Suspended: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if u, err := e.Store.UserByHandle(ctx, "lovelace"); err != nil || u.ID != ada.ID || !u.Suspended {
		t.Errorf("UserByHandle of a suspended account = %+v, %v; want it found", u, err)
	}
}
