package bolt

import (
	"context"
	"fmt"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
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

// seedMessages stores n messages spread over owners users in one write
// transaction per 1000 messages, exactly as CreateMessage lays them out, and
// returns the users. The benchmarks time reads, not this setup.
func seedMessages(b *testing.B, db *testDB, owners, n int) []*User {
	b.Helper()
	users := make([]*User, owners)
	for i := range users {
		users[i], _ = mustCreateUser(b, db, fmt.Sprintf("user%d@example.com", i))
	}
	for start := 0; start < n; start += 1000 {
		err := db.bolt.Update(func(tx *bbolt.Tx) error {
			msgs := tx.Bucket(bucketMessages)
			byOwner := tx.Bucket(bucketMsgsByOwner)
			for i := start; i < min(start+1000, n); i++ {
				id, err := msgs.NextSequence()
				if err != nil {
					return err
				}
				owner := users[i%owners].ID
				now := db.clock().Add(time.Duration(i) * time.Second)
				m := &Message{OwnerID: owner, Content: benchContent(i), CreatedAt: now, UpdatedAt: now, Revision: 1}
				if err := msgs.Put(itob(id), encodeMessage(m)); err != nil {
					return err
				}
				if err := byOwner.Put(compositeKey(owner, itob(id)), nil); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return users
}

func BenchmarkCreateMessage(b *testing.B) {
	db := mustOpen(b)
	u, _ := mustCreateUser(b, db, "ada@example.com")
	content := benchContent(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := db.CreateMessage(ByUser(u.ID), content); err != nil {
			b.Fatal(err)
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
		if _, err := db.Message(id); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	db := mustOpen(b)
	hashes := make([]TokenHash, 0, 100)
	for i := range 100 {
		_, h := mustCreateUser(b, db, fmt.Sprintf("user%d@example.com", i))
		hashes = append(hashes, h)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, err := db.Authenticate(hashes[i%len(hashes)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkSearchMessages(b *testing.B) {
	db := mustOpen(b)
	seedMessages(b, db, 10, 10000)
	for _, bb := range []struct {
		name string
		q    SearchQuery
	}{
		{"NoFilterFirstPage", SearchQuery{}},
		{"RareWord", SearchQuery{Terms: Terms("zeppelin")}},
		{"CommonWords", SearchQuery{Terms: Terms("hello world")}},
		{"Owner", SearchQuery{OwnerEmail: "USER3@example.com"}},
		{"OwnerRareWord", SearchQuery{OwnerEmail: "user0@example.com", Terms: Terms("zeppelin")}},
		{"DeepPage", SearchQuery{BeforeID: 500}},
		{"Since", SearchQuery{Since: ptr(db.clock().Add(9990 * time.Second))}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.SearchMessages(context.Background(), bb.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkContainsTerms(b *testing.B) {
	content := []byte(benchContent(7))
	terms := Terms("zeppelin hello")
	b.ReportAllocs()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		ContainsTerms(content, terms)
	}
}
