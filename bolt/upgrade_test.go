package bolt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// testdata/layout5.db was written by the last layout 5 release: ada (user
// 1) and bob (user 2); messages 1–6 merged into the postings, 3 edited and
// 4 (bob's) deleted since; 7–11 in the tail, and a merge of 7–9 stopped,
// as a crash leaves it, after copying the words before "m".
var layout5Owners = map[string][]uint64{
	"ada@example.com": {11, 9, 7, 5, 3, 1},
	"bob@example.com": {10, 8, 6, 2},
}

// ownerPostings lists the IDs under owner's term in the postings bucket.
func ownerPostings(t *testing.T, db *DB, owner uint64) []uint64 {
	t.Helper()
	var ids []uint64
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		prefix := termPrefix([]byte(ownerTerm(owner)))
		c := tx.Bucket(bucketPostings).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var ok bool
			if ids, ok = decodeBlock(ids, btoi(k[len(prefix):]), v); !ok {
				t.Errorf("the block of owner %d at %x is malformed", owner, k)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// upgradeLayout5 runs the layout upgrade alone on a copy of
// testdata/layout5.db, changed first by change if it is not nil: Open's
// merger would finish the interrupted merge meanwhile, and the test wants
// the file as the upgrade leaves it. It returns the copy's path and the
// upgraded file's owner postings.
func upgradeLayout5(t *testing.T, change func(*bbolt.Tx) error) (path string, ada, bob []uint64) {
	t.Helper()
	path = fixtureCopy(t, "layout5.db")
	if change != nil {
		updateFile(t, path, change)
	}
	raw, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	db := &DB{bolt: raw, log: slog.New(slog.DiscardHandler)}
	if err := db.prepareLayout(nil, false); err != nil {
		t.Fatalf("upgrading layout 5: %v", err)
	}
	return path, ownerPostings(t, db, 1), ownerPostings(t, db, 2)
}

// openLayout5 opens a copy of testdata/layout5.db, changed first by change
// if it is not nil, and returns the database and what Open logged.
func openLayout5(t *testing.T, change func(*bbolt.Tx) error) (*testDB, *bytes.Buffer) {
	t.Helper()
	manualMerges(t)
	path := fixtureCopy(t, "layout5.db")
	if change != nil {
		updateFile(t, path, change)
	}
	var log bytes.Buffer
	db, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), TailMergePostings: 1 << 30})
	if err != nil {
		t.Fatalf("Open(layout 5) = %v", err)
	}
	tdb := &testDB{DB: db, Path: path}
	t.Cleanup(func() { _ = tdb.Close() })
	return tdb, &log
}

// checkLayout5Upgraded checks what every upgrade of layout5.db must give:
// the current layout, no owner or time index, every owner's messages found by
// search alone and with words, and a clean consistency check.
func checkLayout5Upgraded(t *testing.T, db *testDB, when string) {
	t.Helper()
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if v := meta.Get(metaLayout); btoi(v) != currentLayout {
			t.Errorf("%s: layout = %d, want %d", when, btoi(v), currentLayout)
		}
		if meta.Get(metaOwnerTermsNext) != nil {
			t.Errorf("%s: meta/%s is still there", when, metaOwnerTermsNext)
		}
		for _, name := range [][]byte{bucketMsgsByOwner, bucketMsgsByTime} {
			if tx.Bucket(name) != nil {
				t.Errorf("%s: bucket %s is still there", when, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for email, want := range layout5Owners {
		if got := pageIDs(mustSearch(t, db, model.SearchQuery{OwnerEmail: email})); !slices.Equal(got, want) {
			t.Errorf("%s: messages of %s = %v, want %v", when, email, got, want)
		}
	}
	for _, tt := range []struct {
		owner, q string
		want     []uint64
	}{
		{"ada@example.com", "river", []uint64{5}},
		{"bob@example.com", "river", []uint64{10, 8, 2}},
		{"ada@example.com", "apple", []uint64{7}},
		{"bob@example.com", "apple", []uint64{6, 2}},
		{"ada@example.com", "hello", []uint64{11, 1}},
		{"bob@example.com", "hello", []uint64{6}},
		{"ada@example.com", "tail zebra", []uint64{9}},
		{"bob@example.com", "deleted", nil},
	} {
		q := model.SearchQuery{OwnerEmail: tt.owner, Terms: model.Terms(tt.q)}
		if got := pageIDs(mustSearch(t, db, q)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: search %q by %s = %v, want %v", when, tt.q, tt.owner, got, tt.want)
		}
	}
	checkIndexes(t, db.DB)
}

// TestUpgradeFromLayout5 opens a file written by the release with owner
// and time indexes and checks it is upgraded once, with a log line; that
// the owner postings went where the words' are, the interrupted merge's
// share included; and that the merge then finishes.
func TestUpgradeFromLayout5(t *testing.T) {
	// Merged through 6, and the merge of 7–9 had copied the terms before
	// "m", owner terms among them; 10 and 11 are in the tail only.
	_, ada, bob := upgradeLayout5(t, nil)
	if want := []uint64{1, 3, 5, 7, 9}; !slices.Equal(ada, want) {
		t.Errorf("ada's postings = %v, want %v", ada, want)
	}
	if want := []uint64{2, 6, 8}; !slices.Equal(bob, want) {
		t.Errorf("bob's postings = %v, want %v", bob, want)
	}

	db, log := openLayout5(t, nil)
	if n := strings.Count(log.String(), "database upgraded to layout 6"); n != 1 || strings.Contains(log.String(), "upgraded to layout 5") {
		t.Errorf("log = %q, want one line for the upgrade from 5 to 6", log.String())
	}
	for id := uint64(7); id <= 11; id++ {
		m := mustMessage(t, db, id)
		if got := termEntries(t, db, id); !slices.Contains(got, ownerTerm(m.OwnerID)) {
			t.Errorf("message %d's tail record = %q, want its owner's term", id, got)
		}
	}
	checkLayout5Upgraded(t, db, "after the upgrade")

	mergeAll(t, db.DB)
	if st := termsStateOf(t, db.DB); st.merged != 11 || st.mergingTo != 0 {
		t.Errorf("after merging: %+v, want everything through message 11 merged", st)
	}
	checkLayout5Upgraded(t, db, "after the merge")

	u, _, err := db.Authenticate(context.Background(), tokenHash("bob-token"))
	if err != nil {
		t.Fatalf("Authenticate(bob's old token) = %v", err)
	}
	m := mustCreateMessage(t, db, u.ID, "bob again")
	if got := pageIDs(mustSearch(t, db, model.SearchQuery{OwnerEmail: "bob@example.com", Limit: 2})); !slices.Equal(got, []uint64{m.ID, 10}) {
		t.Errorf("bob's newest two after a new message = %v, want [%d 10]", got, m.ID)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	log.Reset()
	reopened, err := Open(db.Path, Options{Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	db.DB = reopened
	if log.Len() != 0 {
		t.Errorf("second open logged %q, want nothing", log.String())
	}
}

// TestUpgradeFromLayout5Resumed: an upgrade stopped by a crash, in either
// of the states it can leave, goes on at the next Open and gives what an
// upgrade in one go gives.
func TestUpgradeFromLayout5Resumed(t *testing.T) {
	tests := []struct {
		name   string
		change func(*bbolt.Tx) error
	}{
		// Its first transaction raised the layout, and nothing more
		// committed.
		{"BeforeTheFirstChunk", func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(metaOwnerTermsNext, itob(1)); err != nil {
				return err
			}
			return meta.Put(metaLayout, itob(6))
		}},
		// As above, with owner postings and tail records already holding
		// owner terms: a chunk must be safe to do twice.
		{"ChunkDoneTwice", func(tx *bbolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if err := meta.Put(metaOwnerTermsNext, itob(3)); err != nil {
				return err
			}
			if err := meta.Put(metaLayout, itob(6)); err != nil {
				return err
			}
			postings := tx.Bucket(bucketPostings)
			if err := termBlocks(postings, []byte(ownerTerm(1))).add([]uint64{1, 3, 5}); err != nil {
				return err
			}
			if err := termBlocks(postings, []byte(ownerTerm(2))).add([]uint64{2, 6}); err != nil {
				return err
			}
			return addOwnerToTailRecord(tx.Bucket(bucketTermsTail), 10, ownerTerm(2))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, log := openLayout5(t, tt.change)
			if !strings.Contains(log.String(), "database upgraded to layout 6") {
				t.Errorf("log = %q, want the upgrade to layout 6 finished", log.String())
			}
			checkLayout5Upgraded(t, db, "after the upgrade")
			mergeAll(t, db.DB)
			checkLayout5Upgraded(t, db, "after the merge")
		})
	}
}

// TestUpgradeFromLayout5BeforeAMergeCopiedAnything: a merge recorded but
// not yet copying (no next term) has copied no owner term either, so the
// upgrade leaves the merged messages' owners to the tail and the merge.
func TestUpgradeFromLayout5BeforeAMergeCopiedAnything(t *testing.T) {
	notCopying := func(tx *bbolt.Tx) error {
		postings := tx.Bucket(bucketPostings)
		if err := termBlocks(postings, []byte("apple")).remove(7); err != nil {
			return err
		}
		if err := termBlocks(postings, []byte("another")).remove(8); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaTermsMerging, mergingValue(9, nil))
	}
	_, ada, bob := upgradeLayout5(t, notCopying)
	if want := []uint64{1, 3, 5}; !slices.Equal(ada, want) {
		t.Errorf("ada's postings = %v, want %v", ada, want)
	}
	if want := []uint64{2, 6}; !slices.Equal(bob, want) {
		t.Errorf("bob's postings = %v, want %v", bob, want)
	}
	db, _ := openLayout5(t, notCopying)
	checkLayout5Upgraded(t, db, "after the upgrade")
	mergeAll(t, db.DB)
	if got, want := ownerPostings(t, db.DB, 1), []uint64{1, 3, 5, 7, 9, 11}; !slices.Equal(got, want) {
		t.Errorf("ada's postings after the merge = %v, want %v", got, want)
	}
	checkLayout5Upgraded(t, db, "after the merge")
}

// TestCheckOnAFileNotYetUpgraded: `herald check` on a file of an older
// layout, or one whose upgrade a crash interrupted, says so in one line
// rather than listing every message as damaged by rules the file does not
// follow yet.
func TestCheckOnAFileNotYetUpgraded(t *testing.T) {
	cases := []struct {
		name, want string
		damage     func(meta *bbolt.Bucket) error
	}{
		{"layout 5", fmt.Sprintf("meta/layout is 0000000000000005, want %d", currentLayout), func(*bbolt.Bucket) error { return nil }},
		{"owner terms interrupted", "meta/owner_terms_next is set", func(meta *bbolt.Bucket) error {
			if err := meta.Put(metaOwnerTermsNext, itob(1)); err != nil {
				return err
			}
			return meta.Put(metaLayout, itob(currentLayout))
		}},
		{"index build interrupted", "meta/upgrade_next is set", func(meta *bbolt.Bucket) error {
			if err := meta.Put(metaUpgradeNext, itob(1)); err != nil {
				return err
			}
			return meta.Put(metaLayout, itob(currentLayout))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := fixtureCopy(t, "layout5.db")
			updateFile(t, path, func(tx *bbolt.Tx) error { return tc.damage(tx.Bucket(bucketMeta)) })
			snap, err := OpenSnapshot(path)
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Close()
			problems, err := snap.Check()
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != 1 || !strings.Contains(problems[0], tc.want) || !strings.Contains(problems[0], "start herald once") {
				t.Errorf("Check = %q, want one problem saying %q and to start herald once", problems, tc.want)
			}
		})
	}
}

// testdata/layout6.db was written through the API of the last layout 6
// release, started with --admins owner@example.com: ada (user 1), bob (2),
// owner (3) and carol (4) registered; ada posted 1 and 4, bob 2 and 6,
// owner 3, carol 5; ada edited 1, bob deleted 6, carol deleted her account
// (and so message 5). Ada logged in once more, bob logged out. The
// tokens below were those the release handed out, valid for 30 days from
// layout6Written.
var (
	layout6Written = time.Date(2026, 11, 25, 13, 50, 12, 0, time.UTC)
	layout6Tokens  = map[string]string{
		"ada registration": "herald_Csgl9FA45wTmrhgj8pIxBoP8HFg20Pkbjhat5TXMFxspKZU1A",
		"ada login":        "herald_Mqig24Sk9ohgm-7TTYmrs_BSggeIS2E-pRhOJosIWNotToMMQ",
		"owner":            "herald_ToIyE-E_RnZ7ojicHnU_YrNpY-xWs_4Tm5uePZr2ZgQjFfy2w",
	}
)

// TestUpgradeFromLayout6: a file of the last layout 6 release opens as the
// current layout, upgraded once and logged, with everything in it intact:
// accounts, tokens, messages, the search index and the change log. The
// administrators the release was started with (--admins) keep the role,
// now stored with their accounts, and the setting is refused from then on.
// From then on a revocation is in the log.
func TestUpgradeFromLayout6(t *testing.T) {
	ctx := context.Background()
	path := fixtureCopy(t, "layout6.db")
	clock := &testClock{now: layout6Written.Add(time.Hour)}
	var log bytes.Buffer
	openWith := func(legacyAdmins ...string) (*DB, error) {
		t.Helper()
		log.Reset()
		return Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil)), LegacyAdmins: legacyAdmins})
	}
	open := func() *DB {
		t.Helper()
		db, err := openWith()
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db, err := openWith("Owner@Example.com", "nobody@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got := log.String(); strings.Count(got, "upgraded to layout 7") != 1 ||
		!strings.Contains(got, "made=owner@example.com") || !strings.Contains(got, `"without an account"=nobody@example.com`) {
		t.Errorf("first open logged %q, want the upgrade to layout 7 once, with owner made an administrator and nobody without an account", got)
	}
	checkIndexes(t, db)
	owner, err := db.UserByEmail(ctx, "owner@example.com")
	if err != nil || !slices.Equal(owner.Roles, []string{model.RoleUser, model.RoleAdmin}) {
		t.Errorf("owner after the upgrade: %+v, %v; want an administrator", owner, err)
	}
	if ada, err := db.UserByEmail(ctx, "ada@example.com"); err != nil || !slices.Equal(ada.Roles, []string{model.RoleUser}) || ada.LastSeenAt.IsZero() {
		t.Errorf("ada after the upgrade: %+v, %v; want a user, last seen when her tokens were", ada, err)
	}
	page, err := db.AuditLog(ctx, model.ByServer(), model.AuditQuery{})
	if err != nil || len(page.Entries) != 1 || page.Entries[0].Action != model.AuditGrantAdmin || page.Entries[0].UserEmail != "owner@example.com" || page.Entries[0].ActorID != 0 {
		t.Errorf("audit log after the upgrade: %+v, %v; want owner's grant, on the server's machine", page, err)
	}
	for name, token := range layout6Tokens {
		u, _, err := db.Authenticate(ctx, sha256.Sum256([]byte(token)))
		if err != nil {
			t.Fatalf("%s's token: %v", name, err)
		}
		if want := strings.Fields(name)[0] + "@example.com"; u.Email != want {
			t.Errorf("%s's token is %s's", name, u.Email)
		}
	}
	if _, err := db.UserByEmail(ctx, "carol@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("carol, who deleted her account: %v", err)
	}
	_, msgs, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pageIDs(msgs), []uint64{4, 3, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("messages %v, want %v", got, want)
	}
	_, msgs, err = db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("edited"), OwnerEmail: "ada@example.com"})
	if err != nil || !slices.Equal(pageIDs(msgs), []uint64{1}) {
		t.Errorf("search edited by ada = %v, %v; want message 1", pageIDs(msgs), err)
	}
	head, _, _ := db.ChangeHead(ctx)
	if head != 9 { // six creates, an edit, two deletions
		t.Errorf("change log head %d, want the 9 changes of the old release", head)
	}
	if err := db.RevokeToken(ctx, sha256.Sum256([]byte(layout6Tokens["ada login"]))); err != nil {
		t.Fatal(err)
	}
	chs, _, err := db.ChangesAfter(ctx, head, 10)
	if err != nil || len(chs) != 1 || chs[0].Kind != model.TokensRevoked || chs[0].UserID != 1 {
		t.Errorf("after a logout the log has %v, %v; want ada's revocation", changeStrings(chs), err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := openWith("owner@example.com"); !errors.Is(err, ErrLegacyAdmins) {
		t.Fatalf("opening the upgraded file with --admins: %v, want ErrLegacyAdmins", err)
	}
	db = open()
	defer db.Close()
	if got := log.String(); got != "" {
		t.Errorf("second open logged %q, want nothing", got)
	}
	if chs, _, err := db.ChangesAfter(ctx, head, 10); err != nil || len(chs) != 1 || chs[0].UserID != 1 {
		t.Errorf("the revocation read back from disk: %v, %v", changeStrings(chs), err)
	}
}

// TestUpgradeFromLayout6Resumed: an upgrade to layout 7 cut short after
// its first transaction (the layout raised, no user rewritten yet) is
// reported by the check as a file to open once (the layout is behind the
// current one, and the upgrade unfinished), and finished by the next
// Open.
func TestUpgradeFromLayout6Resumed(t *testing.T) {
	path := fixtureCopy(t, "layout6.db")
	updateFile(t, path, func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaUsersNext, itob(2)); err != nil { // user 1 done, the rest not
			return err
		}
		users := tx.Bucket(bucketUsers)
		u, err := decodeUserV1(1, users.Get(itob(1)))
		if err != nil {
			return err
		}
		if err := users.Put(itob(1), encodeUser(u)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(7))
	})
	snap, err := OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := snap.Check()
	snap.Close()
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "start herald once") {
		t.Errorf("check mid-upgrade = %q, %v; want one problem saying to start herald once", problems, err)
	}
	var log bytes.Buffer
	db, err := Open(path, Options{Now: (&testClock{now: layout6Written}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if !strings.Contains(log.String(), "upgraded to layout 7") {
		t.Errorf("the resumed upgrade logged %q", log.String())
	}
	checkIndexes(t, db)
	for _, email := range []string{"ada@example.com", "bob@example.com", "owner@example.com"} {
		if _, err := db.UserByEmail(context.Background(), email); err != nil {
			t.Errorf("%s after the resumed upgrade: %v", email, err)
		}
	}
}

// In testdata/layout7.db (see layout7Written) owner (user 1, an
// administrator), ada (2), bob (3), root@example.com (4) and its
// look-alike (5), carol (6) and dave (7) registered; ada posted 1 and 9,
// bob 2 and 8, root 3, the look-alike 4, carol 5, dave 6 and 7. Ada then
// edited 1 (away from "first draft secret"), bob deleted 8, the
// administrator removed 4 and all of dave's messages, and carol deleted her
// account. layout7Gone is what the release's log and any copy of its file
// held of what was deleted or edited away.
var layout7Gone = []string{"first draft secret", "i am root too", "carol private words", "dave spam one", "dave spam two", "bob regrets this"}

// TestUpgradeFromLayout7ScrubsChangeLog: a file of the last layout 7
// release opens as the current layout, upgraded once and logged; its
// change log then holds nothing deleted or edited away, so neither does a
// compacted copy, and every change of it reads as the message is now; what
// is left reads as before.
func TestUpgradeFromLayout7ScrubsChangeLog(t *testing.T) {
	ctx := context.Background()
	path := fixtureCopy(t, "layout7.db")
	if raw, err := os.ReadFile(path); err != nil || !bytes.Contains(raw, []byte(layout7Gone[0])) {
		t.Fatalf("the fixture does not hold %q (%v): the test would prove nothing", layout7Gone[0], err)
	}
	clock := &testClock{now: layout7Written.Add(time.Hour)}
	var log bytes.Buffer
	open := func() *DB {
		t.Helper()
		log.Reset()
		db, err := Open(path, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	db := open()
	if got := log.String(); strings.Count(got, "upgraded to layout 8") != 1 || !strings.Contains(got, "changes=16") || !strings.Contains(got, "scrubbed=6") {
		t.Errorf("first open logged %q, want the upgrade to layout 8 once, with 16 changes and 6 scrubbed", got)
	}
	checkIndexes(t, db)
	chs, head, err := db.ChangesAfter(ctx, 0, 100)
	if err != nil || head != 16 {
		t.Fatalf("ChangesAfter(0) = %d changes, head %d, %v", len(chs), head, err)
	}
	want := []string{
		`1 message.created #1 ada@example.com "hello from ada, final version" scrubbed`,
		`2 message.created #2 bob@example.com "bob says hello"`,
		`3 message.created #3 root@example.com "root is here"`,
		`4 message.created #4 ｒoot@example.com "" scrubbed gone`,
		`5 message.created #5 carol@example.com "" scrubbed gone`,
		`6 message.created #6 dave@example.com "" scrubbed gone`,
		`7 message.created #7 dave@example.com "" scrubbed gone`,
		`8 message.created #8 bob@example.com "" scrubbed gone`,
		`9 message.created #9 ada@example.com "ada second message"`,
		`10 message.updated #1 ada@example.com "hello from ada, final version"`,
		`11 message.deleted #8 bob@example.com ""`,
		`12 message.deleted #4 ｒoot@example.com ""`,
		`13 message.deleted #7 dave@example.com ""`,
		`14 message.deleted #6 dave@example.com ""`,
		`15 tokens.revoked of account 6`,
		`16 message.deleted #5 carol@example.com ""`,
	}
	if got := changeStrings(chs); !equalStrings(got, want) {
		t.Errorf("log after the upgrade =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, msgs, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{})
	if err != nil || !slices.Equal(pageIDs(msgs), []uint64{9, 3, 2, 1}) {
		t.Errorf("messages after the upgrade: %v, %v; want 9, 3, 2, 1", pageIDs(msgs), err)
	}
	// The log goes on scrubbing.
	if _, err := db.UpdateMessage(ctx, 2, model.ByUser(3), model.MessageUpdate{Content: ptr("bob says goodbye")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	if got := log.String(); got != "" {
		t.Errorf("second open logged %q, want nothing", got)
	}
	checkIndexes(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	copied := compactedCopy(t, path)
	for _, gone := range append(layout7Gone, "bob says hello") {
		if bytes.Contains(copied, []byte(gone)) {
			t.Errorf("a compacted copy of the upgraded file holds %q", gone)
		}
	}
	for _, kept := range []string{"hello from ada, final version", "bob says goodbye", "root is here"} {
		if !bytes.Contains(copied, []byte(kept)) {
			t.Errorf("a compacted copy of the upgraded file lacks %q, a message that is there", kept)
		}
	}
}

// TestUpgradeFromLayout7Resumed: an upgrade to layout 8 cut short after
// its first transaction (the layout raised, no change rewritten yet) is
// reported by the check as unfinished, and finished by the next Open.
func TestUpgradeFromLayout7Resumed(t *testing.T) {
	path := fixtureCopy(t, "layout7.db")
	updateFile(t, path, func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaChangesNext, itob(1)); err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketChangesByMessage); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(8))
	})
	snap, err := OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	problems, err := snap.Check()
	snap.Close()
	if err != nil || len(problems) != 1 || !strings.Contains(problems[0], "changes_next is set") {
		t.Errorf("check mid-upgrade = %q, %v; want one problem saying the upgrade was interrupted", problems, err)
	}
	var log bytes.Buffer
	db, err := Open(path, Options{Now: (&testClock{now: layout7Written}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "upgraded to layout 8") {
		t.Errorf("the resumed upgrade logged %q", log.String())
	}
	checkIndexes(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	copied := compactedCopy(t, path)
	for _, gone := range layout7Gone {
		if bytes.Contains(copied, []byte(gone)) {
			t.Errorf("a compacted copy of the file holds %q", gone)
		}
	}
}

// TestUpgradeFromLayout7ResumedMidLog: an upgrade to layout 8 cut short
// half way through rewriting the change log (the first half of its
// changes rewritten in version 2 and indexed, the rest still version 1) is
// finished by the next Open, with the log and its index as a whole upgrade
// leaves them.
func TestUpgradeFromLayout7ResumedMidLog(t *testing.T) {
	ctx := context.Background()
	whole := fixtureCopy(t, "layout7.db")
	db, err := Open(whole, Options{Now: (&testClock{now: layout7Written}).Now})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := db.ChangesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	const half = 8                      // of the fixture's 16 changes
	upgraded := make(map[string][]byte) // the whole upgrade's records and index entries up to half
	readFile(t, whole, func(tx *bbolt.Tx) error {
		for seq := uint64(1); seq <= half; seq++ {
			upgraded["c"+string(itob(seq))] = bytes.Clone(tx.Bucket(bucketChanges).Get(itob(seq)))
		}
		return tx.Bucket(bucketChangesByMessage).ForEach(func(k, v []byte) error {
			if btoi(v) <= half {
				upgraded["m"+string(k)] = bytes.Clone(v)
			}
			return nil
		})
	})

	path := fixtureCopy(t, "layout7.db")
	updateFile(t, path, func(tx *bbolt.Tx) error {
		byMessage, err := tx.CreateBucketIfNotExists(bucketChangesByMessage)
		if err != nil {
			return err
		}
		for k, v := range upgraded {
			b := tx.Bucket(bucketChanges)
			if k[0] == 'm' {
				b = byMessage
			}
			if err := b.Put([]byte(k[1:]), v); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(metaChangesNext, itob(half+1)); err != nil {
			return err
		}
		return meta.Put(metaLayout, itob(8))
	})
	var log bytes.Buffer
	db, err = Open(path, Options{Now: (&testClock{now: layout7Written}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := log.String(); !strings.Contains(got, "upgraded to layout 8") || !strings.Contains(got, "changes=8") {
		t.Errorf("the resumed upgrade logged %q, want the upgrade to layout 8, with the 8 changes left", got)
	}
	checkIndexes(t, db)
	got, _, err := db.ChangesAfter(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !equalStrings(changeStrings(got), changeStrings(want)) {
		t.Errorf("log after a resumed upgrade:\n%s\nwant, as after a whole one:\n%s",
			strings.Join(changeStrings(got), "\n"), strings.Join(changeStrings(want), "\n"))
	}
}

// readFile reads the file at path in one bbolt transaction, below
// Herald's Open.
func readFile(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	raw, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(raw.View(fn), raw.Close()); err != nil {
		t.Fatal(err)
	}
}

// compactedCopy returns the bytes of a compacted copy of the file at path,
// as herald compact writes it.
func compactedCopy(t *testing.T, path string) []byte {
	t.Helper()
	snap, err := OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	out := filepath.Join(t.TempDir(), "compacted.db")
	if err := snap.Compact(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestUpgradeFromLayout1 opens a file written by the first release (see
// testdata/layout1.db) and checks that it is upgraded once, with a log line,
// and that everything in it is then found through the new indexes.
func TestUpgradeFromLayout1(t *testing.T) {
	path := layout1Copy(t)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	db, err := Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatalf("Open(layout 1) = %v", err)
	}
	if !strings.Contains(log.String(), "upgrading database layout 1 to 2") || !strings.Contains(log.String(), "messages_indexed=5") {
		t.Errorf("log = %q, want an upgrade line and 5 messages indexed", log.String())
	}
	tdb := &testDB{DB: db, Path: path}
	checkIndexes(t, db)

	// Users were re-encoded and still authenticate with their old tokens.
	u, _, err := db.Authenticate(context.Background(), tokenHash("ada-2"))
	if err != nil || u.Email != "Ada@Example.com" || !u.HasRole(model.RoleUser) {
		t.Fatalf("Authenticate(old token) = %+v, %v", u, err)
	}
	search := func(q string) []string {
		p := mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(q)})
		var out []string
		for _, m := range p.Messages {
			out = append(out, m.Content)
		}
		return out
	}
	for q, want := range map[string][]string{
		"hello":    {"Bob says hello too", "hello world from Ada"},
		"café":     {"cafe\u0301 au lait, NFD spelling"},
		"edited":   {"edited text after the change"},
		"original": nil,
		"deleted":  nil,
		"日本語":      {"Ünïcödé 日本語 mixed words"},
	} {
		if got := search(q); !slices.Equal(got, want) {
			t.Errorf("search %q after upgrade = %q, want %q", q, got, want)
		}
	}
	if p := mustSearch(t, tdb, model.SearchQuery{OwnerEmail: "bob@example.org"}); len(p.Messages) != 2 {
		t.Errorf("owner search after upgrade = %d messages, want 2", len(p.Messages))
	}
	// New writes go on from the old sequences.
	m := mustCreateMessage(t, tdb, u.ID, "after the upgrade")
	if got, want := m.ID, uint64(7); got != want {
		t.Errorf("first new message ID = %d, want %d", got, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The second open finds layout 2 and does nothing.
	log.Reset()
	db, err = Open(path, Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if log.Len() != 0 {
		t.Errorf("second open logged %q, want nothing", log.String())
	}
	checkIndexes(t, db)
}

// TestUpgradeFromLayout1BegunByAnOlderRelease finishes an upgrade from
// layout 1 that the previous release (layout 4, a key per posting in the
// terms bucket) was cut short in after two messages. Finishing it into
// the postings bucket left the first two in terms, which the upgrade to
// layout 5 then packed over the rest: every word of the others was lost.
func TestUpgradeFromLayout1BegunByAnOlderRelease(t *testing.T) {
	path := layout1Copy(t)
	updateFile(t, path, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMsgsByOwner, bucketMsgsByTime, bucketTerms, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		c := tx.Bucket(bucketMessages).Cursor()
		k, v := c.First()
		for range 2 {
			m, err := decodeMessage(btoi(k), v)
			if err != nil {
				return err
			}
			if err := indexOwnerAndTime(tx, m); err != nil {
				return err
			}
			for _, term := range model.SortedTerms(m.Content) {
				if err := tx.Bucket(bucketTerms).Put(postingKey([]byte(term), m.ID), nil); err != nil {
					return err
				}
			}
			k, v = c.Next()
		}
		return tx.Bucket(bucketMeta).Put(metaUpgradeNext, bytes.Clone(k))
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkIndexes(t, db)
	tdb := &testDB{DB: db, Path: path}
	for q, want := range map[string]int{"hello": 2, "café": 1, "edited": 1, "日本語": 1} {
		if got := len(mustSearch(t, tdb, model.SearchQuery{Terms: model.Terms(q)}).Messages); got != want {
			t.Errorf("search %q after the upgrade: %d messages, want %d", q, got, want)
		}
	}
}

func TestOpenRefusesNewerLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "future.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaLayout, itob(currentLayout+1))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "newer Herald") {
		t.Errorf("Open(layout %d) = %v, want an error naming a newer Herald", currentLayout+1, err)
	}
}

// TestUpgradeClampsCreationTimes: a layout-1 file whose clock stepped back
// (a message created "before" an older one) is upgraded so that creation
// times never fall as IDs rise, and time-bounded search finds every
// message; until then, CheckInvariants reports it.
func TestUpgradeClampsCreationTimes(t *testing.T) {
	path := layout1Copy(t)
	// model.Message 3 of the fixture goes back an hour, as a clock step would.
	var second time.Time
	updateFile(t, path, func(tx *bbolt.Tx) error {
		msgs := tx.Bucket(bucketMessages)
		m2, err := decodeMessage(2, msgs.Get(itob(2)))
		if err != nil {
			return err
		}
		second = m2.CreatedAt
		m3, err := decodeMessage(3, msgs.Get(itob(3)))
		if err != nil {
			return err
		}
		m3.CreatedAt = m3.CreatedAt.Add(-time.Hour)
		return msgs.Put(itob(3), encodeMessage(m3))
	})
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkIndexes(t, db)
	_, m3, err := db.Message(context.Background(), model.ByServer(), 3)
	if err != nil || m3.CreatedAt.Before(second) {
		t.Fatalf("message 3 after the upgrade: %v, %v; want created no earlier than message 2 (%v)", m3, err, second)
	}
	_, page, err := db.SearchMessages(context.Background(), model.ByServer(), model.SearchQuery{Since: &second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pageIDs(page), 3) {
		t.Errorf("since message 2 = %v, want message 3 among them", pageIDs(page))
	}
	// And the checker sees a time that falls.
	if err := db.bolt.Update(func(tx *bbolt.Tx) error {
		m3.CreatedAt = second.Add(-time.Minute)
		return tx.Bucket(bucketMessages).Put(itob(3), encodeMessage(m3))
	}); err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckInvariants()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, "message 3: created at") }) {
		t.Errorf("CheckInvariants() = %q, want the falling creation time reported", problems)
	}
}

// layout1Copy copies testdata/layout1.db, written by the first release, to
// a temporary file a test may upgrade or damage.
func layout1Copy(t *testing.T) string { return fixtureCopy(t, "layout1.db") }

// fixtureCopy copies testdata/name to a temporary file a test may change.
func fixtureCopy(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// updateFile changes the file at path in one bbolt transaction, below
// Herald's Open: to write what an older release or a crash left.
func updateFile(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	raw, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(raw.Update(fn), raw.Close()); err != nil {
		t.Fatal(err)
	}
}

// issueTokenRecord stores t as it is, public ID included, for tests that
// need a record issueToken would never write.
func issueTokenRecord(tx *bbolt.Tx, t *model.Token) error {
	if err := tx.Bucket(bucketTokens).Put(t.Hash[:], encodeToken(t)); err != nil {
		return err
	}
	return tx.Bucket(bucketTokensByUser).Put(compositeKey(t.UserID, t.Hash[:]), nil)
}

// TestUpgradeGivesHandles: the accounts of a file written before handles
// get, once and logged, the handles they would get registering now, in the
// order they were made, each named by it; a second Open changes nothing.
func TestUpgradeGivesHandles(t *testing.T) {
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
	db := open()
	if got := log.String(); strings.Count(got, "upgraded to layout 10") != 1 || !strings.Contains(got, "users=6") {
		t.Errorf("first open logged %q, want the upgrade to layout 10 once, for the 6 accounts", got)
	}
	// Account 5's e-mail starts with a fullwidth r, which a handle cannot
	// hold; carol (6) deleted her account before the upgrade.
	want := map[uint64]string{1: "owner", 2: "ada", 3: "bob", 4: "root", 5: "oot", 7: "dave"}
	for id, handle := range want {
		u, err := db.UserByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Handle != handle || u.Name != handle {
			t.Errorf("account %d: handle %q, name %q; want %q for both", id, u.Handle, u.Name, handle)
		}
	}
	checkIndexes(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open()
	defer db.Close()
	if got := log.String(); strings.Contains(got, "upgrad") {
		t.Errorf("second open logged %q, want no upgrade", got)
	}
}

// TestUpgradeFromLayout8: a file of layout 8, which has neither the
// settings nor the certificates bucket, opens as layout 9, once and
// logged, with both buckets; the landed release, which reads up to layout
// 8, then refuses it rather than misread its audit records and change log.
func TestUpgradeFromLayout8(t *testing.T) {
	path := filepath.Join(t.TempDir(), "layout8.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	updateFile(t, path, func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketSettings, bucketCerts} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return tx.Bucket(bucketMeta).Put(metaLayout, itob(8))
	})
	var log bytes.Buffer
	for i := range 2 {
		log.Reset()
		db, err := Open(path, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		checkIndexes(t, db)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Count(log.String(), "upgraded to layout 9"), 1-i; got != want {
			t.Errorf("open %d logged %q, want the upgrade %d times", i+1, log.String(), want)
		}
	}
	snap, err := OpenSnapshot(path)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	err = snap.bolt.View(func(tx *bbolt.Tx) error {
		if got := btoi(tx.Bucket(bucketMeta).Get(metaLayout)); got != currentLayout {
			t.Errorf("layout %d after the upgrade, want %d", got, currentLayout)
		}
		for _, name := range [][]byte{bucketSettings, bucketCerts} {
			if tx.Bucket(name) == nil {
				t.Errorf("bucket %s missing after the upgrade", name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testdata/layout9.db was written through the API of the landed release
// of layout 9 (commit 81d0320) on layout9Written: ada@example.com (1),
// bob@example.com (2), Zoë_99@example.com (3), 1st@example.com (4),
// x@example.com (5) and ada@example.org (6) registered, with the password
// "password " and their e-mail; ada posted 1 ("hello @bob, from before
// handles") and 3 (edited to "ada final words"), bob 2 ("bob answers
// @ada") and 4, which he deleted.
var layout9Written = time.Date(2026, 11, 28, 7, 57, 34, 0, time.UTC)

// TestUpgradeFromLayout9: a file of the landed layout 9 release opens as
// the current layout, once and logged: every account has the handle it
// would get registering now, named by it; its messages read as they were,
// answering nothing, answered by nothing and mentioning nobody (mentions
// are resolved when a message is written, and there were no handles then);
// a reply, a mention and a notification then work on it, and the check
// finds nothing wrong.
func TestUpgradeFromLayout9(t *testing.T) {
	ctx := context.Background()
	path := fixtureCopy(t, "layout9.db")
	var log bytes.Buffer
	db, err := Open(path, Options{Now: (&testClock{now: layout9Written.Add(time.Hour)}).Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := log.String(); strings.Count(got, "upgraded to layout 10") != 1 || !strings.Contains(got, "users=6") {
		t.Errorf("the open logged %q, want the upgrade to layout 10 once, for the 6 accounts", got)
	}
	for id, handle := range map[uint64]string{1: "ada", 2: "bob", 3: "zo_99", 4: "st", 5: "user", 6: "ada2"} {
		u, err := db.UserByID(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if u.Handle != handle || u.Name != handle {
			t.Errorf("account %d: handle %q, name %q; want %q for both", id, u.Handle, u.Name, handle)
		}
	}
	_, page, err := db.SearchMessages(ctx, model.ByUser(1), model.SearchQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range page.Messages {
		got = append(got, fmt.Sprintf("%d %s @%s %q replyTo=%d replies=%d mentions=%d", m.ID, m.OwnerEmail, m.OwnerHandle, m.Content, m.ReplyTo, m.Replies, len(m.Mentions)))
	}
	want := []string{
		`3 ada@example.com @ada "ada final words" replyTo=0 replies=0 mentions=0`,
		`2 bob@example.com @bob "bob answers @ada" replyTo=0 replies=0 mentions=0`,
		`1 ada@example.com @ada "hello @bob, from before handles" replyTo=0 replies=0 mentions=0`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages after the upgrade:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	reply, err := db.PostMessage(ctx, model.ByUser(2), model.Draft{Content: "@ada yes, and @zo_99 too", ReplyTo: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reply.ID != 5 || len(reply.Mentions) != 2 {
		t.Errorf("a reply on the upgraded file = %+v, want ID 5 (4 was used) and two mentions", reply)
	}
	for userID, want := range map[uint64]int{1: 1, 3: 1, 2: 0} {
		p, err := db.Notifications(ctx, model.ByUser(userID), model.NotificationQuery{})
		if err != nil || p.Unread != want {
			t.Errorf("account %d's notifications = %+v, %v; want %d unread", userID, p, err, want)
		}
	}
	checkIndexes(t, db)
}
