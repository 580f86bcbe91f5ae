package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"herald/pg"
)

// TestLockCerts: while one instance holds the certificates' lock (it
// orders), another's wait ends only when it is given back, or when the
// waiter gives up; an instance whose connection dies gives it back.
func TestLockCerts(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	ctx := context.Background()
	unlockA, err := a.LockCerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := b.LockCerts(short); err == nil {
		t.Fatal("b took the lock a holds")
	} else if !errors.Is(err, context.DeadlineExceeded) && short.Err() == nil {
		t.Fatalf("b's wait ended with %v before its deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		unlockB, err := b.LockCerts(ctx)
		if err == nil {
			unlockB()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("b took the lock while a holds it: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	unlockA()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("b's wait after a gave the lock back: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b still waits after a gave the lock back")
	}
	// Given back, it can be taken again; a's pool still works.
	unlock, err := a.LockCerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	if err := a.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}
