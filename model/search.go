package model

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"time"
)

// Search limits.
const (
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
)

// SearchQuery selects messages, newest first. Zero values mean "no filter".
type SearchQuery struct {
	// Terms must all occur in the content as whole words; see Terms. At most
	// MaxQueryTerms.
	Terms []string
	// OwnerEmail restricts results to one author, matched case-insensitively.
	OwnerEmail string
	// Since (inclusive) and Until (exclusive) bound CreatedAt when set; any
	// instant is a real bound, year 1 included.
	Since, Until *time.Time
	// BeforeID resumes a previous page: only messages with smaller IDs.
	BeforeID uint64
	// Limit is the page size; zero means DefaultSearchLimit.
	Limit int
}

// Fingerprint identifies the query's filters — terms (in any order),
// owner, since and until — but not its page position or size. A cursor
// carries it so that it is only ever used with the query it came from.
func (q *SearchQuery) Fingerprint() uint64 {
	h := sha256.New()
	terms := slices.Clone(q.Terms)
	slices.Sort(terms)
	for _, t := range slices.Compact(terms) {
		h.Write([]byte(t))
		h.Write([]byte{0})
	}
	h.Write([]byte{0xff})
	if q.OwnerEmail != "" {
		h.Write([]byte(EmailKey(q.OwnerEmail)))
	}
	for _, bound := range []*time.Time{q.Since, q.Until} {
		h.Write([]byte{0xff})
		if bound != nil {
			// The bound as the search applies it, rounded up to the
			// store's microseconds: two bounds that select the same
			// messages share a cursor, two that do not never do.
			h.Write(microsKey(BoundMicros(*bound)))
		}
	}
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// SearchPage is one page of results. NextBeforeID is zero on the last page.
// A page can hold fewer than Limit messages and still have a next page when
// the store's search reached its budget of work for one page.
type SearchPage struct {
	Messages     []*Message
	NextBeforeID uint64
}

// BoundMicros is the first instant at or after t at the precision stores
// keep, in Unix microseconds: a bound with a finer part rounds up, so a
// message at 12:00:00.000001 is after since=12:00:00.0000005 and before
// until=12:00:00.0000015.
func BoundMicros(t time.Time) int64 {
	if t.Truncate(time.Microsecond).Before(t) {
		t = t.Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return t.UnixMicro()
}

// microsKey encodes microseconds so that byte order is time order,
// negative Unix times (before 1970, down to year 1) included: flipping the
// sign bit of the two's complement value orders int64s as unsigned bytes.
// A cursor's fingerprint hashes bounds in this form, so cursors handed out
// stay valid as long as it does not change.
func microsKey(us int64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(us)^(1<<63))
}

// PageLimit is the page size q asks for, defaulted and bounded.
func (q *SearchQuery) PageLimit() int { return pageLimit(q.Limit, DefaultSearchLimit, MaxSearchLimit) }

// pageLimit is asked, or def when not positive, at most max.
func pageLimit(asked, def, max int) int {
	if asked <= 0 {
		return def
	}
	return min(asked, max)
}
