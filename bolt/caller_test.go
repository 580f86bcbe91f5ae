package bolt

import (
	"context"
	"errors"
	"testing"
	"time"

	"herald/model"
)

// Writes made with a token check it inside their own transaction: once a
// revocation or expiry has happened, no write made with it completes.
func TestWritesRecheckToken(t *testing.T) {
	db := mustOpen(t)
	ada, adaToken := mustCreateUser(t, db, "ada@example.com")
	m, err := db.CreateMessage(context.Background(), model.ByToken(adaToken), "mine")
	if err != nil || m.OwnerID != ada.ID {
		t.Fatalf("CreateMessage(model.ByToken) = %+v, %v", m, err)
	}
	content := "edited"
	writes := map[string]func(model.Caller) error{
		"Create": func(by model.Caller) error { _, err := db.CreateMessage(context.Background(), by, "x"); return err },
		"Update": func(by model.Caller) error {
			_, err := db.UpdateMessage(context.Background(), m.ID, by, model.MessageUpdate{Content: &content}, nil)
			return err
		},
		"Delete": func(by model.Caller) error {
			_, err := db.DeleteMessage(context.Background(), m.ID, by, nil)
			return err
		},
	}
	expiring := tokenHash("short-lived")
	if _, err := db.CreateToken(ada.ID, expiring, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(context.Background(), adaToken); err != nil {
		t.Fatal(err)
	}
	db.Clock.Add(time.Minute)
	for name, write := range writes {
		for _, token := range []model.TokenHash{adaToken, expiring, tokenHash("never issued")} {
			if err := write(model.ByToken(token)); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("%s with a dead token = %v, want ErrUnauthorized", name, err)
			}
		}
	}
	if got := mustMessage(t, db, m.ID); got.Content != "mine" {
		t.Errorf("message after refused writes = %q, want it unchanged", got.Content)
	}
	if got, want := mustCounts(t, db).Messages, 1; got != want {
		t.Errorf("messages = %d, want %d", got, want)
	}
}
