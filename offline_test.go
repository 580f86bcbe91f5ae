package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/bolt"
	"herald/model"
)

// seedDB writes a small database: two users, n messages, some deleted.
func seedDB(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "herald.db")
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var users []*model.User
	for i, email := range []string{"ada@example.com", "bob@example.com"} {
		u := &model.User{Email: email, PasswordHash: "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA"}
		if _, err := db.CreateUser(context.Background(), u, model.TokenHash{byte(i + 1)}, time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	for i := range n {
		u := users[i%2]
		m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), fmt.Sprintf("message number %d with some words", i))
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if _, err := db.DeleteMessage(context.Background(), m.ID, model.ByUser(u.ID), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path
}

func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = run(context.Background(), args, environ(nil), strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestCheck(t *testing.T) {
	path := seedDB(t, 30)
	code, out, errOut := runArgs(t, "check", "--db", path)
	if code != 0 || !strings.Contains(out, "no problems found") || !strings.Contains(out, "2 users, 2 tokens, 20 messages") {
		t.Fatalf("check on a sound database = %d\n%s%s", code, out, errOut)
	}

	// Damage it: a word entry search would never read, and a message
	// missing from the search index.
	err := func() error {
		b, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			return err
		}
		defer b.Close()
		return b.Update(func(tx *bbolt.Tx) error {
			// A block of one posting: the word and the ID in its key.
			postings := tx.Bucket([]byte("postings"))
			ghost := binary.BigEndian.AppendUint64([]byte("ghost\x00"), 2)
			if err := postings.Put(ghost, nil); err != nil {
				return err
			}
			// Message 2 is new enough to be in the search index's tail.
			return tx.Bucket([]byte("terms_tail")).Delete(binary.BigEndian.AppendUint64(nil, 2))
		})
	}()
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ = runArgs(t, "check", "--db", path)
	if code != 1 {
		t.Errorf("check on a damaged database exited %d, want 1", code)
	}
	for _, want := range []string{`word "ghost" of message 2, above terms_merged 0`, `message 2: missing from the search index's tail`, "2 problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

func TestToolErrors(t *testing.T) {
	path := seedDB(t, 3)
	missing := filepath.Join(t.TempDir(), "nope.db")
	tests := []struct {
		name    string
		args    []string
		code    int
		wantErr string
	}{
		{"CheckMissingFile", []string{"check", "--db", missing}, 1, missing + " does not exist"},
		{"CheckExtraArgument", []string{"check", "--db", path, "extra"}, 2, "takes --db FILE"},
		{"CheckUnknownFlag", []string{"check", "--bogus"}, 2, "bogus"},
		{"BackupNoOut", []string{"backup", "--db", path}, 2, "takes --db FILE OUT"},
		{"BackupOutExists", []string{"backup", "--db", path, path}, 1, "already exists"},
		{"CompactOutExists", []string{"compact", "--db", path, path}, 1, "already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runArgs(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("%q = %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.wantErr)
			}
			if strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("stderr is more than one line: %q", errOut)
			}
		})
	}
	t.Run("Locked", func(t *testing.T) {
		db, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, tool := range []string{"check", "backup", "compact"} {
			args := []string{tool, "--db", path}
			if tool != "check" {
				args = append(args, filepath.Join(t.TempDir(), "out.db"))
			}
			code, _, errOut := runArgs(t, args...)
			if code != 1 || !strings.Contains(errOut, path+" is in use by another process") {
				t.Errorf("%s on a database a server holds = %d, %q", tool, code, errOut)
			}
		}
	})
	t.Run("Help", func(t *testing.T) {
		for _, tool := range []string{"check", "backup", "compact"} {
			code, out, _ := runArgs(t, tool, "--help")
			if code != 0 || !strings.Contains(out, "Usage: herald "+tool) {
				t.Errorf("%s --help = %d, %q", tool, code, out)
			}
		}
	})
}

func TestBackupAndCompact(t *testing.T) {
	path := seedDB(t, 300)
	dir := t.TempDir()
	backup := filepath.Join(dir, "backup.db")
	code, out, errOut := runArgs(t, "backup", "--db", path, backup)
	if code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup = %d\n%s%s", code, out, errOut)
	}
	compacted := filepath.Join(dir, "compact.db")
	code, out, errOut = runArgs(t, "compact", "--db", backup, compacted)
	if code != 0 || !strings.Contains(out, "compacted") {
		t.Fatalf("compact = %d\n%s%s", code, out, errOut)
	}
	// The pages up to the last one used, not the file's length: bbolt
	// grows a small file in doublings, so a compacted copy can be longer
	// than a backup, which is written page for page. The backup keeps the
	// pages deletions freed among them; the compacted copy leaves them out.
	if before, after := pagesUsedUpTo(t, backup), pagesUsedUpTo(t, compacted); after >= before {
		t.Errorf("compacted %d pages into %d, want fewer after deletions", before, after)
	}
	for _, copy := range []string{backup, compacted} {
		code, out, _ := runArgs(t, "check", "--db", copy)
		if code != 0 || !strings.Contains(out, "2 users, 2 tokens, 200 messages") {
			t.Errorf("check %s = %d:\n%s", filepath.Base(copy), code, out)
		}
		// The copy is a working database: it opens and answers searches.
		db, err := bolt.Open(copy, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Terms: model.Terms("number 299")})
		if err != nil || len(page.Messages) != 1 {
			t.Errorf("search in %s = %v, %v", filepath.Base(copy), page, err)
		}
		db.Close()
	}
}

// TestNotHerald: a file that is not a bbolt database, someone else's
// bbolt file, and (for the tools that only read) an empty file are refused
// with one line naming the path, and are left exactly as they were.
func TestNotHerald(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 500)), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	b, err := bbolt.Open(other, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("someone-else")); return err }); err != nil {
		t.Fatal(err)
	}
	b.Close()
	before, _ := os.ReadFile(other)
	for _, path := range []string{garbage, other} {
		for _, args := range [][]string{{"--addr", "127.0.0.1:0", "--db", path}, {"check", "--db", path}} {
			code, _, errOut := runArgs(t, args...)
			if code != 1 || !strings.Contains(errOut, path+" is not a Herald database") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("%q = %d, stderr %q; want 1 and one line saying it is not a Herald database", args, code, errOut)
			}
		}
	}
	if after, _ := os.ReadFile(other); !bytes.Equal(before, after) {
		t.Errorf("someone else's bbolt file was changed")
	}
	// An empty file is where a server starts a new database, but the
	// tools that only read find no Herald data in it, and leave it empty.
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"check", "--db", empty},
		{"backup", "--db", empty, filepath.Join(dir, "backup.db")},
		{"migrate", "--db", empty, "--to", "postgres:///herald?host=" + dir},
	} {
		code, _, errOut := runArgs(t, args...)
		if code != 1 || !strings.Contains(errOut, empty+" is not a Herald database; point --db at a Herald file\n") || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q = %d, stderr %q; want 1 and one line saying it is not a Herald database", args, code, errOut)
		}
	}
	if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file was written: %v, %v", fi, err)
	}
}

// pagesUsedUpTo is how many pages a database file uses up to its last
// one in use (bbolt's high-water mark), free pages below it included.
func pagesUsedUpTo(t *testing.T, path string) int {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages int
	err = db.View(func(tx *bbolt.Tx) error {
		pages = int(tx.Size()) / db.Info().PageSize
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}
