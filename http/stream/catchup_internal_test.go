package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	"herald/model"
)

// askingStore is a bbolt store that keeps what each MissingUsers call
// asked.
type askingStore struct {
	*bolt.DB
	mu    sync.Mutex
	asked [][]uint64
}

func (s *askingStore) MissingUsers(ctx context.Context, ids []uint64) ([]uint64, error) {
	s.mu.Lock()
	s.asked = append(s.asked, slices.Clone(ids))
	s.mu.Unlock()
	return s.DB.MissingUsers(ctx, ids)
}

// TestCatchUpAsksAfterAuthorsTogether: a stream catching up asks whether
// the authors of what it replays still have accounts once for all of
// them, not once an author: after an instance stops, every stream it
// served catches up at once elsewhere. A deleted author's messages are
// replayed as their deletions alone.
func TestCatchUpAsksAfterAuthorsTogether(t *testing.T) {
	db := openTestDB(t)
	store := &askingStore{DB: db}
	hub := startTestHub(t, db, store, Limits{}, nil)
	reader, readerToken := testUser(t, db, "reader@example.com")
	var authors []*model.User
	var bobToken string
	for _, name := range []string{"ada", "bob", "cyd"} {
		u, token := testUser(t, db, name+"@example.com")
		authors = append(authors, u)
		if name == "bob" {
			bobToken = token
		}
	}
	ids := map[string]uint64{}
	for round := 1; round <= 2; round++ {
		for _, u := range authors {
			content := fmt.Sprintf("%s %d", strings.TrimSuffix(u.Email, "@example.com"), round)
			m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), content)
			if err != nil {
				t.Fatal(err)
			}
			ids[content] = m.ID
		}
	}
	bobHash := auth.HashToken(strings.TrimPrefix(bobToken, "Bearer "))
	if err := db.DeleteAccount(context.Background(), model.ByToken(bobHash)); err != nil {
		t.Fatal(err)
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, tok, err := db.Authenticate(r.Context(), auth.HashToken(strings.TrimPrefix(readerToken, "Bearer ")))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var fromStart uint64
		if err := hub.Serve(w, r, Request{User: reader, Token: tok, From: &fromStart}); err != nil {
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(srv.Close)
	want := []string{
		fmt.Sprintf("created #%d", ids["ada 1"]),
		fmt.Sprintf("created #%d", ids["cyd 1"]),
		fmt.Sprintf("created #%d", ids["ada 2"]),
		fmt.Sprintf("created #%d", ids["cyd 2"]),
		fmt.Sprintf("deleted #%d", ids["bob 2"]),
		fmt.Sprintf("deleted #%d", ids["bob 1"]),
	}
	var got []string
	lines := openStream(t, srv.URL, readerToken, 5*time.Second)
	kind := ""
	for len(got) < len(want) && lines.Scan() {
		if k, ok := strings.CutPrefix(lines.Text(), "event: message."); ok {
			kind = k
		}
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			var m struct{ ID uint64 }
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("data %q: %v", data, err)
			}
			got = append(got, fmt.Sprintf("%s #%d", kind, m.ID))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("replayed %q, want %q", got, want)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if wantAsked := [][]uint64{{authors[0].ID, authors[1].ID, authors[2].ID}}; !slices.EqualFunc(store.asked, wantAsked, slices.Equal) {
		t.Errorf("asked after authors %v, want %v", store.asked, wantAsked)
	}
}
