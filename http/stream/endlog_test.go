package stream

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
)

// failingStore is a bbolt store that, once failing, answers every read of
// the change log and every token check with an error of its own, as a
// database out of reach does.
type failingStore struct {
	*bolt.DB
	failing atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *failingStore) ChangeHead(ctx context.Context) (uint64, <-chan struct{}, error) {
	if s.failing.Load() {
		return 0, nil, errStoreDown
	}
	return s.DB.ChangeHead(ctx)
}

func (s *failingStore) ChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	if s.failing.Load() {
		return nil, 0, errStoreDown
	}
	return s.DB.ChangesAfter(ctx, after, max)
}

func (s *failingStore) RecentChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	if s.failing.Load() {
		return nil, 0, errStoreDown
	}
	return s.DB.RecentChangesAfter(ctx, after, max)
}

func (s *failingStore) Authenticate(ctx context.Context, token model.TokenHash) (*model.User, *model.Token, error) {
	if s.failing.Load() {
		return nil, nil, errStoreDown
	}
	return s.DB.Authenticate(ctx, token)
}

// lockedBuffer is a log's destination that streams' goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestStreamEndLoggedOnEveryPath: a stream ends with exactly one "stream
// ended" line whether it ends while it catches up (before the dispatcher
// has it) or after, and the line names the cause: a store that fails is
// not taken for a token that stopped working.
func TestStreamEndLoggedOnEveryPath(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reason endReason
		// during runs between the status and the catch-up; after, once
		// the stream is caught up.
		during, after func(*Hub, *failingStore)
	}{
		{name: "shut down while it catches up", reason: shuttingDown, during: func(h *Hub, _ *failingStore) {
			h.mu.Lock()
			h.closed = true
			close(h.closing)
			h.mu.Unlock()
		}},
		{name: "the store fails while it catches up", reason: storeFailed, during: func(_ *Hub, s *failingStore) {
			s.failing.Store(true)
		}},
		{name: "the store fails a token check", reason: storeFailed, after: func(_ *Hub, s *failingStore) {
			s.failing.Store(true)
		}},
		{name: "shut down", reason: shuttingDown, after: func(h *Hub, _ *failingStore) {
			h.Close()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			store := &failingStore{DB: db}
			logs := &lockedBuffer{}
			hub := startTestHub(t, store, store, Limits{TokenCheck: 20 * time.Millisecond, StoreTimeout: 100 * time.Millisecond},
				slog.New(slog.NewTextHandler(logs, nil)))
			_, token := testUser(t, db, "ada@example.com")
			srv := httptest.NewServer(testHandler(db, hub))
			t.Cleanup(srv.Close)
			if tt.during != nil {
				hub.afterStatus = func() { tt.during(hub, store) }
			}
			lines := openStream(t, srv.URL, token, 5*time.Second)
			if tt.after != nil {
				for lines.Scan() && lines.Text() != ": connected" {
				}
				tt.after(hub, store)
			}
			for lines.Scan() {
			}
			// The line is written before the stream's place is given back,
			// and the place before anything else; give it a moment to come.
			want := `reason="` + tt.reason.String() + `"`
			deadline := time.Now().Add(3 * time.Second)
			for !strings.Contains(logs.String(), want) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond) // room for a second line, were there one
			got := logs.String()
			if n := strings.Count(got, `msg="stream ended"`); n != 1 || !strings.Contains(got, want) {
				t.Errorf("%d stream ended lines, want 1 with %s:\n%s", n, want, got)
			}
		})
	}
}
