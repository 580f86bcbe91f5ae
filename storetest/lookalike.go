package storetest

import (
	"errors"
	"fmt"
	"sync"

	"herald/model"
)

// testLookAlikes: an address whose skeleton (model.EmailSkeleton) is
// another account's is taken, as the same address in another letter case
// is, and says so; registrations refused for it take no account ID, an
// administrator made on the server's machine is held to it too, and the
// skeleton is free again once its account is gone. Addresses that only
// differ visibly (an accent) are two accounts.
func testLookAlikes(e *env) {
	t := e.t
	ctx := e.ctx()
	root, rootReg := e.user("root@example.com")
	e.user("ape@example.com")
	before := e.counts()
	for _, tt := range []struct {
		email string
		want  error
	}{
		{"ROOT@Example.com", model.EmailTaken("ROOT@Example.com")},
		{"r\u1d0fot@example.com", model.EmailLookAlike("r\u1d0fot@example.com")},                   // a small capital o
		{"\u0430\u0440\u0435@example.com", model.EmailLookAlike("\u0430\u0440\u0435@example.com")}, // ape in Cyrillic
		{"rn@example.com", nil},
		{"m@example.com", model.EmailLookAlike("m@example.com")}, // rn
	} {
		_, err := e.Store.CreateUser(ctx, &model.User{Email: tt.email, PasswordHash: FakePasswordHash}, TokenHash("look-alike "+tt.email), ttl, nil)
		if tt.want == nil {
			if err != nil {
				t.Errorf("CreateUser(%s) = %v, want it registered", tt.email, err)
			}
			continue
		}
		wantKind(t, "CreateUser("+tt.email+")", err, model.ErrConflict, tt.want.Error())
	}
	err := e.Store.CreateAdministrator(ctx, &model.User{Email: "r\u1d0f\u1d0ft@example.com", PasswordHash: FakePasswordHash})
	wantKind(t, "CreateAdministrator(a look-alike)", err, model.ErrConflict, model.EmailLookAlike("r\u1d0f\u1d0ft@example.com").Error())
	if got, want := e.counts(), (Counts{before.Users + 1, before.Tokens + 1, before.Messages}); got != want {
		t.Errorf("counts after refused look-alikes = %+v, want %+v", got, want)
	}
	// Refused registrations take no account ID.
	jose, _ := e.user("jose@example.com")
	if jose.ID != root.ID+3 {
		t.Errorf("the account after refused look-alikes has ID %d, want %d", jose.ID, root.ID+3)
	}
	e.user("jos\u00e9@example.com")
	if err := e.Store.DeleteAccount(ctx, model.ByToken(rootReg)); err != nil {
		t.Fatal(err)
	}
	e.user("r\u1d0fot@example.com")
}

// testLookAlikeRace: registrations of look-alikes of one address racing,
// each a different address, make one account; the others are refused as
// look-alikes. A few rounds, each of another address: the first opens
// the connections a store may open lazily, so the later ones race.
func testLookAlikeRace(e *env) {
	t := e.t
	ctx := e.ctx()
	for round := range 4 {
		// One skeleton each round: the digit 1 and the small capital o
		// are drawn as l and o.
		var racers []string
		for _, l := range []string{"l", "1"} {
			for _, o1 := range []string{"o", "\u1d0f"} {
				for _, o2 := range []string{"o", "\u1d0f"} {
					racers = append(racers, fmt.Sprintf("%s%s%skalike%d@example.com", l, o1, o2, round))
				}
			}
		}
		before := e.counts()
		errs := make([]error, len(racers))
		var wg sync.WaitGroup
		for i, email := range racers {
			wg.Go(func() {
				_, errs[i] = e.Store.CreateUser(ctx, &model.User{Email: email, PasswordHash: FakePasswordHash}, TokenHash("racer "+email), ttl, nil)
			})
		}
		wg.Wait()
		won := 0
		for i, err := range errs {
			if err == nil {
				won++
				continue
			}
			if !errors.Is(err, model.ErrConflict) {
				t.Fatalf("racer %s: %v, want it registered or refused as a look-alike", racers[i], err)
			}
			wantKind(t, "racer "+racers[i], err, model.ErrConflict, model.EmailLookAlike(racers[i]).Error())
		}
		if won != 1 {
			t.Errorf("round %d: %d of %d look-alikes racing registered, want 1", round, won, len(racers))
		}
		if got, want := e.counts(), (Counts{before.Users + 1, before.Tokens + 1, before.Messages}); got != want {
			t.Errorf("round %d: counts after the race = %+v, want %+v", round, got, want)
		}
	}
}
