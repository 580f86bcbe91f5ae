package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// testdata/layout7.db was written through the API of the last layout 7
// release. Among its accounts, 4 is root@example.com and 5 its look-alike
// ｒoot@example.com (a fullwidth r), which that release let register; the
// tokens below were issued to them, valid for 30 days from the writing.
var (
	layout7Written = time.Date(2026, 11, 28, 1, 10, 20, 0, time.UTC)
	layout7Tokens  = map[uint64]string{
		4: "herald_uPGETYfQDyhTXguW0bi54t4nTM0tPHrw0UavrVL2cY4fMUF6Q",
		5: "herald_ebw7RQzLz-2wu42-vMpNpBdN3NWoKJoj-774HEDji1U4OySiQ",
	}
)

const (
	layout7Root = "root@example.com"
	layout7Fake = "\uff52oot@example.com"
)

// TestUpgradeFromLayout7: the upgrade indexes every account by its
// e-mail's skeleton and logs, once, the pair of accounts whose e-mails
// look alike, changing neither: both still log in and post, and a new
// account looking like either is refused, even once one of them is gone.
func TestUpgradeFromLayout7(t *testing.T) {
	ctx := context.Background()
	path := fixtureCopy(t, "layout7.db")
	var log bytes.Buffer
	open := func() *DB {
		t.Helper()
		log.Reset()
		db, err := Open(path, Options{Now: (&testClock{now: layout7Written.Add(time.Hour)}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	// --admins belongs to the upgrade from layout 6 alone.
	if _, err := Open(path, Options{LegacyAdmins: []string{"owner@example.com"}}); !errors.Is(err, ErrLegacyAdmins) {
		t.Fatalf("opening a layout 7 file with --admins: %v, want ErrLegacyAdmins", err)
	}
	db := open()
	got := log.String()
	if strings.Count(got, "upgraded to layout 8") != 1 || strings.Count(got, "look alike") != 1 ||
		!strings.Contains(got, "account=4 email=root@example.com look_alike_account=5 look_alike_email="+layout7Fake) {
		t.Errorf("first open logged %q, want the upgrade to layout 8 once and the pair 4, 5 once", got)
	}
	checkIndexes(t, db)
	for id, email := range map[uint64]string{4: layout7Root, 5: layout7Fake} {
		u, _, err := db.Authenticate(ctx, sha256.Sum256([]byte(layout7Tokens[id])))
		if err != nil || u.ID != id || u.Email != email {
			t.Fatalf("account %d's token: %+v, %v; want %s as it was", id, u, err, email)
		}
		if byEmail, err := db.UserByEmail(ctx, email); err != nil || byEmail.ID != id {
			t.Errorf("UserByEmail(%s) = %+v, %v; want account %d", email, byEmail, err, id)
		}
		if _, err := db.CreateMessage(ctx, model.ByToken(sha256.Sum256([]byte(layout7Tokens[id]))), "still here"); err != nil {
			t.Errorf("account %d posting after the upgrade: %v", id, err)
		}
	}
	for email, want := range map[string]string{
		"ROOT@example.com":      "is already registered",
		"r\u1d0fot@example.com": "looks like the address of an existing account",
	} {
		u := &model.User{Email: email, PasswordHash: "hash"}
		_, err := db.CreateUser(ctx, u, sha256.Sum256([]byte(email)), time.Hour, nil)
		var me *model.Error
		if !errors.Is(err, model.ErrConflict) || !errors.As(err, &me) || !strings.Contains(me.Detail, want) {
			t.Errorf("CreateUser(%s) = %v, want a conflict saying %q", email, err, want)
		}
	}
	// With root's account gone, its address still looks like the other.
	if err := db.DeleteAccount(ctx, model.ByToken(sha256.Sum256([]byte(layout7Tokens[4])))); err != nil {
		t.Fatal(err)
	}
	u := &model.User{Email: layout7Root, PasswordHash: "hash"}
	if _, err := db.CreateUser(ctx, u, sha256.Sum256([]byte("new root")), time.Hour, nil); !errors.Is(err, model.ErrConflict) {
		t.Errorf("registering %s beside %s alone: %v, want a conflict", layout7Root, layout7Fake, err)
	}
	checkIndexes(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	if got := log.String(); got != "" {
		t.Errorf("second open logged %q, want nothing", got)
	}
}

// TestUpgradeFromLayout7Redone: an upgrade to layout 8 cut short leaves a
// partial index, perhaps beside entries an older Herald could not have
// kept; the next Open builds the index afresh and logs the pair once.
func TestUpgradeFromLayout7Redone(t *testing.T) {
	path := fixtureCopy(t, "layout7.db")
	updateFile(t, path, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bucketUsersBySkeleton)
		if err != nil {
			return err
		}
		if err := b.Put(skeletonKey(emailSkeleton("ada@example.com"), 2), nil); err != nil {
			return err
		}
		return b.Put(skeletonKey([]byte("gone@example.com"), 6), nil)
	})
	var log bytes.Buffer
	db, err := Open(path, Options{Now: (&testClock{now: layout7Written}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := log.String(); strings.Count(got, "upgraded to layout 8") != 1 || strings.Count(got, "look alike") != 1 {
		t.Errorf("open logged %q, want the upgrade and the one pair once", got)
	}
	checkIndexes(t, db)
}

// TestCheckSkeletonIndex: herald check finds an account missing from the
// skeleton index, and an entry left by an account that is gone or whose
// e-mail has another skeleton.
func TestCheckSkeletonIndex(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(b *bbolt.Bucket) error
		want   string
	}{
		{"Missing", func(b *bbolt.Bucket) error {
			return b.Delete(skeletonKey(emailSkeleton("ada@example.com"), 1))
		}, "user 1: not in users_by_skeleton"},
		{"Dangling", func(b *bbolt.Bucket) error {
			return b.Put(skeletonKey([]byte("gone@example.com"), 9), nil)
		}, "points at missing user 9"},
		{"WrongSkeleton", func(b *bbolt.Bucket) error {
			return b.Put(skeletonKey([]byte("other@example.com"), 1), nil)
		}, "holds user 1, whose e-mail is"},
		{"Malformed", func(b *bbolt.Bucket) error {
			return b.Put([]byte("short"), nil)
		}, "is not skeleton‖0‖ID"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := Open(filepath.Join(t.TempDir(), "herald.db"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			u := &model.User{Email: "ada@example.com", PasswordHash: "hash"}
			if _, err := db.CreateUser(context.Background(), u, sha256.Sum256([]byte("ada")), time.Hour, nil); err != nil {
				t.Fatal(err)
			}
			checkIndexes(t, db)
			if err := db.bolt.Update(func(tx *bbolt.Tx) error { return tt.change(tx.Bucket(bucketUsersBySkeleton)) }); err != nil {
				t.Fatal(err)
			}
			problems, err := db.CheckInvariants()
			if err != nil || len(problems) != 1 || !strings.Contains(problems[0], tt.want) {
				t.Errorf("CheckInvariants() = %q, %v; want one problem saying %q", problems, err, tt.want)
			}
		})
	}
}
