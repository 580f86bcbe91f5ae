package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
)

// askingStore is a bbolt store that keeps what each MissingUsers call
// asked, and answers that the accounts in gone are missing: as a store
// answers while an account's deletion is still removing its messages,
// whose changes the log then still holds.
type askingStore struct {
	*bolt.DB
	gone  map[uint64]bool
	mu    sync.Mutex
	asked [][]uint64
}

func (s *askingStore) MissingUsers(ctx context.Context, ids []uint64) ([]uint64, error) {
	s.mu.Lock()
	s.asked = append(s.asked, slices.Clone(ids))
	s.mu.Unlock()
	missing, err := s.DB.MissingUsers(ctx, ids)
	for _, id := range ids {
		if s.gone[id] {
			missing = append(missing, id)
		}
	}
	return missing, err
}

// TestCatchUpAsksAfterAuthorsTogether: a stream catching up asks whether
// the authors of what it replays still have accounts for all of a
// batch's authors at once, not once an author (after an instance stops,
// every stream it served catches up at once elsewhere), never twice for
// one author, and only for the authors of what its filter passes. The
// messages of an author whose account is gone are not replayed.
//
// Ada posts a batch's worth of messages first, so the replay takes two
// batches: the first all hers, the second hers, Bob's and Cyd's.
func TestCatchUpAsksAfterAuthorsTogether(t *testing.T) {
	db := openTestDB(t)
	store := &askingStore{DB: db}
	hub := startTestHub(t, db, store, Limits{}, nil)
	_, readerToken := testUser(t, db, "reader@example.com")
	ada, _ := testUser(t, db, "ada@example.com")
	bob, _ := testUser(t, db, "bob@example.com")
	cyd, _ := testUser(t, db, "cyd@example.com")
	post := func(u *model.User, content string) uint64 {
		m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), content)
		if err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	var adas []string
	for i := range streamBatch {
		adas = append(adas, fmt.Sprintf("created #%d", post(ada, fmt.Sprint("ada's filler ", i))))
	}
	id := map[string]uint64{}
	for round := 1; round <= 2; round++ {
		for _, u := range []*model.User{ada, bob, cyd} {
			content := fmt.Sprintf("%s %d", strings.TrimSuffix(u.Email, "@example.com"), round)
			id[content] = post(u, content)
		}
	}
	adas = append(adas, fmt.Sprintf("created #%d", id["ada 1"]), fmt.Sprintf("created #%d", id["ada 2"]))
	// Bob's account is gone, his messages not yet.
	store.gone = map[uint64]bool{bob.ID: true}
	everyone := append(slices.Clone(adas[:streamBatch]),
		fmt.Sprintf("created #%d", id["ada 1"]), fmt.Sprintf("created #%d", id["cyd 1"]),
		fmt.Sprintf("created #%d", id["ada 2"]), fmt.Sprintf("created #%d", id["cyd 2"]))

	for _, tt := range []struct {
		name   string
		filter Filter
		want   []string
		// asked, every author once; together, authors asked in one call
		asked, together []uint64
	}{
		{name: "everyone", want: everyone,
			asked: []uint64{ada.ID, bob.ID, cyd.ID}, together: []uint64{bob.ID, cyd.ID}},
		{name: "ada's alone", filter: Filter{Owner: "ada@example.com"}, want: adas,
			asked: []uint64{ada.ID}, together: []uint64{ada.ID}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store.mu.Lock()
			store.asked = nil
			store.mu.Unlock()
			var fromStart uint64
			srv := httptest.NewServer(resumingHandler(db, hub, tt.filter, &fromStart))
			t.Cleanup(srv.Close)
			var got []string
			lines := openStream(t, srv.URL, readerToken, 5*time.Second)
			kind := ""
			for len(got) < len(tt.want) && lines.Scan() {
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
			if !slices.Equal(got, tt.want) {
				t.Errorf("replayed %d events, want %d; the last: %q, want %q",
					len(got), len(tt.want), got[max(0, len(got)-6):], tt.want[max(0, len(tt.want)-6):])
			}
			store.mu.Lock()
			defer store.mu.Unlock()
			asked := slices.Concat(store.asked...)
			if !slices.Equal(asked, tt.asked) {
				t.Errorf("asked after authors %v (calls %v), want each of %v once", asked, store.asked, tt.asked)
			}
			if !slices.ContainsFunc(store.asked, func(ids []uint64) bool { return slices.Equal(ids, tt.together) }) {
				t.Errorf("calls %v, want one asking after %v together", store.asked, tt.together)
			}
		})
	}
}
