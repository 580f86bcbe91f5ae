package bolt

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herald/model"
)

// Store benchmarks at scale: every query shape the API serves, at 10k
// messages (built per run) and at 1M (a fixture built once, since writing it
// takes minutes). The 1M set runs only with HERALD_BENCH_1M=1, so plain
// `go test -bench` and CI stay fast:
//
//	HERALD_BENCH_1M=1 go test -run='^$' -bench=Scale -benchtime=2000x ./bolt/
//
// The fixture is written to testdata/bench-v1-1000k.db (ignored by git) and
// rebuilt when missing or written by another layout. Each benchmark reports
// the median and 99th percentile of single operations besides the mean.

const (
	scaleOwners = 100
	scaleRare   = 10000 // every scaleRare-th message carries the rare word
)

// scaleContent is message i of the benchmark corpus: about a dozen words
// drawn from a Zipf-distributed vocabulary of 20,000, plus "hello" in about
// 30% of messages, "world" in about 20%, "today" in about 10% and
// "zeppelin" in one in 10,000: common, two-word, three-word and rare
// searches all have their word. Even messages also say "left" and odd ones
// "right", which never meet: the worst case for an intersection.
func scaleContent(i int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	zipf := rand.NewZipf(rng, 1.1, 1, 19999)
	var b strings.Builder
	for w := range 8 + rng.IntN(8) {
		if w > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "w%d", zipf.Uint64())
	}
	for _, special := range []struct {
		word    string
		percent int
	}{{"hello", 30}, {"world", 20}, {"today", 10}} {
		if rng.IntN(100) < special.percent {
			b.WriteString(" " + special.word)
		}
	}
	b.WriteString([]string{" left", " right"}[i%2])
	if i%scaleRare == scaleRare/2 {
		b.WriteString(" zeppelin")
	}
	return b.String()
}

// scaleDB returns a database holding n scaleContent messages by
// scaleOwners users.
func scaleDB(b *testing.B, n int) *testDB {
	b.Helper()
	if n <= 100000 {
		db := mustOpen(b)
		seedScale(b, db, n)
		return db
	}
	if os.Getenv("HERALD_BENCH_1M") == "" {
		b.Skipf("%d messages: set HERALD_BENCH_1M=1 (builds testdata/bench-%dk.db once)", n, n/1000)
	}
	// The name carries the corpus version: change scaleContent, bump it.
	fixture := filepath.Join("testdata", fmt.Sprintf("bench-v1-%dk.db", n/1000))
	if !fixtureReady(fixture, n) {
		b.Logf("building %s (%d messages); this happens once", fixture, n)
		_ = os.Remove(fixture)
		db, err := Open(fixture, Options{})
		if err != nil {
			b.Fatal(err)
		}
		tdb := &testDB{DB: db, Path: fixture}
		setNoSync(b, db, true) // a crash while building just means building again
		seedScale(b, tdb, n)
		setNoSync(b, db, false)
		if err := db.bolt.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
	// Benchmarks write (Create), so they run on a copy: the fixture stays
	// as built, and every run measures the same data.
	path := filepath.Join(b.TempDir(), "bench.db")
	if err := copyFile(fixture, path); err != nil {
		b.Fatal(err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return &testDB{DB: db, Path: path}
}

func seedScale(b *testing.B, db *testDB, n int) {
	b.Helper()
	owners := make([]uint64, scaleOwners)
	for i := range owners {
		u, _ := mustCreateUser(b, db, fmt.Sprintf("user%d@example.com", i))
		owners[i] = u.ID
	}
	// The newest scaleTail messages stay in the search index's tail, as
	// some always do on a live server; the rest is merged.
	tail := min(scaleTail, n/10)
	// A millisecond apart where the clock is the test's, so since and
	// until have times to tell apart.
	bulkMessages(b, db, owners, time.Millisecond, scaleContent, n-tail)
	mergeAll(b, db.DB)
	bulkMessages(b, db, owners, time.Millisecond, func(i int) string { return scaleContent(n - tail + i) }, tail)
}

// scaleTail is about half of what the tail holds before it is merged, at
// scaleContent's thirty-odd words a message.
const scaleTail = 4000

// fixtureReady reports whether path is a current-layout database with n
// messages.
func fixtureReady(path string, n int) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	db, err := Open(path, Options{})
	if err != nil {
		return false
	}
	defer db.Close()
	c, err := db.Counts()
	return err == nil && c.Messages == n
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// measure runs op once per iteration and reports the median and 99th
// percentile latency alongside the mean.
func measure(b *testing.B, op func() error) {
	b.Helper()
	b.ReportAllocs()
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkScale(b *testing.B) {
	for _, n := range []int{10000, 1000000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			db := scaleDB(b, n)
			ctx := context.Background()
			last := uint64(n) // IDs are 1..n in a freshly seeded database
			deep := 1000
			if n/model.DefaultSearchLimit < 2*deep {
				deep = n / model.DefaultSearchLimit / 2
			}
			createdAt := func(id uint64) *time.Time {
				_, m, err := db.Message(context.Background(), model.ByServer(), id)
				if err != nil {
					b.Fatal(err)
				}
				return &m.CreatedAt
			}
			searches := []struct {
				name string
				q    model.SearchQuery
			}{
				{"Page1", model.SearchQuery{}},
				{fmt.Sprintf("Page%d", deep), model.SearchQuery{BeforeID: last - uint64(model.DefaultSearchLimit*(deep-1))}},
				{"OneCommonWord", model.SearchQuery{Terms: model.Terms("hello")}},
				{"OneRareWord", model.SearchQuery{Terms: model.Terms("zeppelin")}},
				{"OneUnknownWord", model.SearchQuery{Terms: model.Terms("xylophone")}},
				{"TwoCommonWords", model.SearchQuery{Terms: model.Terms("hello world")}},
				{"ThreeCommonWords", model.SearchQuery{Terms: model.Terms("hello world today")}},
				{"CommonAndRareWord", model.SearchQuery{Terms: model.Terms("hello zeppelin")}},
				{"Owner", model.SearchQuery{OwnerEmail: "user42@example.com"}},
				{"OwnerAndCommonWord", model.SearchQuery{OwnerEmail: "user42@example.com", Terms: model.Terms("world")}},
				{"OwnerAndRareWord", model.SearchQuery{OwnerEmail: "user42@example.com", Terms: model.Terms("zeppelin")}},
				{"CommonWordDeep", model.SearchQuery{Terms: model.Terms("hello"), BeforeID: last / 2}},
				// Two binary searches over the IDs, then a page from the middle.
				{"SinceAndUntil", model.SearchQuery{Since: createdAt(last / 4), Until: createdAt(last / 2)}},
				{"WorstCaseTwoWordsThatNeverMeet", model.SearchQuery{Terms: model.Terms("left right")}},
			}
			for _, s := range searches {
				b.Run("Search/"+s.name, func(b *testing.B) {
					measure(b, func() error {
						_, _, err := db.SearchMessages(ctx, model.ByServer(), s.q)
						return err
					})
				})
			}
			b.Run("Get", func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 1))
				measure(b, func() error {
					_, _, err := db.Message(context.Background(), model.ByServer(), 1+rng.Uint64N(last))
					return err
				})
			})
			b.Run("Create", func(b *testing.B) {
				u, _ := mustCreateUser(b, db, fmt.Sprintf("writer%d@example.com", b.N))
				i := 0
				measure(b, func() error {
					i++
					_, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), scaleContent(n+i))
					return err
				})
			})
		})
	}
}

// BenchmarkCreateConcurrent is create under load: 64 writers at once over a
// 10k-message database, so group commit shares fsyncs. It reports how many
// writes a commit carried on average. mention5 names five people in every
// message, each notified (the issue on people: at most 25% more than
// plain).
func BenchmarkCreateConcurrent(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		for _, kind := range []string{"plain", "mention5"} {
			b.Run(fmt.Sprintf("%dk/%s", n/1000, kind), func(b *testing.B) {
				db := scaleDB(b, n)
				u, _ := mustCreateUser(b, db, "writer@example.com")
				prefix := ""
				if kind == "mention5" {
					for i := range 5 {
						mustCreateUser(b, db, fmt.Sprintf("friend%d@example.com", i))
						prefix += fmt.Sprintf("@friend%d ", i)
					}
				}
				before := db.WriteStats()
				var seq atomic.Int64
				b.SetParallelism(32) // × GOMAXPROCS writers
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), prefix+scaleContent(n+int(seq.Add(1)))); err != nil {
							b.Error(err)
							return
						}
					}
				})
				after := db.WriteStats()
				if commits := after.Commits - before.Commits; commits > 0 {
					b.ReportMetric(float64(after.Ops-before.Ops)/float64(commits), "writes/commit")
				}
			})
		}
	}
}
