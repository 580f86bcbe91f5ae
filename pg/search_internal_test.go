package pg

import (
	"strings"
	"testing"

	"herald/model"
)

// TestPostingsReadOnce: a search that reads a word's postings does so in
// one window with no span of IDs, since the index hands every window all
// of the word's postings and they bound the search's cost; a walk keeps
// its windows, so that common words stop early.
func TestPostingsReadOnce(t *testing.T) {
	q := model.SearchQuery{Terms: model.Terms("zephyr")}
	for _, tc := range []struct {
		plan    searchPlan
		windows int
	}{
		{planPostings, 1},
		{planWalk, len(windowSizes)},
		{planByValues, len(windowSizes)},
	} {
		sql, args := searchQuery(&q, 20, 100_000, tc.plan)
		if got := strings.Count(sql, "UNION ALL"); got != tc.windows {
			t.Errorf("plan %d: %d windows, want %d\n%s", tc.plan, got, tc.windows, sql)
		}
		if tc.plan == planPostings && len(args) != 3 {
			// Arguments: the terms, the page and its next, and no bound
			// of a window.
			t.Errorf("the postings' window has bounds: args %v\n%s", args, sql)
		}
	}
}

// TestChooseInASmallTable: in a table of 2,000 messages every word has
// fewer postings than a window, yet a word every third message holds is
// walked (21 matches within about 70 messages) rather than read from its
// 600 postings; a rare word, and two words whose postings intersect in
// fewer messages than the walk would read, are read from the postings.
func TestChooseInASmallTable(t *testing.T) {
	st := &termStats{share: map[string]float64{"apple": 0.3, "river": 0.2}, rare: 0.0005, rows: 2000}
	for _, tc := range []struct {
		terms    string
		plan     searchPlan
		together bool
	}{
		{"apple", planWalk, true},
		{"river", planWalk, true},
		{"apple river", planPostings, true}, // 120 messages hold both; the walk expects 350
		{"zephyr", planPostings, true},
		{"apple zephyr", planPostings, true},
	} {
		plan, together := st.choose(model.Terms(tc.terms), 21)
		if plan != tc.plan || together != tc.together {
			t.Errorf("%q: plan %d, together %v; want %d, %v", tc.terms, plan, together, tc.plan, tc.together)
		}
	}
	// In a large table the same shares walk whatever the page: the
	// postings of apple or river alone are more than a window.
	st.rows = 100_000
	for _, terms := range []string{"apple", "apple river"} {
		if plan, _ := st.choose(model.Terms(terms), 21); plan != planWalk {
			t.Errorf("%q in 100,000 messages: plan %d, want the walk", terms, plan)
		}
	}
}
