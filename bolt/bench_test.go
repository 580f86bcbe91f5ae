package bolt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"herald/model"
)

// benchWords is the vocabulary of generated messages; "zeppelin" is placed
// by hand so a search for it matches rarely.
var benchWords = []string{
	"lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing",
	"elit", "sed", "do", "eiusmod", "tempor", "incididunt", "ut", "labore",
	"et", "dolore", "magna", "aliqua", "Ünïcödé", "日本語", "hello", "world",
}

// benchContent builds a deterministic ~30-word message; every 1000th one
// mentions the rare word.
func benchContent(i int) string {
	b := make([]byte, 0, 256)
	for w := range 30 {
		if w > 0 {
			b = append(b, ' ')
		}
		b = append(b, benchWords[(i*7+w*13)%len(benchWords)]...)
	}
	if i%1000 == 0 {
		b = append(b, " zeppelin"...)
	}
	return string(b)
}

// seedMessages stores n benchContent messages spread over owners users,
// thousands per transaction, and returns the users.
func seedMessages(b *testing.B, db *testDB, owners, n int) []*model.User {
	b.Helper()
	users := make([]*model.User, owners)
	for i := range users {
		users[i], _ = mustCreateUser(b, db, fmt.Sprintf("user%d@example.com", i))
	}
	ids := make([]uint64, owners)
	for i, u := range users {
		ids[i] = u.ID
	}
	bulkMessages(b, db, ids, time.Second, benchContent, n)
	return users
}

func BenchmarkCreateMessage(b *testing.B) {
	db := mustOpen(b)
	u, _ := mustCreateUser(b, db, "ada@example.com")
	content := benchContent(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), content); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateMessageMentioningFive is BenchmarkCreateMessage with
// five people named in the content, each notified, their oldest
// notification dropped once they keep model.MaxNotifications: compare
// the two (issue: at most 25% more).
func BenchmarkCreateMessageMentioningFive(b *testing.B) {
	db := mustOpen(b)
	u, _ := mustCreateUser(b, db, "ada@example.com")
	content := benchContent(1)
	for i := range 5 {
		mustCreateUser(b, db, fmt.Sprintf("friend%d@example.com", i))
		content = strings.Replace(content, " ", fmt.Sprintf(" @friend%d ", i), 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		m, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), content)
		if err != nil || len(m.Mentions) != 5 {
			b.Fatal(m, err)
		}
	}
}

func BenchmarkMessage(b *testing.B) {
	db := mustOpen(b)
	seedMessages(b, db, 10, 10000)
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id = id%10000 + 1
		if _, _, err := db.Message(context.Background(), model.ByServer(), id); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	db := mustOpen(b)
	hashes := make([]model.TokenHash, 0, 100)
	for i := range 100 {
		_, h := mustCreateUser(b, db, fmt.Sprintf("user%d@example.com", i))
		hashes = append(hashes, h)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := db.Authenticate(context.Background(), hashes[i%len(hashes)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkContentTerms: splitting, composing and folding one message's
// words, which every create and edit pays and a live stream pays once per
// change.
func BenchmarkContentTerms(b *testing.B) {
	content := benchContent(7)
	b.ReportAllocs()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		model.ContentTerms(content)
	}
}

// BenchmarkSortedTerms: a message's terms as every create and edit
// computes them before it queues for the write transaction, for text with
// some accented and CJK words and for plain ASCII.
func BenchmarkSortedTerms(b *testing.B) {
	mixed := benchContent(7)
	ascii := strings.Map(func(r rune) rune {
		if r >= utf8.RuneSelf {
			return 'x'
		}
		return r
	}, mixed)
	for _, bc := range []struct{ name, content string }{{"mixed", mixed}, {"ascii", ascii}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.content)))
			for b.Loop() {
				model.SortedTerms(bc.content)
			}
		})
	}
}
