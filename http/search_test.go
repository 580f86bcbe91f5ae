package http_test

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/model"
)

// searchItems checks the shape of a search page, {items, next}, and returns
// its items.
func searchItems(t *testing.T, res *apitest.Response) []map[string]any {
	t.Helper()
	if res.Status != http.StatusOK {
		t.Fatalf("search: status %d: %s", res.Status, res.Body)
	}
	if got, want := res.Header.Get("Content-Type"), "application/json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	page := res.JSON(t)
	if got, want := slices.Sorted(maps.Keys(page)), []string{"items", "next"}; !slices.Equal(got, want) {
		t.Errorf("page keys = %v, want %v", got, want)
	}
	raw, ok := page["items"].([]any)
	if !ok {
		t.Fatalf("items = %#v, want an array", page["items"])
	}
	items := make([]map[string]any, len(raw))
	for i, it := range raw {
		if items[i], ok = it.(map[string]any); !ok {
			t.Fatalf("item %d = %#v, want an object", i, it)
		}
	}
	return items
}

// searchIDs returns the IDs of a page's items, in order.
func searchIDs(t *testing.T, res *apitest.Response) []uint64 {
	t.Helper()
	var ids []uint64
	for _, it := range searchItems(t, res) {
		ids = append(ids, apitest.MsgID(t, it))
	}
	return ids
}

var searchLinkRE = regexp.MustCompile(`^<(/api/messages\?[^>]+)>; rel="next"$`)

// searchNext returns the URL of the next page, "" on the last page. It
// checks that the body's next and the Link header agree.
func searchNext(t *testing.T, res *apitest.Response) string {
	t.Helper()
	next, hasNext := res.JSON(t)["next"]
	link := res.Header.Get("Link")
	if next == nil {
		if !hasNext {
			t.Errorf("page has no next member: %s", res.Body)
		}
		if link != "" {
			t.Errorf("Link = %q on the last page, want none", link)
		}
		return ""
	}
	cursor, ok := next.(string)
	if !ok || cursor == "" {
		t.Fatalf("next = %#v, want a non-empty string or null", next)
	}
	m := searchLinkRE.FindStringSubmatch(link)
	if m == nil {
		t.Fatalf(`Link = %q, want </api/messages?...>; rel="next"`, link)
	}
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatalf("Link URL %q: %v", m[1], err)
	}
	if got, want := u.Query().Get("cursor"), cursor; got != want {
		t.Errorf("Link cursor = %q, want next %q", got, want)
	}
	return m[1]
}

// searchAll follows next links from path and returns every ID seen.
func searchAll(t *testing.T, e *apitest.Env, token, path string) (ids []uint64, pages int) {
	t.Helper()
	for path != "" {
		if pages++; pages > 200 {
			t.Fatal("more than 200 pages: the cursor does not advance")
		}
		res := e.Do(apitest.Request{Method: "GET", Path: path, Token: token})
		ids = append(ids, searchIDs(t, res)...)
		path = searchNext(t, res)
	}
	return ids, pages
}

// searchPostN posts n messages and returns their IDs, oldest first.
func searchPostN(e *apitest.Env, token string, n int, content func(i int) string) []uint64 {
	e.T.Helper()
	ids := make([]uint64, n)
	for i := range n {
		ids[i] = apitest.MsgID(e.T, e.Post(token, content(i)))
	}
	return ids
}

// newestFirst returns ids in descending order.
func newestFirst(ids ...uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

func TestSearchAuth(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	e.Post(token, "secret plans")
	cases := []struct{ name, authorization string }{
		{"no token", ""},
		{"bad token", "Bearer herald_not_a_real_token"},
		{"basic", "Basic YWRhOnB3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.authorization != "" {
				h.Set("Authorization", tc.authorization)
			}
			res := msgEnvFor(e, t).Do(apitest.Request{Method: "GET", Path: "/api/messages?q=secret", Header: h})
			p := apitest.AssertProblem(t, res, http.StatusUnauthorized)
			assertChallenge(t, res)
			if strings.Contains(string(res.Body), "plans") {
				t.Errorf("401 body leaks content: %v", p)
			}
		})
	}
}

func TestSearchShape(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")

	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages", Token: token})
	if got := searchItems(t, res); len(got) != 0 {
		t.Errorf("items = %v, want none", got)
	}
	if got, want := strings.TrimSpace(string(res.Body)), `{"items":[],"next":null}`; got != want {
		t.Errorf("empty page = %s, want %s", got, want)
	}

	var ids []uint64
	for _, c := range []string{"first", "second", "third"} {
		e.Clock.Advance(time.Second)
		ids = append(ids, apitest.MsgID(t, e.Post(token, c)))
	}
	res = e.Do(apitest.Request{Method: "GET", Path: "/api/messages", Token: token})
	items := searchItems(t, res)
	if got, want := searchIDs(t, res), newestFirst(ids...); !slices.Equal(got, want) {
		t.Fatalf("ids = %v, want newest first %v", got, want)
	}
	for i, c := range []string{"third", "second", "first"} {
		assertMessageJSON(t, items[i], c, "ada@example.com")
		// Each item is exactly what GET on the message returns.
		one := e.Do(apitest.Request{Method: "GET", Path: msgPath(ids[2-i]), Token: token}).JSON(t)
		if !reflect.DeepEqual(items[i], one) {
			t.Errorf("item %d = %v, want %v", i, items[i], one)
		}
	}
	if got := searchNext(t, res); got != "" {
		t.Errorf("next = %q on the only page", got)
	}
}

func TestSearchPaging(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	ids := searchPostN(e, token, 25, func(i int) string { return fmt.Sprintf("message %d", i) })

	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?limit=10", Token: token})
	if got, want := searchIDs(t, res), newestFirst(ids[15:]...); !slices.Equal(got, want) {
		t.Errorf("page 1 = %v, want %v", got, want)
	}
	next := searchNext(t, res)
	if next == "" {
		t.Fatal("page 1 has no next page")
	}
	u, _ := url.Parse(next)
	if got, want := u.Query().Get("limit"), "10"; got != want {
		t.Errorf("Link limit = %q, want %q", got, want)
	}

	res = e.Do(apitest.Request{Method: "GET", Path: next, Token: token})
	if got, want := searchIDs(t, res), newestFirst(ids[5:15]...); !slices.Equal(got, want) {
		t.Errorf("page 2 = %v, want %v", got, want)
	}
	next = searchNext(t, res)
	if next == "" {
		t.Fatal("page 2 has no next page")
	}

	res = e.Do(apitest.Request{Method: "GET", Path: next, Token: token})
	if got, want := searchIDs(t, res), newestFirst(ids[:5]...); !slices.Equal(got, want) {
		t.Errorf("page 3 = %v, want %v", got, want)
	}
	if got := searchNext(t, res); got != "" {
		t.Errorf("page 3 next = %q, want none", got)
	}

	// The next value also works as a cursor parameter on its own.
	res = e.Do(apitest.Request{Method: "GET", Path: "/api/messages?limit=10", Token: token})
	cursor := res.JSON(t)["next"].(string)
	res = e.Do(apitest.Request{Method: "GET", Path: "/api/messages?limit=10&cursor=" + url.QueryEscape(cursor), Token: token})
	if got, want := searchIDs(t, res), newestFirst(ids[5:15]...); !slices.Equal(got, want) {
		t.Errorf("page 2 by cursor = %v, want %v", got, want)
	}
}

// The Link to the next page keeps q, owner and limit.
func TestSearchPagingKeepsFilters(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "bob@example.com")
	var want []uint64
	for i := range 12 {
		switch i % 3 {
		case 0:
			want = append(want, apitest.MsgID(t, e.Post(ada, fmt.Sprintf("Alpha beta %d", i))))
		case 1:
			e.Post(ada, fmt.Sprintf("gamma %d", i))
		case 2:
			e.Post(bob, fmt.Sprintf("alpha from bob %d", i))
		}
	}
	ids, pages := searchAll(t, e, bob, "/api/messages?q=ALPHA&owner=Ada%40Example.com&limit=2")
	if got, want := ids, newestFirst(want...); !slices.Equal(got, want) {
		t.Errorf("ids = %v, want %v", got, want)
	}
	if got, want := pages, 2; got != want {
		t.Errorf("pages = %d, want %d", got, want)
	}

	res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=ALPHA&owner=Ada%40Example.com&limit=2", Token: bob})
	u, err := url.Parse(searchNext(t, res))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"q": "ALPHA", "owner": "Ada@Example.com", "limit": "2"} {
		if got := u.Query().Get(k); got != v {
			t.Errorf("Link %s = %q, want %q", k, got, v)
		}
	}
}

func TestSearchLimit(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	ids := searchPostN(e, token, 101, func(i int) string {
		if i%20 == 0 {
			return fmt.Sprintf("special %d", i)
		}
		return fmt.Sprintf("plain %d", i)
	})
	all := newestFirst(ids...)

	cases := []struct {
		query    string
		want     []uint64
		wantNext bool
	}{
		{"", all[:20], true},
		{"limit=", all[:20], true}, // empty counts as absent
		{"limit=1", all[:1], true},
		{"limit=100", all[:100], true},
		{"limit=20", all[:20], true},
		// Exactly limit matches: no phantom next page.
		{"q=special&limit=6", []uint64{ids[100], ids[80], ids[60], ids[40], ids[20], ids[0]}, false},
		{"q=special&limit=5", []uint64{ids[100], ids[80], ids[60], ids[40], ids[20]}, true},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + tc.query, Token: token})
			if got := searchIDs(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v, want %v", got, tc.want)
			}
			if got := searchNext(t, res) != ""; got != tc.wantNext {
				t.Errorf("has next = %v, want %v", got, tc.wantNext)
			}
		})
	}

	t.Run("limit=100 to the end", func(t *testing.T) {
		got, pages := searchAll(t, msgEnvFor(e, t), token, "/api/messages?limit=100")
		if !slices.Equal(got, all) {
			t.Errorf("ids = %v, want %v", got, all)
		}
		if pages != 2 {
			t.Errorf("pages = %d, want 2", pages)
		}
	})
}

func TestSearchWords(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	contents := []string{
		0:  "Hello, World!",
		1:  "hello,world",
		2:  "hello there",
		3:  "über alles",
		4:  "ÜBER DIE BRÜCKE",
		5:  "東京 日本",
		6:  "日本語",
		7:  "Straße",
		8:  "room 101, floor 7",
		9:  "C3PO and R2D2",
		10: "snake_case and kebab-case",
		11: "ΣΟΦΙΑ",
		12: "write to ada@example.com",
		13: "Othello plays",
		14: "tab\tseparated\nlines",
	}
	ids := searchPostN(e, token, len(contents), func(i int) string { return contents[i] })
	pick := func(idx ...int) []uint64 {
		out := make([]uint64, len(idx))
		for i, x := range idx {
			out[i] = ids[x]
		}
		return newestFirst(out...)
	}
	every := make([]int, len(contents))
	for i := range every {
		every[i] = i
	}

	cases := []struct {
		q    string
		want []uint64
	}{
		{"world", pick(0, 1)},
		{"WORLD", pick(0, 1)},
		{"World!", pick(0, 1)},
		{"hello", pick(0, 1, 2)},
		{"hell", nil},
		{"ello", nil},
		{"hello world", pick(0, 1)},
		{"world hello", pick(0, 1)},
		{"hello,world", pick(0, 1)},
		{"hello hello", pick(0, 1, 2)},
		{"hello there", pick(2)},
		{"hello nobody", nil},
		{"ÜBER", pick(3, 4)},
		{"über", pick(3, 4)},
		{"Über", pick(3, 4)},
		{"brücke", pick(4)},
		{"日本", pick(5)},
		{"日本語", pick(6)},
		{"東京日本", nil},
		{"straße", pick(7)},
		{"STRAẞE", pick(7)}, // capital sharp s lower-cases to ß
		{"strasse", nil},    // only simple lower-casing, no full case folding
		{"101", pick(8)},
		{"10", nil},
		{"r2d2", pick(9)},
		{"snake", pick(10)},
		{"case", pick(10)},
		{"kebab case", pick(10)},
		{"σοφια", pick(11)},
		{"ada@example.com", pick(12)},
		{"othello", pick(13)},
		{"separated lines", pick(14)},
		{"", pick(every...)},
	}
	for _, tc := range cases {
		t.Run("q="+tc.q, func(t *testing.T) {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?limit=100&q=" + url.QueryEscape(tc.q), Token: token})
			if got := searchIDs(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("q=%q found %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

// Words in scripts that use combining marks (Devanagari vowel signs and
// virama, decomposed accents) are whole words too: a mark does not split
// a word, so a query for part of one must not match it.
func TestSearchWordsWithCombiningMarks(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	namaste := apitest.MsgID(t, e.Post(token, "नमस्ते दुनिया"))   // "hello world" in Hindi
	cafe := apitest.MsgID(t, e.Post(token, "cafe\u0301 au lait")) // café, decomposed (NFD)
	cafeNFC := apitest.MsgID(t, e.Post(token, "CAFÉ noir"))       // café, composed (NFC)
	cases := []struct {
		q    string
		want []uint64
	}{
		{"नमस्ते", []uint64{namaste}},
		{"दुनिया", []uint64{namaste}},
		{"नमस", nil}, // the word up to the virama: not a whole word
		{"त", nil},   // a lone consonant from inside the word
		// NFC and NFD spellings are the same word, in content and in q.
		{"cafe\u0301", []uint64{cafeNFC, cafe}},
		{"café", []uint64{cafeNFC, cafe}},
		{"CAFE\u0301", []uint64{cafeNFC, cafe}},
		{"cafe", nil}, // the base letters of café without its accent
	}
	for _, tc := range cases {
		t.Run("q="+tc.q, func(t *testing.T) {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=" + url.QueryEscape(tc.q), Token: token})
			if got := searchIDs(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("q=%q found %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestSearchOwner(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "Bob@Example.com")
	var adaIDs, bobIDs []uint64
	for i := range 3 {
		adaIDs = append(adaIDs, apitest.MsgID(t, e.Post(ada, fmt.Sprintf("ada says %d", i))))
		bobIDs = append(bobIDs, apitest.MsgID(t, e.Post(bob, fmt.Sprintf("bob says %d", i))))
	}
	special := apitest.MsgID(t, e.Post(ada, "ada says special"))
	adaAll := newestFirst(append(slices.Clone(adaIDs), special)...)

	cases := []struct {
		name, query string
		want        []uint64
	}{
		{"exact", "owner=ada%40example.com", adaAll},
		{"upper case", "owner=ADA%40EXAMPLE.COM", adaAll},
		{"spaces around", "owner=%20%20Ada%40Example.com%20%09", adaAll},
		{"plus as space", "owner=+ada@example.com+", adaAll},
		{"registered mixed case", "owner=bob%40example.com", newestFirst(bobIDs...)},
		{"with q", "owner=ada%40example.com&q=special", []uint64{special}},
		{"with q of other owner", "owner=bob%40example.com&q=special", nil},
		{"unknown owner", "owner=nobody%40example.com", nil},
		{"not an address", "owner=ada", nil},
		{"empty owner", "owner=", newestFirst(append(slices.Clone(adaAll), bobIDs...)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + tc.query, Token: bob})
			items := searchItems(t, res)
			if got := searchIDs(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v, want %v", got, tc.want)
			}
			if got := searchNext(t, res); got != "" {
				t.Errorf("next = %q, want none", got)
			}
			for _, it := range items {
				email := it["user"].(map[string]any)["email"]
				wantEmail := "ada@example.com"
				if slices.Contains(bobIDs, apitest.MsgID(t, it)) {
					wantEmail = "Bob@Example.com"
				}
				if email != wantEmail {
					t.Errorf("message %v owner = %v, want %v", it["id"], email, wantEmail)
				}
			}
		})
	}
}

func TestSearchTimeRange(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	var ids []uint64
	var created []string
	var times []time.Time
	e.Clock.Advance(250 * time.Millisecond)
	for _, c := range []string{"one", "two", "three"} {
		m := e.Post(token, c)
		ids = append(ids, apitest.MsgID(t, m))
		created = append(created, m["createdAt"].(string))
		ct, err := time.Parse(time.RFC3339Nano, created[len(created)-1])
		if err != nil {
			t.Fatal(err)
		}
		times = append(times, ct)
		e.Clock.Advance(time.Second)
	}
	// Every message was created at a distinct instant.
	if created[0] == created[1] || created[1] == created[2] {
		t.Fatalf("createdAt not distinct: %v", created)
	}
	plusOne := time.FixedZone("+01:00", 3600)
	minusFive := time.FixedZone("-05:00", -5*3600)
	q := url.QueryEscape
	cases := []struct {
		name, query string
		want        []uint64
	}{
		{"since inclusive", "since=" + q(created[1]), newestFirst(ids[1:]...)},
		{"until exclusive", "until=" + q(created[1]), ids[:1]},
		{"since and until", "since=" + q(created[1]) + "&until=" + q(created[2]), ids[1:2]},
		{"since first until last", "since=" + q(created[0]) + "&until=" + q(created[2]), newestFirst(ids[:2]...)},
		{"empty range", "since=" + q(created[1]) + "&until=" + q(created[1]), nil},
		{"inverted range", "since=" + q(created[2]) + "&until=" + q(created[0]), nil},
		{"since one microsecond later", "since=" + q(times[1].Add(time.Microsecond).Format(time.RFC3339Nano)), ids[2:]},
		{"until one nanosecond later", "until=" + q(times[1].Add(time.Nanosecond).Format(time.RFC3339Nano)), newestFirst(ids[:2]...)},
		{"until first", "until=" + q(created[0]), nil},
		{"since after all", "since=" + q(times[2].Add(time.Hour).Format(time.RFC3339)), nil},
		{"since without fraction", "since=" + q(times[1].Truncate(time.Second).Format(time.RFC3339)), newestFirst(ids[1:]...)},
		{"since +01:00 escaped", "since=" + q(times[1].In(plusOne).Format(msgTimeLayout)), newestFirst(ids[1:]...)},
		{"since -05:00", "since=" + q(times[1].In(minusFive).Format(msgTimeLayout)), newestFirst(ids[1:]...)},
		// An unescaped '+' in a query string arrives as a space.
		{"since +01:00 unescaped", "since=" + times[1].In(plusOne).Format(msgTimeLayout), newestFirst(ids[1:]...)},
		{"until +01:00 unescaped", "until=" + times[1].In(plusOne).Format(msgTimeLayout), ids[:1]},
		// Every value is a real bound, the zero time.Time (year 1) included.
		{"until year 1", "until=0001-01-01T00:00:00Z", nil},
		{"since year 1", "since=0001-01-01T00:00:00Z", newestFirst(ids...)},
		{"until before 1970", "until=1969-12-31T23:59:59Z", nil},
		{"since year 9999", "since=9999-12-31T23:59:59Z", nil},
		{"until year 9999", "until=9999-12-31T23:59:59.999999Z", newestFirst(ids...)},
		{"since and until year 1", "since=0001-01-01T00:00:00Z&until=0001-01-01T00:00:00Z", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + tc.query, Token: token})
			if got := searchIDs(t, res); !slices.Equal(got, tc.want) {
				t.Errorf("%s: ids = %v, want %v", tc.query, got, tc.want)
			}
		})
	}
}

func TestSearchBadParams(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	e.Post(token, "hello")
	cases := []struct {
		name, query, param string
	}{
		{"limit zero", "limit=0", "limit"},
		{"limit over max", "limit=101", "limit"},
		{"limit negative", "limit=-1", "limit"},
		{"limit not a number", "limit=abc", "limit"},
		{"limit fraction", "limit=1.5", "limit"},
		{"limit huge", "limit=99999999999999999999", "limit"},
		{"cursor garbage", "cursor=garbage!", "cursor"},
		{"cursor too short", "cursor=AAAA", "cursor"},
		{"cursor of id zero", "cursor=AAAAAAAAAAA", "cursor"},
		{"cursor padded", "cursor=AAAAAAAAAAE%3D", "cursor"},
		{"cursor too long", "cursor=AAAAAAAAAAAAAA", "cursor"},
		{"unknown parameter", "page=2", "page"},
		{"unknown parameter with q", "q=hello&sort=asc", "sort"},
		{"parameter names are case-sensitive", "Q=hello", "Q"},
		{"repeated limit", "limit=5&limit=6", "limit"},
		{"repeated q", "q=a&q=b", "q"},
		{"repeated owner", "owner=a%40b.c&owner=a%40b.c", "owner"},
		{"repeated empty", "q=&q=", "q"},
		{"since not a time", "since=yesterday", "since"},
		{"since date only", "since=2026-01-02", "since"},
		{"since without zone", "since=2026-01-02T15:04:05", "since"},
		{"since unix seconds", "since=1767366245", "since"},
		{"until bad month", "until=2026-13-01T00:00:00Z", "until"},
		{"until bad offset", "until=2026-01-02T15:04:05%2B25:00", "until"},
		{"q invalid UTF-8", "q=%FF", "q"},
		{"owner only spaces", "owner=%20%20", "owner"},
		{"owner only a tab", "owner=%09", "owner"},
		{"owner invalid UTF-8", "owner=a%FF%40b.c", "owner"},
		{"q too long", "q=" + strings.Repeat("a", 1025), "q"},
		{"q without a word", "q=" + url.QueryEscape("!? -- ..."), "q"},
		{"q only spaces", "q=%20%20%20", "q"},
		{"q only emoji", "q=" + url.QueryEscape("😀🎉"), "q"},
		{"q with 17 distinct words", "q=" + url.QueryEscape("a b c d e f g h i j k l m n o p q"), "q"},
		{"cursor of the previous format", "cursor=AAAAAAAAAAc", "cursor"},
		{"cursor with a forged format", "cursor=AwAAAAAAAAAHq5s2c0lG7hI", "cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := msgEnvFor(e, t)
			counts := e.Counts()
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + tc.query, Token: token})
			p := apitest.AssertProblem(t, res, http.StatusBadRequest)
			assertViolation(t, p, tc.param)
			if got := res.Header.Get("Link"); got != "" {
				t.Errorf("Link = %q on an error", got)
			}
			assertCountsSame(e, counts)
		})
	}
	t.Run("malformed query string", func(t *testing.T) {
		e := msgEnvFor(e, t)
		counts := e.Counts()
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=%zz", Token: token}), http.StatusBadRequest)
		assertCountsSame(e, counts)
	})
}

// Paging with cursors while others create, edit and delete messages never
// repeats a message and never skips one that existed all along.
func TestSearchPagingWhileWriting(t *testing.T) {
	e := apitest.New(t)
	ada := msgUser(e, "ada@example.com")
	bob := msgUser(e, "bob@example.com")
	initial := searchPostN(e, ada, 50, func(i int) string { return fmt.Sprintf("initial %d", i) })
	isInitial := make(map[uint64]bool)
	for _, id := range initial {
		isInitial[id] = true
	}

	seen := make(map[uint64]int)
	deletedUnseen := make(map[uint64]bool)
	var order []uint64
	path := "/api/messages?limit=7"
	for page := 0; path != ""; page++ {
		if page > 50 {
			t.Fatal("paging does not end")
		}
		res := e.Do(apitest.Request{Method: "GET", Path: path, Token: bob})
		ids := searchIDs(t, res)
		for _, id := range ids {
			seen[id]++
			order = append(order, id)
		}
		if path = searchNext(t, res); path == "" {
			break
		}

		// Others write between page fetches.
		for i := range 2 {
			e.Post(bob, fmt.Sprintf("new during page %d, %d", page, i))
		}
		var unseen []uint64 // initial, not yet seen, not deleted; newest first
		for _, id := range newestFirst(initial...) {
			if seen[id] == 0 && !deletedUnseen[id] {
				unseen = append(unseen, id)
			}
		}
		if len(unseen) > 0 {
			// Alternate between the next page's first message and the oldest.
			victim := unseen[0]
			if page%2 == 1 {
				victim = unseen[len(unseen)-1]
			}
			if res := e.Do(apitest.Request{Method: "DELETE", Path: msgPath(victim), Token: ada}); res.Status != http.StatusNoContent {
				t.Fatalf("delete %d: status %d: %s", victim, res.Status, res.Body)
			}
			deletedUnseen[victim] = true
			unseen = slices.DeleteFunc(unseen, func(id uint64) bool { return id == victim })
		}
		if len(unseen) > 0 {
			// An edit does not move a message.
			if res := e.Do(apitest.Request{Method: "PATCH", Path: msgPath(unseen[0]), Token: ada,
				ContentType: "application/json", Body: `{"content":"edited while paging"}`}); res.Status != http.StatusOK {
				t.Fatalf("patch %d: status %d: %s", unseen[0], res.Status, res.Body)
			}
		}
		if page == 1 && len(ids) > 0 {
			// Delete the message the cursor points just below.
			if res := e.Do(apitest.Request{Method: "DELETE", Path: msgPath(ids[len(ids)-1]), Token: ada}); res.Status != http.StatusNoContent {
				t.Fatalf("delete cursor message: status %d: %s", res.Status, res.Body)
			}
		}
	}

	for i := 1; i < len(order); i++ {
		if order[i] >= order[i-1] {
			t.Errorf("ids not strictly decreasing at %d: %d after %d", i, order[i], order[i-1])
		}
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("message %d seen %d times", id, n)
		}
		if !isInitial[id] {
			t.Errorf("message %d, created after paging began, appeared behind the cursor", id)
		}
	}
	for _, id := range initial {
		switch want := 1; {
		case deletedUnseen[id] && seen[id] != 0:
			t.Errorf("message %d was deleted before its page but was seen", id)
		case !deletedUnseen[id] && seen[id] != want:
			t.Errorf("message %d seen %d times, want %d", id, seen[id], want)
		}
	}
	if len(deletedUnseen) == 0 {
		t.Error("test deleted nothing while paging")
	}
}

// A cursor carries the filters of the search that issued it: with other
// filters it is refused, with the same ones (in any spelling) it pages on,
// and the page size may change between pages.
func TestSearchCursorBoundToQuery(t *testing.T) {
	e := apitest.New(t)
	token := msgUser(e, "ada@example.com")
	msgUser(e, "bob@example.com")
	ids := searchPostN(e, token, 5, func(i int) string { return fmt.Sprint("hello world ", i) })
	first := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=hello+world&owner=ada%40example.com&since=2020-01-01T00:00:00Z&limit=2", Token: token})
	link, err := url.Parse(searchNext(t, first))
	if err != nil || link.Query().Get("cursor") == "" {
		t.Fatalf("first page has no next cursor: %v", err)
	}
	c := url.QueryEscape(link.Query().Get("cursor"))
	t.Run("other filters", func(t *testing.T) {
		for _, query := range []string{
			"q=hello&owner=ada%40example.com&since=2020-01-01T00:00:00Z",
			"q=hello+world&since=2020-01-01T00:00:00Z",
			"q=hello+world&owner=bob%40example.com&since=2020-01-01T00:00:00Z",
			"q=hello+world&owner=ada%40example.com",
			"q=hello+world&owner=ada%40example.com&since=2020-01-01T00:00:01Z",
			// Within the microsecond the store keeps, but a message at
			// exactly 00:00:00 is after one bound and not this one.
			"q=hello+world&owner=ada%40example.com&since=2020-01-01T00:00:00.0000005Z",
			"q=hello+world&owner=ada%40example.com&since=2020-01-01T00:00:00Z&until=2030-01-01T00:00:00Z",
			"",
		} {
			e := msgEnvFor(e, t)
			res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + query + "&cursor=" + c, Token: token})
			p := apitest.AssertProblem(t, res, http.StatusBadRequest)
			assertViolation(t, p, "cursor")
			if detail, _ := p["detail"].(string); !strings.Contains(detail, "other q, owner, since or until") {
				t.Errorf("%s: detail = %q, want it to say the cursor belongs to other filters", query, detail)
			}
		}
	})
	t.Run("same filters", func(t *testing.T) {
		// Word order and case, the owner's letter case and the time zone of
		// since do not change the search, nor does the page size.
		res := e.Do(apitest.Request{Method: "GET", Path: "/api/messages?q=WORLD+Hello&owner=ADA%40Example.com&since=2020-01-01T01:00:00%2B01:00&limit=10&cursor=" + c, Token: token})
		if got, want := searchIDs(t, res), newestFirst(ids[:3]...); !slices.Equal(got, want) {
			t.Errorf("second page = %v, want %v", got, want)
		}
	})
}

// TestSearchStopsWhenClientLeaves: the request's context reaches the
// store, so a search whose client has gone is abandoned rather than run to
// the end (503, which the client will never read, and no page).
func TestSearchStopsWhenClientLeaves(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), apitest.DBOptions(bolt.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	token, hash, err := auth.MintToken()
	if err != nil {
		t.Fatal(err)
	}
	u := &model.User{Email: "ada@example.com", PasswordHash: "$argon2id$v=19$m=64,t=1,p=1$c2FsdA$aGFzaA"}
	if _, err := db.CreateUser(context.Background(), u, model.TokenHash(hash), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), "hello"); err != nil {
		t.Fatal(err)
	}
	srv := heraldhttp.NewServer(db, auth.NewHasher(apitest.FastParams, 1), heraldhttp.Config{})
	search := func(ctx context.Context) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api/messages?q=hello", nil).WithContext(ctx)
		r.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, r)
		return rec
	}
	if rec := search(context.Background()); rec.Code != http.StatusOK {
		t.Fatalf("search with a live client: %d %s", rec.Code, rec.Body)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if rec := search(gone); rec.Code != http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), `"items"`) {
		t.Errorf("search for a client that left: %d %s, want 503 and no page", rec.Code, rec.Body)
	}
}
