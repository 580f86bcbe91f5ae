package apijson

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"herald/model"
)

// AppendTime writes what AppendFormat writes with TimeLayout, for any
// instant in any zone, fractions finer than the layout's included.
func TestAppendTimeMatchesAppendFormat(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	times := []time.Time{
		{},
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC),
		time.Date(2026, 1, 2, 1, 4, 5, 999, east), // the day before in UTC
		time.Date(2028, 2, 29, 23, 59, 59, 999999000, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		times = append(times, time.Unix(rng.Int64N(400e9)-62e9, rng.Int64N(1e9)))
	}
	for _, at := range times {
		want := string(at.UTC().AppendFormat(nil, TimeLayout))
		if got := string(AppendTime(nil, at)); got != want {
			t.Fatalf("AppendTime(%v) = %q, want %q", at, got, want)
		}
	}
}

// BenchmarkAppendPageJSON is the encoding of a page of 20 messages of
// about 250 bytes, the shape of GET /api/messages?limit=20.
func BenchmarkAppendPageJSON(b *testing.B) {
	msgs := make([]*model.Message, 20)
	at := time.Date(2026, 11, 22, 6, 30, 1, 123456000, time.UTC)
	for i := range msgs {
		msgs[i] = &model.Message{
			ID:         uint64(100000 - i),
			Content:    strings.Repeat("kobami apple ", 20),
			OwnerEmail: "user3@example.com",
			CreatedAt:  at,
			UpdatedAt:  at,
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		AppendPage(make([]byte, 0, 8<<10), msgs, "AgAAAAAAAYLNWufmpCME3G4")
	}
}
