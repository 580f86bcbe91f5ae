package pg

import (
	"strings"
	"testing"

	"herald/model"
)

// TestPostingsReadOnce: a search that reads a word's postings does so in
// one window over the whole span, since the index hands every window all
// of the word's postings; a walk keeps its windows, so that common words
// stop early. The pages are the same either way (TestSearchPlans).
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
		if tc.plan == planPostings {
			// Arguments: the terms, the page and its next, the window.s lower bound.
			if lowest, want := args[2], int64(100_000)-searchSpan+1; lowest != want {
				t.Errorf("the postings' window starts at %v, want %d (args %v)", lowest, want, args)
			}
		}
	}
}
