package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// testEpoch is where every test clock starts. It carries nanoseconds on
// purpose: the store must cut them to the microseconds the API shows.
var testEpoch = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

// testClock is a settable clock for Options.Now. It only moves when a test
// moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// testDB is an open database in a test's temporary directory with the clock
// it was opened with.
type testDB struct {
	*DB
	Path  string
	Clock *testClock
}

// mustOpen opens a database in t.TempDir() with a fixed, settable clock. When
// the test ends it checks bbolt's page consistency and our secondary indexes,
// then closes the database.
func mustOpen(tb testing.TB) *testDB {
	tb.Helper()
	clk := &testClock{now: testEpoch}
	path := filepath.Join(tb.TempDir(), "herald.db")
	db, err := Open(path, Options{Now: clk.Now, TailMergePostings: testMergePostings()})
	if err != nil {
		tb.Fatalf("Open(%q) = %v", path, err)
	}
	tdb := &testDB{DB: db, Path: path, Clock: clk}
	// Through tdb, so a test that reopens the file gets the new handle checked.
	tb.Cleanup(func() {
		if err := tdb.Check(); err != nil {
			tb.Errorf("Check() = %v, want nil", err)
		}
		checkIndexes(tb, tdb.DB)
		if err := tdb.Close(); err != nil {
			tb.Errorf("Close() = %v, want nil", err)
		}
	})
	return tdb
}

// tokenHash derives a distinct token hash from a name, as auth would from a
// minted token.
func tokenHash(name string) model.TokenHash { return sha256.Sum256([]byte(name)) }

// fakePasswordHash stands in for an argon2id string; the store never looks
// inside it.
const fakePasswordHash = "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA"

// defaultTTL is the token lifetime tests use unless they care.
const defaultTTL = 30 * 24 * time.Hour

// mustCreateUser registers email and returns the user and the token hash
// registration stored for it.
func mustCreateUser(tb testing.TB, db *testDB, email string) (*model.User, model.TokenHash) {
	tb.Helper()
	u := &model.User{Email: email, PasswordHash: fakePasswordHash}
	h := tokenHash("register:" + email)
	if _, err := db.CreateUser(context.Background(), u, h, defaultTTL, nil); err != nil {
		tb.Fatalf("CreateUser(%q) = %v", email, err)
	}
	return u, h
}

// mustCreateMessage stores content for owner and returns the stored message.
func mustCreateMessage(tb testing.TB, db *testDB, owner uint64, content string) *model.Message {
	tb.Helper()
	m, err := db.CreateMessage(context.Background(), model.ByUser(owner), content)
	if err != nil {
		tb.Fatalf("CreateMessage(owner %d, %q) = %v", owner, content, err)
	}
	return m
}

// mustMessage reads a message that must exist.
func mustMessage(tb testing.TB, db *testDB, id uint64) *model.Message {
	tb.Helper()
	_, m, err := db.Message(context.Background(), model.ByServer(), id)
	if err != nil {
		tb.Fatalf("Message(%d) = %v", id, err)
	}
	return m
}

// mustCounts reads the record counts.
func mustCounts(tb testing.TB, db *testDB) Counts {
	tb.Helper()
	c, err := db.Counts()
	if err != nil {
		tb.Fatalf("Counts() = %v", err)
	}
	return c
}

// messageString renders every field, so two messages compare with ==
// regardless of time.Time's location and monotonic reading.
func messageString(m *model.Message) string {
	if m == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{ID:%d OwnerID:%d OwnerEmail:%q Content:%q CreatedAt:%s UpdatedAt:%s Revision:%d}",
		m.ID, m.OwnerID, m.OwnerEmail, m.Content,
		m.CreatedAt.UTC().Format(time.RFC3339Nano), m.UpdatedAt.UTC().Format(time.RFC3339Nano), m.Revision)
}

// assertUnchanged fails when message want.ID no longer reads back as want.
func assertUnchanged(tb testing.TB, db *testDB, want *model.Message) {
	tb.Helper()
	_, got, err := db.Message(context.Background(), model.ByServer(), want.ID)
	if err != nil {
		tb.Fatalf("Message(%d) = %v, want it unchanged", want.ID, err)
	}
	if g, w := messageString(got), messageString(want); g != w {
		tb.Errorf("Message(%d) = %s, want unchanged %s", want.ID, g, w)
	}
}

// violationFields asserts err is a *model.ValidationError matching
// model.ErrInvalid and
// returns the fields it names, in order.
func violationFields(tb testing.TB, err error) []string {
	tb.Helper()
	if !errors.Is(err, model.ErrInvalid) {
		tb.Fatalf("err = %v, want ErrInvalid", err)
	}
	var ve *model.ValidationError
	if !errors.As(err, &ve) {
		tb.Fatalf("err = %T %v, want *ValidationError", err, err)
	}
	fields := make([]string, len(ve.Violations))
	for i, v := range ve.Violations {
		fields[i] = v.Field
		if v.Message == "" {
			tb.Errorf("violation of %q has an empty message", v.Field)
		}
	}
	return fields
}

// checkIndexes fails the test for every problem CheckInvariants finds: each
// index entry must point at its record and each record must be indexed, in
// every index, both ways.
func checkIndexes(tb testing.TB, db *DB) {
	tb.Helper()
	problems, err := db.CheckInvariants()
	if err != nil {
		tb.Fatalf("CheckInvariants() = %v", err)
	}
	for _, p := range problems {
		tb.Errorf("CheckInvariants: %s", p)
	}
}

func TestOpen(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		err := db.bolt.View(func(tx *bbolt.Tx) error {
			for _, name := range allBuckets {
				if tx.Bucket(name) == nil {
					t.Errorf("bucket %q does not exist after Open", name)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mustCounts(t, db), (Counts{}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})

	t.Run("ErrLocked", func(t *testing.T) {
		db := mustOpen(t)
		const timeout = 100 * time.Millisecond
		start := time.Now()
		other, err := Open(db.Path, Options{LockTimeout: timeout})
		elapsed := time.Since(start)
		if err == nil {
			other.Close()
			t.Fatalf("Open(%q) while open elsewhere = nil error, want ErrLocked", db.Path)
		}
		if !errors.Is(err, ErrLocked) {
			t.Errorf("Open(%q) while open elsewhere = %v, want ErrLocked", db.Path, err)
		}
		// Generous bound: the point is that it gives up rather than hangs.
		if elapsed > 10*time.Second {
			t.Errorf("Open gave up after %v with LockTimeout %v", elapsed, timeout)
		}
		// The first handle is unaffected.
		if err := db.Ping(context.Background()); err != nil {
			t.Errorf("Ping() on the first handle = %v, want nil", err)
		}
	})

	t.Run("ReopenKeepsData", func(t *testing.T) {
		clk := &testClock{now: testEpoch}
		path := filepath.Join(t.TempDir(), "herald.db")
		db, err := Open(path, Options{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		tdb := &testDB{DB: db, Path: path, Clock: clk}
		u, h := mustCreateUser(t, tdb, "ada@example.com")
		m := mustCreateMessage(t, tdb, u.ID, "persisted")
		if err := db.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}

		db2, err := Open(path, Options{Now: clk.Now})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		t.Cleanup(func() {
			if err := db2.Check(); err != nil {
				t.Errorf("Check() = %v", err)
			}
			checkIndexes(t, db2)
			db2.Close()
		})
		_, got, err := db2.Message(context.Background(), model.ByServer(), m.ID)
		if err != nil {
			t.Fatalf("Message(%d) after reopen = %v", m.ID, err)
		}
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("Message(%d) after reopen = %s, want %s", m.ID, g, w)
		}
		au, _, err := db2.Authenticate(context.Background(), h)
		if err != nil {
			t.Fatalf("Authenticate after reopen = %v", err)
		}
		if got, want := au.ID, u.ID; got != want {
			t.Errorf("Authenticate after reopen: user ID = %d, want %d", got, want)
		}
		// Sequences survive too: the next message gets a fresh ID.
		m2, err := db2.CreateMessage(context.Background(), model.ByUser(u.ID), "after reopen")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m2.ID, m.ID+1; got != want {
			t.Errorf("ID after reopen = %d, want %d", got, want)
		}
	})

	t.Run("Directory", func(t *testing.T) {
		dir := t.TempDir()
		db, err := Open(dir, Options{LockTimeout: 100 * time.Millisecond})
		if err == nil {
			db.Close()
			t.Fatalf("Open(%q) on a directory = nil error, want an error", dir)
		}
		if errors.Is(err, ErrLocked) {
			t.Errorf("Open(directory) = %v, want an error other than ErrLocked", err)
		}
	})

	t.Run("NotADatabase", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "junk.db")
		if err := os.WriteFile(path, bytes.Repeat([]byte("not a bolt file "), 1024), 0o600); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, Options{LockTimeout: 100 * time.Millisecond})
		if err == nil {
			db.Close()
			t.Fatalf("Open(%q) on a non-database file = nil error, want an error", path)
		}
	})
}

func TestPing(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		if err := db.Ping(context.Background()); err != nil {
			t.Errorf("Ping() = %v, want nil", err)
		}
	})
	t.Run("Closed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "herald.db")
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(context.Background()); err == nil {
			t.Errorf("Ping() after Close = nil, want an error")
		}
	})
}

func TestCounts(t *testing.T) {
	db := mustOpen(t)
	if got, want := mustCounts(t, db), (Counts{}); got != want {
		t.Errorf("Counts() on a new database = %+v, want %+v", got, want)
	}
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	if _, err := db.CreateToken(ada.ID, tokenHash("ada phone"), time.Hour); err != nil {
		t.Fatal(err)
	}
	m1 := mustCreateMessage(t, db, ada.ID, "one")
	mustCreateMessage(t, db, bob.ID, "two")
	mustCreateMessage(t, db, bob.ID, "three")
	if got, want := mustCounts(t, db), (Counts{Users: 2, Tokens: 3, Messages: 3}); got != want {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
	if _, err := db.DeleteMessage(context.Background(), m1.ID, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(context.Background(), tokenHash("ada phone")); err != nil {
		t.Fatal(err)
	}
	if got, want := mustCounts(t, db), (Counts{Users: 2, Tokens: 2, Messages: 2}); got != want {
		t.Errorf("Counts() after delete and revoke = %+v, want %+v", got, want)
	}
}

// TestConcurrentWrites runs writers in parallel (meaningful under -race) and
// checks IDs stay unique and a contested e-mail goes to exactly one caller.
func TestConcurrentWrites(t *testing.T) {
	db := mustOpen(t)
	owner, _ := mustCreateUser(t, db, "ada@example.com")

	const writers, perWriter = 4, 5
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		ids       []uint64
		conflicts int
		created   int
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				m, err := db.CreateMessage(context.Background(), model.ByUser(owner.ID), fmt.Sprintf("writer %d message %d", w, i))
				if err != nil {
					t.Errorf("CreateMessage = %v", err)
					return
				}
				mu.Lock()
				ids = append(ids, m.ID)
				mu.Unlock()
			}
			u := &model.User{Email: "  Contested@Example.com ", PasswordHash: fakePasswordHash}
			_, err := db.CreateUser(context.Background(), u, tokenHash(fmt.Sprint("contested", w)), time.Hour, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, model.ErrConflict):
				conflicts++
			default:
				t.Errorf("CreateUser(contested) = %v, want nil or ErrConflict", err)
			}
		}()
	}
	wg.Wait()

	slices.Sort(ids)
	if got, want := len(slices.Compact(slices.Clone(ids))), writers*perWriter; got != want {
		t.Errorf("%d distinct message IDs, want %d", got, want)
	}
	if got, want := created, 1; got != want {
		t.Errorf("contested e-mail registered %d times, want %d", got, want)
	}
	if got, want := conflicts, writers-1; got != want {
		t.Errorf("contested e-mail conflicts = %d, want %d", got, want)
	}
	if got, want := mustCounts(t, db), (Counts{Users: 2, Tokens: 2, Messages: writers * perWriter}); got != want {
		t.Errorf("Counts() = %+v, want %+v", got, want)
	}
	checkIndexes(t, db.DB)
}

// ptr returns a pointer to a copy of v, for optional fields.
func ptr[T any](v T) *T { return &v }

// bulkMessages stores n messages, the i-th with contents(i) and owned by
// owners[i%len(owners)], the way CreateMessage does (insertMessage) but
// thousands per transaction, for tests and benchmarks that need a large
// database quickly. clockStep moves the clock before each message.
func bulkMessages(tb testing.TB, db *testDB, owners []uint64, clockStep time.Duration, contents func(i int) string, n int) []*model.Message {
	tb.Helper()
	out := make([]*model.Message, 0, n)
	for start := 0; start < n; start += bulkChunk {
		// Through the committer, like every write: the search index's
		// merger may be writing too.
		chunk := len(out)
		err := db.writes.update(func(tx *bbolt.Tx) error {
			out = out[:chunk] // a retried transaction starts over
			users := make([]*model.User, len(owners))
			for i, id := range owners {
				var err error
				if users[i], err = userByID(tx, id); err != nil {
					return err
				}
			}
			for i := start; i < min(start+bulkChunk, n); i++ {
				if db.Clock != nil {
					db.Clock.Add(clockStep)
				}
				content := contents(i)
				m, err := db.insertMessage(tx, users[i%len(users)], model.Draft{Content: content}, model.SortedTerms(content))
				if err != nil {
					return err
				}
				out = append(out, m)
			}
			return nil
		})
		if err != nil {
			tb.Fatalf("bulkMessages: %v", err)
		}
	}
	return out
}

// bulkChunk is how many messages bulkMessages writes per transaction. bbolt
// splits nodes only at commit, so a transaction that inserts many keys into
// one node pays a memmove that grows with every key: a few hundred
// messages per transaction is the fast middle.
const bulkChunk = 500

// CreateToken issues a token for an existing user, valid for ttl from now,
// without the password check of IssueLoginToken: tests need tokens for
// users they made directly.
// Errors: model.ErrNotFound when the user does not exist.
func (db *DB) CreateToken(userID uint64, hash model.TokenHash, ttl time.Duration) (*model.Token, error) {
	var tok *model.Token
	err := db.writes.update(func(tx *bbolt.Tx) error {
		if _, err := userByID(tx, userID); err != nil {
			return err
		}
		var err error
		tok, err = db.issueToken(tx, hash, userID, db.clock(), ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return tok, nil
}

// mergeAll merges the search index's whole tail into the terms bucket, as
// the background merger would once the tail filled.
func mergeAll(tb testing.TB, db *DB) {
	tb.Helper()
	for {
		merged, err := db.mergeTail(context.Background())
		if err != nil {
			tb.Fatalf("mergeTail() = %v", err)
		}
		if !merged {
			return
		}
	}
}

// testMergePostings is HERALD_TEST_MERGE_POSTINGS, or 0 for the default.
func testMergePostings() int {
	n, _ := strconv.Atoi(os.Getenv("HERALD_TEST_MERGE_POSTINGS"))
	return n
}

// TestGrowingBucketsFillTheirPages: the buckets that grow at their end
// keep their leaves nearly full (bbolt's default split leaves them half
// empty for good), through creates from concurrent writers and a merge of
// the search index's tail.
func TestGrowingBucketsFillTheirPages(t *testing.T) {
	// A merge of a few dozen postings, as CI's second pass makes them,
	// inserts as good as at random: this is about merges of a full tail,
	// which the test makes itself.
	t.Setenv("HERALD_TEST_MERGE_POSTINGS", "")
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	words := strings.Fields("apple river stone cloud ember field grove harbor island juniper kettle lantern meadow")
	create := func(writers, each int) {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(each)))
				for range each {
					var content []string
					for range 6 {
						content = append(content, words[rng.IntN(len(words))])
					}
					owner := ada.ID
					if rng.IntN(2) == 0 {
						owner = bob.ID
					}
					if _, err := db.CreateMessage(context.Background(), model.ByUser(owner), strings.Join(content, " ")+fmt.Sprintf(" w%dn%d", w, rng.IntN(1000))); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	create(16, 150)
	mergeAll(t, db.DB)
	create(16, 100)

	err := db.bolt.View(func(tx *bbolt.Tx) error {
		for _, tc := range []struct {
			buckets [][]byte
			least   float64
		}{{appendOnlyBuckets, 0.9}, {mostlyAppendBuckets, 0.8}} {
			for _, name := range tc.buckets {
				st := tx.Bucket(name).Stats()
				if st.KeyN == 0 {
					t.Logf("%s: not written by this workload", name)
					continue
				}
				if st.LeafPageN < 4 {
					t.Errorf("%s: %d leaves, too few to judge", name, st.LeafPageN)
					continue
				}
				used := float64(st.LeafInuse) / float64(st.LeafAlloc)
				t.Logf("%s: %d leaves, %.0f%% used", name, st.LeafPageN, 100*used)
				if used < tc.least {
					t.Errorf("%s: leaves %.0f%% used, want at least %.0f%%", name, 100*used, 100*tc.least)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
