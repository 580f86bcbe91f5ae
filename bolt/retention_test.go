package bolt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"herald/model"
)

func TestDeleteMessagesBefore(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	msgs := bulkMessages(t, db, []uint64{ada.ID}, time.Second, func(i int) string { return fmt.Sprint("old news ", i) }, 2*retainChunk+200)
	cutoff := msgs[2*retainChunk+50].CreatedAt
	commits := db.WriteStats().Commits
	n, err := db.DeleteMessagesBefore(context.Background(), cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n, 2*retainChunk+50; got != want {
		t.Errorf("deleted %d, want %d", got, want)
	}
	if got := db.WriteStats().Commits - commits; got < 3 {
		t.Errorf("deleted in %d transactions, want chunks of at most %d", got, retainChunk)
	}
	if got, want := mustCounts(t, db).Messages, 150; got != want {
		t.Errorf("messages left = %d, want %d", got, want)
	}
	if _, _, err := db.Message(context.Background(), model.ByServer(), msgs[0].ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("the oldest message after retention: %v, want ErrNotFound", err)
	}
	if got := mustMessage(t, db, msgs[2*retainChunk+50].ID); got == nil {
		t.Errorf("the message at the cutoff is gone")
	}
	if n, _ := db.DeleteMessagesBefore(context.Background(), cutoff); n != 0 {
		t.Errorf("second pass deleted %d, want 0", n)
	}
}
