package http_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/unicode/norm"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/model"
	"herald/pg"
)

// TestStoresAgree drives one random sequence of requests, through real
// HTTP, against a Herald on bbolt and a Herald on PostgreSQL side by side,
// on one clock, and requires the same answer from both to every request:
// the status, the body and the headers a client reads (see agreeHeaders).
// The contract says every row of it holds on PostgreSQL exactly as on
// bbolt; this is where that is checked across the whole API at once.
//
// Each server's requests use what that server gave out (its tokens, IDs,
// codes, cursors). What may legitimately differ is renamed before
// comparing (see agreeServer.normalise), and nothing else:
//   - account IDs, by the logical account they belong to (PostgreSQL's
//     sequence skips a number after a refused registration);
//   - tokens, invitation and reset codes (random), by the logical token or
//     code they were given out as, also inside links;
//   - token handles (random), by the logical token whose listing showed it
//     as current, else all alike; tokens created in the same microsecond
//     are put in one order (agreeSortTies);
//   - the cursors of the accounts listing (they hold account IDs), by
//     order of first appearance;
//   - the server's own origin (its port) in links;
//   - Retry-After is compared by presence, not value.
//
// Message IDs, ETags, Location, the cursors of searches and of the audit
// log, invitation and audit IDs, timestamps and problem details are
// compared as they are: both stores number and time those alike.
//
// Each seed is a subtest, so one can be run alone:
//
//	HERALD_TEST_STORE=postgres go test -race -run 'TestStoresAgree/seed=3' ./http
//
// HERALD_AGREE_SEEDS (say "11,12,13") runs other seeds instead, for
// exploring; HERALD_AGREE_STEPS sets how many steps each takes, and
// HERALD_AGREE_TRACE=1 logs every step.
//
// Left out: live delivery on streams (only the events a resumed stream
// replays from the change log are compared, see opStream), the backup
// (bbolt streams a file where PostgreSQL answers 501, by the contract,
// and only bbolt's is audited), the docs and the web client (static),
// HEAD (openapi.json does not describe it), concurrency (requests go one
// at a time), the background chores (sweeps, trimming, retention), trusted
// proxies and the per-account write limit (unlimited, as in newEnv).
func TestStoresAgree(t *testing.T) {
	if !onPostgres(t) {
		t.Skipf("comparing bbolt with PostgreSQL needs PostgreSQL: run with %s=postgres", testStoreEnv)
	}
	cases := []agreeCase{
		{seed: 1, mode: heraldhttp.RegistrationOpen, steps: 200},
		{seed: 2, mode: heraldhttp.RegistrationInvite, steps: 200},
		{seed: 3, mode: heraldhttp.RegistrationOpen, steps: 200, ttl: 6 * time.Hour},
		{seed: 4, mode: heraldhttp.RegistrationClosed, steps: 120},
	}
	if v := os.Getenv("HERALD_AGREE_SEEDS"); v != "" {
		cases = nil
		modes := []heraldhttp.Registration{heraldhttp.RegistrationOpen, heraldhttp.RegistrationInvite, heraldhttp.RegistrationOpen, heraldhttp.RegistrationClosed}
		for f := range strings.SplitSeq(v, ",") {
			seed, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("HERALD_AGREE_SEEDS=%q: %v", v, err)
			}
			c := agreeCase{seed: seed, mode: modes[seed%4], steps: 350}
			if seed%3 == 0 {
				c.ttl = 6 * time.Hour
			}
			cases = append(cases, c)
		}
	}
	if v := os.Getenv("HERALD_AGREE_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("HERALD_AGREE_STEPS=%q: %v", v, err)
		}
		for i := range cases {
			cases[i].steps = n
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed=%d", c.seed), func(t *testing.T) { runAgree(t, c) })
	}
}

type agreeCase struct {
	seed  uint64
	mode  heraldhttp.Registration
	steps int
	ttl   time.Duration // of tokens; 0 for the default
}

// agreeMaxReports is how many divergences one seed reports before it
// stops: later ones are mostly the first one's consequences.
const agreeMaxReports = 8

// agreeHeaders are the response headers compared, besides the status and
// the body. Retry-After is compared by presence alone: its value is a
// rounding of each limiter's own state (a difference is logged).
var agreeHeaders = []string{"Content-Type", "ETag", "Location", "Link", "Cache-Control", "WWW-Authenticate",
	"Allow", "X-Content-Type-Options", "Content-Disposition", "Retry-After"}

// agreeServer is one of the two servers, with what its own answers bound
// the run's logical names to: tokens, accounts, messages, invitations,
// codes and cursors each server gave out, which that server's later
// requests use.
type agreeServer struct {
	name string
	e    *env

	tokens      map[int]string   // logical token -> the token
	users       map[int]uint64   // logical account -> its ID
	msgs        map[int]uint64   // logical message -> its ID
	etags       map[int][]string // logical message -> its ETags, oldest first
	invites     map[int]uint64   // logical invitation -> its ID
	inviteCodes map[int]string
	resetCodes  map[int]string
	// handles are the public handles of tokens, learnt from listings
	// made with them (the item marked current), both ways.
	handles    map[int]string
	handleOf   map[string]int
	searchNext string
	listNext   string
	auditNext  string

	// names renames values by order of first appearance, per class.
	names  map[string]string
	counts map[string]int
	// known is every renamed string with its name, replaced wherever it
	// shows (headers, links, details).
	known map[string]string
	// echo is what this step's request put in its path, with its name, for
	// the problem details that repeat it.
	echo map[string]string
	// spent is the time its requests took, checks of openapi.json included.
	spent time.Duration
	// userNames names account IDs by logical account, so that one
	// registration refused by one server alone does not shift the names
	// of all the later ones.
	userNames map[string]string
	// issue is what this step's answer gives out, named by logical
	// index: an account, a token, a code.
	issue agreeIssue
}

type agreeIssue struct {
	user, token int    // -1: none
	code        string // the code's name; "": none
}

var agreeNoIssue = agreeIssue{user: -1, token: -1}

func newAgreeServer(name string, e *env) *agreeServer {
	return &agreeServer{name: name, e: e,
		tokens: map[int]string{}, users: map[int]uint64{}, msgs: map[int]uint64{}, etags: map[int][]string{},
		invites: map[int]uint64{}, inviteCodes: map[int]string{}, resetCodes: map[int]string{}, handles: map[int]string{}, handleOf: map[string]int{},
		names: map[string]string{}, counts: map[string]int{}, known: map[string]string{},
		userNames: map[string]string{}, issue: agreeNoIssue}
}

// rename returns the placeholder of value in class, giving it the next one
// on first appearance.
func (s *agreeServer) rename(class, value string) string {
	key := class + "\x00" + value
	if n, ok := s.names[key]; ok {
		return n
	}
	s.counts[class]++
	n := fmt.Sprintf("<%s%d>", class, s.counts[class])
	s.names[key] = n
	if class != "unknown-user" && value != "" {
		s.known[value] = n
	}
	return n
}

// userName names an account ID: by its logical account, or by order of
// first appearance for one the run does not know.
func (s *agreeServer) userName(id string) string {
	if n, ok := s.userNames[id]; ok {
		return n
	}
	if s.issue.user >= 0 {
		n := fmt.Sprintf("<u%d>", s.issue.user)
		s.userNames[id] = n
		return n
	}
	return s.rename("unknown-user", id)
}

// Bindings used in requests. A logical thing this server never gave out
// (it diverged earlier) becomes something it cannot know.
const (
	agreeMissingID    = "987654321"
	agreeMalformedTok = "herald_not-a-token"
)

func (s *agreeServer) userID(u int) string {
	id, ok := s.users[u]
	if !ok {
		return agreeMissingID
	}
	v := strconv.FormatUint(id, 10)
	s.echo[v] = s.userName(v)
	return v
}

func (s *agreeServer) msgID(m int) string {
	id, ok := s.msgs[m]
	if !ok {
		return agreeMissingID
	}
	return strconv.FormatUint(id, 10)
}

func (s *agreeServer) inviteID(i int) string {
	id, ok := s.invites[i]
	if !ok {
		return agreeMissingID
	}
	return strconv.FormatUint(id, 10)
}

func (s *agreeServer) etag(m, back int) string {
	tags := s.etags[m]
	if len(tags) == 0 {
		return `"0-0"`
	}
	return tags[max(0, len(tags)-1-back)]
}

// agreeNorm is an answer as compared.
type agreeNorm struct {
	status int
	header []string
	body   string
}

var agreeOrigin = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

// normalise renames what may legitimately differ in res; kind says which
// listing a "next" cursor belongs to.
func (s *agreeServer) normalise(kind string, res *response) agreeNorm {
	out := agreeNorm{status: res.Status}
	body := string(res.Body)
	if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "json") && len(res.Body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(res.Body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			v = s.walk(kind, "", v)
			if kind == "tokens" {
				agreeSortTies(v)
			}
			b, err := json.Marshal(v)
			if err == nil {
				body = string(b)
			}
		} else {
			body = "NOT JSON: " + body
		}
	}
	out.body = body
	for _, h := range agreeHeaders {
		v := strings.Join(res.Header.Values(h), ", ")
		if h == "Retry-After" && v != "" {
			v = "(present)"
		}
		if v != "" {
			out.header = append(out.header, h+": "+s.replaceKnown(v))
		}
	}
	return out
}

// walk renames, in a decoded JSON value, the values that may differ: the
// shape of each object says what its "id" is.
func (s *agreeServer) walk(kind, key string, v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = s.walk(kind, key, x[i])
		}
		return out
	case map[string]any:
		shape := agreeShape(x)
		out := make(map[string]any, len(x))
		// Sorted, so names are given in the same order on both servers
		// ("code" before "url").
		for _, k := range slices.Sorted(maps.Keys(x)) {
			val := x[k]
			str, isStr := val.(string)
			num, isNum := val.(json.Number)
			switch {
			case k == "id" && isNum && (shape == "user" || shape == "target:user"):
				out[k] = s.userName(string(num))
			case k == "id" && isStr && shape == "tokeninfo":
				// Handles are random: named by the logical token they
				// were learnt for, the others alike.
				if lt, ok := s.handleOf[str]; ok {
					out[k] = fmt.Sprintf("<handle of t%d>", lt)
				} else {
					out[k] = "<handle>"
				}
			case k == "token" && isStr && s.issue.token >= 0:
				out[k] = fmt.Sprintf("<t%d>", s.issue.token)
				s.known[str] = out[k].(string)
			case k == "code" && isStr && s.issue.code != "":
				out[k] = s.issue.code
				s.known[str] = s.issue.code
			case k == "token" || k == "code":
				out[k] = s.rename(k, fmt.Sprint(val))
			case k == "next" && isStr && kind == "accounts":
				out[k] = s.rename("cursor", str)
			case (k == "detail" || k == "message" && shape == "violation") && isStr:
				out[k] = s.replaceEcho(s.replaceKnown(str))
			case isStr:
				out[k] = s.replaceKnown(str)
			default:
				out[k] = s.walk(kind, k, val)
			}
		}
		return out
	case string:
		return s.replaceKnown(x)
	}
	return v
}

// agreeSortTies puts the tokens of a listing created at the same instant
// in one order on both servers. Both stores list newest first and break
// ties by the token's hash, which is random: two tokens issued in the same
// microsecond come in an order no client can predict, and that differs
// between any two servers.
func agreeSortTies(v any) {
	page, _ := v.(map[string]any)
	items, _ := page["items"].([]any)
	key := func(it any) string {
		m, _ := it.(map[string]any)
		s, _ := m["createdAt"].(string)
		return s
	}
	whole := func(it any) string {
		b, _ := json.Marshal(it)
		return string(b)
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && key(items[j]) == key(items[i]) {
			j++
		}
		slices.SortStableFunc(items[i:j], func(a, b any) int { return strings.Compare(whole(a), whole(b)) })
		i = j
	}
}

// agreeShape says what an object of the API is, by its fields.
func agreeShape(x map[string]any) string {
	has := func(k string) bool { _, ok := x[k]; return ok }
	switch {
	case has("action") && has("at"):
		return "audit"
	case has("current") && has("lastUsedAt"):
		return "tokeninfo"
	case has("maxUses"):
		return "invite"
	case has("content"):
		return "message"
	case has("propertyPath"):
		return "violation"
	case has("type") && has("id"):
		t, _ := x["type"].(string)
		return "target:" + t
	case has("email"):
		return "user"
	}
	return ""
}

func (s *agreeServer) replaceKnown(v string) string {
	v = agreeOrigin.ReplaceAllString(v, "<origin>")
	// Tokens and codes carry their prefix; cursors show in links.
	if !strings.Contains(v, "herald_") && !strings.Contains(v, "cursor=") {
		return v
	}
	// Longest first, so a code inside a URL is replaced whole.
	for _, k := range slices.SortedFunc(maps.Keys(s.known), func(a, b string) int { return len(b) - len(a) }) {
		if strings.Contains(v, k) {
			v = strings.ReplaceAll(v, k, s.known[k])
		}
	}
	return v
}

// replaceEcho renames in a problem's words the IDs this step's request
// named in its path.
func (s *agreeServer) replaceEcho(v string) string {
	for actual, name := range s.echo {
		re := regexp.MustCompile(`(^|[^0-9])` + regexp.QuoteMeta(actual) + `($|[^0-9])`)
		v = re.ReplaceAllString(v, "${1}"+name+"${2}")
	}
	return v
}

// The logical model of the run: what the generator knows, to choose
// requests that mean something. It follows bbolt's answers; where the
// servers disagree, the comparison has already said so.
type (
	agreeUser struct {
		email, password string
		gone, suspended bool
		admin           bool
	}
	agreeToken struct {
		user    int
		dead    bool
		expires time.Time
	}
	agreeMsg struct {
		owner   int
		gone    bool
		content string
	}
	agreeInvite struct {
		gone bool
	}
	agreeReset struct {
		user int
		used bool
	}
	agreeQuery struct {
		params url.Values
	}
)

type agreeRun struct {
	seen    map[string]int // requests by route and bbolt's status, for the log
	trace   bool           // log every step (HERALD_AGREE_TRACE=1)
	issue   agreeIssue     // what the next exchange's answer gives out
	pgURL   string         // the PostgreSQL database's, to ANALYZE it
	events  []string       // IDs of stream events seen
	t       *testing.T
	c       agreeCase
	rng     *rand.Rand
	clock   *testClock
	srv     [2]*agreeServer
	step    int
	reports int
	unknown string // a well-formed token no server issued

	users   []*agreeUser
	tokens  []*agreeToken
	msgs    []*agreeMsg
	invites []*agreeInvite
	resets  []*agreeReset
	times   []time.Time // creation times of messages, for since and until
	keyed   [4]string   // the content first sent with each Idempotency-Key opPostKeyed uses
	retry   func()      // sends opPostKeyed's last create again

	search, accounts, audit *agreeQuery // the last listing of each with a next page
	emailSerial             int
	passwordSerial          int
}

func runAgree(t *testing.T, c agreeCase) {
	r := newAgreeRun(t, c)
	r.bootstrap()
	r.run()
}

// newAgreeRun starts the two servers on one clock, each on a fresh store.
func newAgreeRun(t *testing.T, c agreeCase) *agreeRun {
	clock := &testClock{now: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	dir := t.TempDir()
	bdb, err := bolt.Open(filepath.Join(dir, "herald.db"), testDBOptions(bolt.Options{Now: clock.Now}))
	if err != nil {
		t.Fatal(err)
	}
	pdb, pgURL := openAgreePostgres(t, filepath.Join(dir, "herald-pg"), clock.Now)
	opts := []envOption{withRegistration(c.mode), func(cfg *heraldhttp.Config) { cfg.Version = "agree (test)" }}
	if c.ttl == 0 {
		c.ttl = heraldhttp.DefaultTokenTTL
	}
	opts = append(opts, withTokenTTL(c.ttl))
	r := &agreeRun{pgURL: pgURL, issue: agreeNoIssue, seen: map[string]int{}, trace: os.Getenv("HERALD_AGREE_TRACE") != "", t: t, c: c, rng: rand.New(rand.NewPCG(c.seed, c.seed^0x5eed)), clock: clock,
		unknown: mintCode(t, auth.TokenPrefix)}
	r.srv[0] = newAgreeServer("bbolt", newEnvOn(t, bdb, clock, opts...))
	r.srv[1] = newAgreeServer("postgres", newEnvOn(t, pdb, clock, opts...))
	return r
}

// run takes c.steps random steps, then compares what the stores hold.
func (r *agreeRun) run() {
	t, c := r.t, r.c
	ops := r.ops()
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	// Once in every run, whatever the draws: the statistics that plan
	// searches with words on PostgreSQL, an account past the most tokens
	// it may hold, and the clock stepping back in each way it matters.
	manyLogins, analyze, backwards := c.steps/2, c.steps/3, 2*c.steps/3
	for r.step < c.steps && r.reports < agreeMaxReports {
		if r.step >= manyLogins {
			r.opManyLogins()
			manyLogins = c.steps * 2
		}
		if users := r.liveUsers(); r.step >= backwards && len(users) > 0 {
			for story := range 3 {
				r.clockStepsBack(users[r.pick(len(users))], story)
			}
			backwards = c.steps * 2
		}
		if r.step >= analyze {
			r.analyze()
			analyze = c.steps * 2
		}
		r.advance()
		n := r.rng.IntN(total)
		for _, o := range ops {
			if n -= o.weight; n < 0 {
				o.run()
				break
			}
		}
	}
	var routes []string
	for _, k := range slices.Sorted(maps.Keys(r.seen)) {
		routes = append(routes, fmt.Sprintf("%5d  %s", r.seen[k], k))
	}
	t.Logf("seed %d (%s): %d steps; time in requests: bbolt %v, postgres %v; requests by route and bbolt's status:\n%s",
		c.seed, c.mode, r.step, r.srv[0].spent.Round(time.Millisecond), r.srv[1].spent.Round(time.Millisecond), strings.Join(routes, "\n"))
	if r.reports >= agreeMaxReports {
		t.Errorf("seed %d: stopped at step %d after %d divergences", c.seed, r.step, r.reports)
		return
	}
	// What is stored agrees too.
	var counts [2]bolt.Counts
	for i, s := range r.srv {
		var err error
		if counts[i], err = storeCounts(s.e.DB); err != nil {
			t.Fatal(err)
		}
	}
	if counts[0] != counts[1] {
		t.Errorf("seed %d: record counts differ after %d steps: bbolt %+v, postgres %+v", c.seed, r.step, counts[0], counts[1])
	}
}

// openAgreePostgres opens the PostgreSQL database openTestStore makes for
// path, as openTestStore does but reading the statistics of the search
// terms every 50ms, not every 15s: searches with words are planned
// from them once the run has analyzed the table (see analyze), so the
// plans that read postings or walk windows are compared too, not only
// the one planned per request that a database without statistics uses.
func openAgreePostgres(t *testing.T, path string, now func() time.Time) (*pg.DB, string) {
	t.Helper()
	if err := openTestStore(t, path, now).Close(); err != nil {
		t.Fatal(err)
	}
	url, _ := pgDatabases.Load(path)
	db, err := pg.Open(context.Background(), url.(string), pg.Options{Now: now, PoolSize: 6, PollEvery: 100 * time.Millisecond,
		TermStatsEvery: 50 * time.Millisecond, Timeout: time.Minute}) // as openTestStore's
	if err != nil {
		t.Fatal(err)
	}
	return db, url.(string)
}

// analyze has PostgreSQL gather the statistics of the messages' terms
// and waits for the store to read them: searches with words are then
// planned from them (pg/termstats.go).
func (r *agreeRun) analyze() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.pgURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "ANALYZE messages"); err != nil {
		r.t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond) // three reads of the statistics
	if r.trace {
		var terms int
		err := conn.QueryRow(ctx, `SELECT coalesce(array_length(most_common_elems::text::text[], 1), 0) FROM pg_stats
			WHERE schemaname = current_schema() AND tablename = 'messages' AND attname = 'terms'`).Scan(&terms)
		r.t.Logf("step %d: analyzed the messages on PostgreSQL: statistics of %d terms (%v)", r.step, terms, err)
	}
}

type agreeOp struct {
	weight int
	run    func()
}

func (r *agreeRun) ops() []agreeOp {
	return []agreeOp{
		{6, r.opRegister},
		{3, r.opRegisterBad},
		{6, r.opLogin},
		{2, r.opLogout},
		{3, r.opMe},
		{3, r.opTokens},
		{2, r.opRevokeToken},
		{1, r.opRevokeAll},
		{2, r.opChangePassword},
		{1, r.opDeleteMe},
		{16, r.opPost},
		{6, r.opPostKeyed},
		{3, r.opPostBad},
		{7, r.opGet},
		{7, r.opPatch},
		{5, r.opDelete},
		{18, r.opSearch},
		{3, r.opAccounts},
		{2, r.opAccount},
		{3, r.opAccountPatch},
		{1, r.opAccountDelete},
		{1, r.opAccountMessagesDelete},
		{3, r.opReset},
		{3, r.opInvite},
		{2, r.opAudit},
		{2, r.opMisc},
		{2, r.opGuessBurst},
		{1, r.opRegisterBurst},
		{2, r.opBulkPost},
		{1, r.opStream},
		{2, r.opScenario},
	}
}

// exchange sends one request, built for each server from its own
// bindings, to both, and compares the answers. build must not draw from
// the generator: both servers must get the same request.
func (r *agreeRun) exchange(desc, kind string, build func(s *agreeServer) request) [2]*response {
	r.t.Helper()
	r.step++
	var (
		reqs [2]request
		res  [2]*response
		got  [2]agreeNorm
	)
	for i, s := range r.srv {
		s.echo = map[string]string{}
		s.issue = r.issue
		reqs[i] = build(s)
		start := time.Now()
		res[i] = s.e.do(reqs[i])
		s.spent += time.Since(start)
		got[i] = s.normalise(kind, res[i])
		s.issue = agreeNoIssue
	}
	r.issue = agreeNoIssue
	r.seen[fmt.Sprintf("%s %s %d", reqs[0].Method, agreeRoute(reqs[0].Path), res[0].Status)]++
	if r.trace {
		r.t.Logf("step %d at %s: %s -> %d %d", r.step, r.clock.Now().Format(time.RFC3339Nano), desc, res[0].Status, res[1].Status)
	}
	if a, b := res[0].Header.Get("Retry-After"), res[1].Header.Get("Retry-After"); a != "" && b != "" && a != b {
		r.t.Logf("seed %d step %d: %s: Retry-After differs (compared by presence only): bbolt %s, postgres %s", r.c.seed, r.step, desc, a, b)
	}
	if diff := agreeDiff(got[0], got[1]); diff != "" && r.reports < agreeMaxReports {
		r.reports++
		var b strings.Builder
		fmt.Fprintf(&b, "seed %d step %d: the stores disagree on %s\n%s", r.c.seed, r.step, desc, diff)
		for i, s := range r.srv {
			fmt.Fprintf(&b, "  %s request:  %s\n", s.name, agreeShowRequest(reqs[i]))
			fmt.Fprintf(&b, "  %s response: %d %s\n", s.name, res[i].Status, truncate(res[i].Body, 600))
		}
		for i, s := range r.srv {
			body := got[i].body
			if !r.trace {
				body = agreeTrunc(body, 600)
			}
			fmt.Fprintf(&b, "  %s normalised: %d %v %s\n", s.name, got[i].status, got[i].header, body)
		}
		r.t.Error(b.String())
	}
	return res
}

func agreeDiff(a, b agreeNorm) string {
	var d strings.Builder
	if a.status != b.status {
		fmt.Fprintf(&d, "  status: bbolt %d, postgres %d\n", a.status, b.status)
	}
	if !slices.Equal(a.header, b.header) {
		fmt.Fprintf(&d, "  headers: bbolt %q\n           postgres %q\n", a.header, b.header)
	}
	if a.body != b.body {
		i := 0
		for i < len(a.body) && i < len(b.body) && a.body[i] == b.body[i] {
			i++
		}
		from := max(0, i-200)
		fmt.Fprintf(&d, "  normalised bodies differ at byte %d:\n    bbolt    ...%s\n    postgres ...%s\n", i,
			agreeTrunc(a.body[from:], 400), agreeTrunc(b.body[from:], 400))
	}
	return d.String()
}

func agreeShowRequest(req request) string {
	s := req.Method + " " + req.Path
	if req.Token != "" {
		s += " [Bearer " + agreeTrunc(req.Token, 16) + "]"
	}
	for k, vs := range req.Header {
		s += fmt.Sprintf(" [%s: %s]", k, strings.Join(vs, ", "))
	}
	if req.ContentType != "" {
		s += " [" + agreeTrunc(req.ContentType, 40) + "]"
	}
	if req.Body != "" {
		s += " " + agreeTrunc(strconv.Quote(req.Body), 300)
	}
	return s
}

func agreeTrunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// advance moves the one clock both servers read, now and then.
func (r *agreeRun) advance() {
	switch n := r.rng.IntN(100); {
	case n < 40:
	case n < 80:
		r.clock.Advance(time.Duration(r.rng.Int64N(int64(3 * time.Second))))
	case n < 93:
		r.clock.Advance(time.Duration(r.rng.Int64N(int64(10*time.Minute))) + time.Minute)
	case n < 96:
		r.clock.Advance(time.Duration(r.rng.Int64N(int64(30*time.Hour))) + time.Hour)
	case n < 99:
		// The clock steps back, as a system clock may (an NTP step).
		r.clock.Advance(-time.Duration(r.rng.Int64N(int64(5 * time.Minute))))
	default:
		r.clock.Advance(8 * 24 * time.Hour)
	}
}

func (r *agreeRun) pick(n int) int { return r.rng.IntN(n) }
func (r *agreeRun) chance(p float64) bool {
	return r.rng.Float64() < p
}

// Special logical tokens.
const (
	tokNone      = -1
	tokMalformed = -2
	tokUnknown   = -3
)

func (s *agreeServer) token(lt int, unknown string) string {
	switch lt {
	case tokNone:
		return ""
	case tokMalformed:
		return agreeMalformedTok
	case tokUnknown:
		return unknown
	}
	if tok, ok := s.tokens[lt]; ok {
		return tok
	}
	return unknown
}

func (r *agreeRun) tokenName(lt int) string {
	switch lt {
	case tokNone:
		return "no token"
	case tokMalformed:
		return "a malformed token"
	case tokUnknown:
		return "an unknown token"
	}
	return fmt.Sprintf("t%d(u%d)", lt, r.tokens[lt].user)
}

func (r *agreeRun) live(lt int) bool {
	if lt < 0 {
		return false
	}
	tk := r.tokens[lt]
	u := r.users[tk.user]
	return !tk.dead && !u.gone && !u.suspended && r.clock.Now().Before(tk.expires)
}

// liveTokens lists the logical tokens that should work, of user u (or of
// anyone, u < 0).
func (r *agreeRun) liveTokens(u int) []int {
	var out []int
	for i, tk := range r.tokens {
		if r.live(i) && (u < 0 || tk.user == u) {
			out = append(out, i)
		}
	}
	return out
}

func (r *agreeRun) liveUsers() []int {
	var out []int
	for i, u := range r.users {
		if !u.gone && !u.suspended {
			out = append(out, i)
		}
	}
	return out
}

// anyToken is a token for an ordinary request: mostly one that works,
// sometimes one that does not.
func (r *agreeRun) anyToken() int {
	switch n := r.pick(100); {
	case n < 84:
		return r.tokenOf(-1)
	case n < 92:
		if len(r.tokens) > 0 {
			return r.pick(len(r.tokens))
		}
		return tokUnknown
	case n < 95:
		return tokNone
	case n < 97:
		return tokMalformed
	default:
		return tokUnknown
	}
}

// tokenOf returns a working token of user u (anyone when u < 0), logging
// in for one when none works; tokUnknown when that fails too.
func (r *agreeRun) tokenOf(u int) int {
	if live := r.liveTokens(u); len(live) > 0 {
		return live[r.pick(len(live))]
	}
	if u < 0 {
		users := r.liveUsers()
		if len(users) == 0 {
			return tokUnknown
		}
		u = users[r.pick(len(users))]
	}
	if r.users[u].gone || r.users[u].suspended {
		return tokUnknown
	}
	if lt, ok := r.login(u, r.users[u].email, r.users[u].password, "json"); ok {
		return lt
	}
	return tokUnknown
}

// adminToken returns a working token of an administrator.
func (r *agreeRun) adminToken() int {
	var admins []int
	for i, u := range r.users {
		if u.admin && !u.gone && !u.suspended {
			admins = append(admins, i)
		}
	}
	if len(admins) == 0 {
		return tokUnknown
	}
	for _, a := range admins {
		if live := r.liveTokens(a); len(live) > 0 {
			return live[r.pick(len(live))]
		}
	}
	return r.tokenOf(admins[r.pick(len(admins))])
}

// adminOrNot is the caller of an administration request: mostly an
// administrator, sometimes someone else.
func (r *agreeRun) adminOrNot() int {
	switch n := r.pick(100); {
	case n < 85:
		return r.adminToken()
	case n < 95:
		return r.tokenOf(-1)
	default:
		return []int{tokNone, tokMalformed, tokUnknown}[r.pick(3)]
	}
}

// agreeBody encodes fields, in order, as format: json (values are JSON
// already when raw), form or multipart with a fixed boundary, so both
// servers get the same bytes.
func agreeBody(format string, fields [][2]string) (contentType, body string) {
	switch format {
	case "form":
		var parts []string
		for _, f := range fields {
			parts = append(parts, url.QueryEscape(f[0])+"="+url.QueryEscape(f[1]))
		}
		return "application/x-www-form-urlencoded", strings.Join(parts, "&")
	case "multipart":
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		if err := mw.SetBoundary("agreeboundary0123456789"); err != nil {
			panic(err)
		}
		for _, f := range fields {
			if err := mw.WriteField(f[0], f[1]); err != nil {
				panic(err)
			}
		}
		if err := mw.Close(); err != nil {
			panic(err)
		}
		return mw.FormDataContentType(), buf.String()
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f[0])
		v, _ := json.Marshal(f[1])
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	ct := "application/json"
	if format == "merge" {
		ct = "application/merge-patch+json"
	}
	return ct, b.String()
}

func (r *agreeRun) format() string {
	switch n := r.pick(10); {
	case n < 6:
		return "json"
	case n < 8:
		return "form"
	default:
		return "multipart"
	}
}

// bootstrap makes the first administrator, as the operator does, and a
// few accounts, on both servers alike.
func (r *agreeRun) bootstrap() {
	r.t.Helper()
	root := "root@example.com"
	if r.c.mode == heraldhttp.RegistrationOpen {
		r.register(root, pw, "json", -1, "")
		for _, s := range r.srv {
			s.e.makeAdmin(root)
		}
		r.users[0].admin = true
		r.register("Ada@Example.com", pw, "json", -1, "")
		r.register("straße@example.com", pw, "form", -1, "")
		// Look-alikes of root's address: one taken (409), one refused as
		// an address (422).
		for _, email := range []string{lookAlike(root), "\uff52oot@example.com"} {
			r.exchange("register a look-alike of "+root, "", func(*agreeServer) request {
				return request{Method: "POST", Path: "/api/register", ContentType: "application/json",
					Body: fmt.Sprintf(`{"email":%q,"password":%q}`, email, pw)}
			})
		}
		return
	}
	// Registration needs an invitation, or is closed: the accounts are
	// made on the server's machine.
	emails := []string{root, "Ada@Example.com", "straße@example.com", "ΣΑΣ@example.com"}
	hash, err := auth.NewHasher(fastParams, 1).Hash(context.Background(), pw)
	if err != nil {
		r.t.Fatal(err)
	}
	for i, email := range emails {
		for _, s := range r.srv {
			if i == 0 {
				s.e.makeFirstAdmin(email)
			} else if _, err := s.e.DB.CreateUser(context.Background(), &model.User{Email: email, PasswordHash: hash}, model.TokenHash{byte(i + 1)}, time.Minute, nil); err != nil {
				r.t.Fatal(err)
			}
			u, err := s.e.DB.UserByEmail(context.Background(), email)
			if err != nil {
				r.t.Fatal(err)
			}
			s.users[i] = u.ID
			s.userNames[strconv.FormatUint(u.ID, 10)] = fmt.Sprintf("<u%d>", i)
		}
		r.users = append(r.users, &agreeUser{email: email, password: pw, admin: i == 0})
	}
	for u := range r.users {
		r.login(u, r.users[u].email, pw, "json")
	}
}

// The words messages and searches are made of: common and rare ones,
// letter cases, normalisation forms and scripts where folding is subtle.
var agreeWords = []string{
	"herald", "hello", "world", "message", "the", "quick", "brown", "fox", "lazy", "dog",
	"Straße", "STRASSE", "strasse", "ΣΑΣ", "σας", "σασ", "café", "cafe\u0301", "CAFÉ", "naïve",
	"İstanbul", "istanbul", "\u212Aelvin", "kelvin", "ﬁle", "file", "日本語", "2026", "x1", "zyzzyva",
	"Ünïcödé", "ǅemal", "ǆemal", "ΣΊΣΥΦΟΣ", "σίσυφος", "a\u0308", "ä", "x\u200by", "don't", "e-mail",
	"١٢٣", "ＦＵＬＬ", "full", "🙂", "straße", "MASSE", "maße",
	// Longer than the 64 bytes an index key keeps of a word, two of them
	// alike in their first 64.
	strings.Repeat("long", 16) + "worda", strings.Repeat("long", 16) + "wordb", strings.Repeat("Ω", 40),
}

var agreeSeps = []string{" ", " ", " ", " ", ", ", "-", "'", "! ", "\n", "\t", "...", "/", "_", ". "}

func (r *agreeRun) word() string {
	// Common words more often, so searches find several pages.
	if r.chance(0.4) {
		return agreeWords[r.pick(6)]
	}
	return agreeWords[r.pick(len(agreeWords))]
}

func (r *agreeRun) content() string {
	switch n := r.pick(100); {
	case n < 3:
		return strings.Repeat("é", model.MaxContentChars) // at the limit, in code points
	case n < 5:
		return "  " + r.word() + "  "
	case n < 7:
		return r.word() + "\x00" + r.word()
	}
	var b strings.Builder
	for i := range 1 + r.pick(8) {
		if i > 0 {
			b.WriteString(agreeSeps[r.pick(len(agreeSeps))])
		}
		b.WriteString(r.word())
	}
	return b.String()
}

// caseVariant spells s in another letter case or normalisation form.
func (r *agreeRun) caseVariant(s string) string {
	switch r.pick(5) {
	case 0:
		return strings.ToUpper(s)
	case 1:
		return strings.ToLower(s)
	case 2:
		return norm.NFD.String(s)
	case 3:
		var b strings.Builder
		for i, c := range s {
			if i%2 == 0 {
				b.WriteString(strings.ToUpper(string(c)))
			} else {
				b.WriteRune(c)
			}
		}
		return b.String()
	}
	return s
}

// lookAlike is s drawn alike in other letters: Latin small capital o
// for o, the digit 1 for l (s itself when it has neither).
func lookAlike(s string) string {
	return strings.NewReplacer("o", "\u1d0f", "l", "1").Replace(s)
}

func (r *agreeRun) newEmail() string {
	r.emailSerial++
	locals := []string{"user", "Zoë", "straße", "ΣΑΣ", "o'brien", "x_y", "Ünïcödé", "dup", "\u212Aelvin", "İris"}
	domains := []string{"example.com", "Example.COM", "exämple.org"}
	return fmt.Sprintf("%s%d@%s", locals[r.pick(len(locals))], r.emailSerial, domains[r.pick(len(domains))])
}

func (r *agreeRun) newPassword() string {
	r.passwordSerial++
	return fmt.Sprintf("new password %d ✓", r.passwordSerial)
}

// register sends a registration and records what it made. invite is a
// logical invitation, or -1 for none; code, when set, is sent as the
// invitation as it is.
func (r *agreeRun) register(email, password, format string, invite int, code string) int {
	fields := [][2]string{{"email", email}, {"password", password}}
	desc := fmt.Sprintf("register %q (%s)", email, format)
	if invite >= 0 {
		desc += fmt.Sprintf(" with invitation i%d", invite)
	} else if code != "" {
		desc += fmt.Sprintf(" with invitation code %.20q", code)
	}
	r.issue = agreeIssue{user: len(r.users), token: len(r.tokens)}
	res := r.exchange(desc, "", func(s *agreeServer) request {
		f := slices.Clone(fields)
		switch {
		case invite >= 0:
			c, ok := s.inviteCodes[invite]
			if !ok {
				c = "herald_invite_missing"
			}
			f = append(f, [2]string{"invite", c})
		case code != "":
			f = append(f, [2]string{"invite", code})
		}
		ct, body := agreeBody(format, f)
		return request{Method: "POST", Path: "/api/register", ContentType: ct, Body: body}
	})
	if res[0].Status != http.StatusCreated {
		return -1
	}
	u := len(r.users)
	r.users = append(r.users, &agreeUser{email: model.NormalizeEmail(email), password: password})
	lt := len(r.tokens)
	r.tokens = append(r.tokens, &agreeToken{user: u, expires: r.clock.Now().Add(r.c.ttl)})
	r.bind(res, func(s *agreeServer, m map[string]any) {
		s.users[u] = agreeUint(m["id"])
		s.tokens[lt] = fmt.Sprint(m["token"])
	}, http.StatusCreated)
	return u
}

// bind calls f with each server's decoded answer, where it has status.
func (r *agreeRun) bind(res [2]*response, f func(s *agreeServer, m map[string]any), status int) {
	for i, s := range r.srv {
		if res[i].Status != status {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(res[i].Body, &m); err != nil {
			r.t.Errorf("%s: %v: %s", s.name, err, res[i].Body)
			continue
		}
		f(s, m)
	}
}

func agreeUint(v any) uint64 {
	f, _ := v.(float64)
	return uint64(f)
}

// login logs u in with email and password and records the token.
func (r *agreeRun) login(u int, email, password, format string) (int, bool) {
	ct, body := agreeBody(format, [][2]string{{"username", email}, {"password", password}})
	r.issue = agreeIssue{user: -1, token: len(r.tokens)}
	res := r.exchange(fmt.Sprintf("login %q (%s, u%d)", email, format, u), "", func(*agreeServer) request {
		return request{Method: "POST", Path: "/api/login", ContentType: ct, Body: body}
	})
	if res[0].Status != http.StatusOK || u < 0 {
		return 0, false
	}
	lt := len(r.tokens)
	r.tokens = append(r.tokens, &agreeToken{user: u, expires: r.clock.Now().Add(r.c.ttl)})
	r.bind(res, func(s *agreeServer, m map[string]any) { s.tokens[lt] = fmt.Sprint(m["token"]) }, http.StatusOK)
	return lt, true
}

func (r *agreeRun) opRegister() {
	email := r.newEmail()
	if r.chance(0.15) {
		email = "  " + email + " "
	}
	if n := len(r.users); n > 0 && r.chance(0.1) {
		// The e-mail of an account deleted since, or taken.
		email = r.caseVariant(r.users[r.pick(n)].email)
	}
	invite, code := -1, ""
	if r.c.mode != heraldhttp.RegistrationClosed {
		switch n := r.pick(100); {
		case n < 70 && len(r.invites) > 0:
			invite = r.pick(len(r.invites))
		case n < 80:
			code = mintCode(r.t, auth.InvitePrefix)
		case n < 85:
			code = "come in"
		}
	}
	r.register(email, pw, r.format(), invite, code)
}

func (r *agreeRun) opRegisterBad() {
	var desc, ct, body string
	switch r.pick(14) {
	case 0, 1:
		var taken []int
		for i, u := range r.users {
			if !u.gone {
				taken = append(taken, i)
			}
		}
		if len(taken) == 0 {
			return
		}
		e := r.users[taken[r.pick(len(taken))]].email
		if r.pick(2) == 0 {
			e = r.caseVariant(e)
		} else {
			e = lookAlike(e)
		}
		if r.c.mode == heraldhttp.RegistrationInvite && len(r.invites) > 0 {
			// A taken e-mail with a good invitation: refused, and the
			// invitation's use not taken.
			r.register(e, pw, "json", r.pick(len(r.invites)), "")
			return
		}
		desc, ct, body = "register a taken e-mail in another spelling, or a look-alike", "application/json", fmt.Sprintf(`{"email":%q,"password":%q}`, e, pw)
	case 2:
		desc, ct, body = "register without an e-mail", "application/json", fmt.Sprintf(`{"password":%q}`, pw)
	case 3:
		bads := []string{"no-at-sign", "a@@b.c", "@example.com", "a@", "a b@example.com", "ada\u200b@example.com", "\u202eada@example.com", "a@b\x01",
			"\uff52oot@example.com", "root@example\u3002com", "ro\u2c9ft@example.com"}
		bad := bads[r.pick(len(bads))]
		desc, ct, body = "register a bad address", "application/json", fmt.Sprintf(`{"email":%q,"password":%q}`, bad, pw)
	case 4:
		p := []string{"short", "          ", strings.Repeat("p", 1025), "1234567"}[r.pick(4)]
		desc, ct, body = "register a bad password", "application/json", fmt.Sprintf(`{"email":"weak%d@example.com","password":%q}`, r.pick(1000), p)
	case 5:
		desc, ct, body = "register with an unknown field", "application/json", fmt.Sprintf(`{"email":"x@example.com","password":%q,"nickname":"x"}`, pw)
	case 6:
		desc, ct, body = "register with a read-only field", "application/json", fmt.Sprintf(`{"email":"x@example.com","password":%q,"roles":["ROLE_ADMIN"]}`, pw)
	case 7:
		desc, ct, body = "register with bad JSON", "application/json", `{"email":`
	case 8:
		desc, ct, body = "register as text/plain", "text/plain", "email=x@example.com"
	case 9:
		desc, ct, body = "register with a number for an e-mail", "application/json", fmt.Sprintf(`{"email":5,"password":%q}`, pw)
	case 10:
		desc, ct, body = "register with an empty body", "application/json", ""
	case 11:
		desc, ct, body = "register with a JSON array", "application/json", "[]"
	case 12:
		desc, ct, body = "register with a duplicate field", "application/json", fmt.Sprintf(`{"email":"a@example.com","email":"b@example.com","password":%q}`, pw)
	default:
		long := strings.Repeat("a", 250) + "@example.com"
		desc, ct, body = "register a 262-byte address", "application/json", fmt.Sprintf(`{"email":%q,"password":%q}`, long, pw)
	}
	res := r.exchange(desc, "", func(*agreeServer) request {
		return request{Method: "POST", Path: "/api/register", ContentType: ct, Body: body}
	})
	if res[0].Status == http.StatusCreated {
		r.t.Errorf("seed %d step %d: %s was accepted: %s", r.c.seed, r.step, desc, res[0].Body)
	}
}

func (r *agreeRun) opLogin() {
	if len(r.users) == 0 {
		return
	}
	u := r.pick(len(r.users))
	email, password := r.users[u].email, r.users[u].password
	switch n := r.pick(100); {
	case n < 20:
		email = r.caseVariant(email)
	case n < 25:
		email = " " + email + "  "
	case n < 40:
		password = "wrong password"
	case n < 45:
		email, u = "nobody@example.com", -1
	case n < 48:
		password = ""
	case n < 50:
		email = ""
	}
	if lt, ok := r.login(u, email, password, r.format()); ok {
		_ = lt
	}
}

func (r *agreeRun) opLogout() {
	lt := r.anyToken()
	res := r.exchange("logout with "+r.tokenName(lt), "", func(s *agreeServer) request {
		return request{Method: "POST", Path: "/api/logout", Token: s.token(lt, r.unknown)}
	})
	if res[0].Status == http.StatusNoContent && lt >= 0 {
		r.tokens[lt].dead = true
	}
}

func (r *agreeRun) opMe() {
	lt := r.anyToken()
	r.exchange("me with "+r.tokenName(lt), "", func(s *agreeServer) request {
		return request{Method: "GET", Path: "/api/me", Token: s.token(lt, r.unknown)}
	})
}

func (r *agreeRun) opTokens() {
	lt := r.anyToken()
	r.listTokens(lt)
}

// listTokens lists the tokens of lt's account with lt, learning lt's
// handle on each server from the item marked current.
func (r *agreeRun) listTokens(lt int) {
	res := r.exchange("list tokens with "+r.tokenName(lt), "tokens", func(s *agreeServer) request {
		return request{Method: "GET", Path: "/api/me/tokens", Token: s.token(lt, r.unknown)}
	})
	if lt < 0 {
		return
	}
	for i, s := range r.srv {
		var page struct {
			Items []struct {
				ID      string `json:"id"`
				Current bool   `json:"current"`
			} `json:"items"`
		}
		if res[i].Status != http.StatusOK || json.Unmarshal(res[i].Body, &page) != nil {
			continue
		}
		for _, it := range page.Items {
			if it.Current {
				s.handles[lt], s.handleOf[it.ID] = it.ID, lt
			}
		}
	}
}

func (r *agreeRun) opRevokeToken() {
	// A working token whose handle both servers have shown.
	var known []int
	for _, lt := range r.liveTokens(-1) {
		if r.srv[0].handles[lt] != "" && r.srv[1].handles[lt] != "" {
			known = append(known, lt)
		}
	}
	if len(known) == 0 || r.chance(0.2) {
		r.listTokens(r.tokenOf(-1))
		return
	}
	target := known[r.pick(len(known))]
	owner := r.tokens[target].user
	caller := r.tokenOf(owner)
	bogus := ""
	switch n := r.pick(10); {
	case n < 2:
		caller = r.tokenOf(-1) // someone's, maybe not the owner's
	case n < 3:
		bogus = []string{"nope", "AAAAAAAAAAAAAAAAAAAAAA", "%20", "0"}[r.pick(4)]
	}
	desc := fmt.Sprintf("revoke token t%d of u%d by its handle, with %s", target, owner, r.tokenName(caller))
	if bogus != "" {
		desc = fmt.Sprintf("revoke token %q with %s", bogus, r.tokenName(caller))
	}
	res := r.exchange(desc, "", func(s *agreeServer) request {
		h := bogus
		if h == "" {
			h = s.handles[target]
			s.echo[h] = fmt.Sprintf("<handle of t%d>", target)
		}
		return request{Method: "DELETE", Path: "/api/me/tokens/" + h, Token: s.token(caller, r.unknown)}
	})
	if res[0].Status == http.StatusNoContent && bogus == "" {
		r.tokens[target].dead = true
	}
}

func (r *agreeRun) opRevokeAll() {
	lt := r.anyToken()
	res := r.exchange("log out everywhere with "+r.tokenName(lt), "", func(s *agreeServer) request {
		return request{Method: "DELETE", Path: "/api/me/tokens", Token: s.token(lt, r.unknown)}
	})
	if res[0].Status == http.StatusNoContent && lt >= 0 {
		for _, tk := range r.tokens {
			if tk.user == r.tokens[lt].user {
				tk.dead = true
			}
		}
	}
}

func (r *agreeRun) opChangePassword() {
	lt := r.anyToken()
	current, next := "", r.newPassword()
	if lt >= 0 {
		current = r.users[r.tokens[lt].user].password
	}
	switch n := r.pick(10); {
	case n < 2:
		current = "not my password"
	case n < 3:
		next = "short"
	case n < 4:
		current = ""
	}
	ct, body := agreeBody(r.format(), [][2]string{{"currentPassword", current}, {"newPassword", next}})
	res := r.exchange(fmt.Sprintf("change password with %s to %q", r.tokenName(lt), next), "", func(s *agreeServer) request {
		return request{Method: "POST", Path: "/api/me/password", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
	if res[0].Status == http.StatusNoContent && lt >= 0 {
		u := r.tokens[lt].user
		r.users[u].password = next
		for i, tk := range r.tokens {
			if tk.user == u && i != lt {
				tk.dead = true
			}
		}
	}
}

func (r *agreeRun) opDeleteMe() {
	lt := r.anyToken()
	password := "wrong password"
	if lt >= 0 && r.chance(0.6) {
		password = r.users[r.tokens[lt].user].password
	}
	if r.chance(0.1) {
		password = ""
	}
	body := fmt.Sprintf(`{"password":%q}`, password)
	res := r.exchange(fmt.Sprintf("delete my account with %s, password %q", r.tokenName(lt), password), "", func(s *agreeServer) request {
		return request{Method: "DELETE", Path: "/api/me", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
	})
	if res[0].Status == http.StatusNoContent && lt >= 0 {
		r.accountGone(r.tokens[lt].user)
	}
}

// accountGone records that u, its tokens and its messages are gone.
func (r *agreeRun) accountGone(u int) {
	r.users[u].gone = true
	for _, tk := range r.tokens {
		if tk.user == u {
			tk.dead = true
		}
	}
	for _, m := range r.msgs {
		if m.owner == u {
			m.gone = true
		}
	}
}

func (r *agreeRun) opPost() {
	path := "/api/messages"
	if r.chance(0.2) {
		path = "/api/message"
	}
	r.post(r.anyToken(), r.content(), r.format(), path)
}

// opPostKeyed sends its last create again (a retry, in another body
// format), or creates with one of a few Idempotency-Keys, mostly with the
// content the key first came with (a retry when the account made it),
// else with new content (a 422 when it did).
func (r *agreeRun) opPostKeyed() {
	if r.retry != nil && r.chance(0.5) {
		r.retry()
		return
	}
	k := r.pick(len(r.keyed))
	if r.keyed[k] == "" || r.chance(0.2) {
		r.keyed[k] = r.content()
	}
	lt, content, key := r.anyToken(), r.keyed[k], fmt.Sprintf(`"agree-%d"`, k)
	r.retry = func() { r.postWith(lt, content, r.format(), "/api/message", key) }
	r.postWith(lt, content, r.format(), "/api/messages", key)
}

func (r *agreeRun) post(lt int, content, format, path string) {
	r.postWith(lt, content, format, path, "")
}

// postWith is post with the Idempotency-Key key ("" for none).
func (r *agreeRun) postWith(lt int, content, format, path, key string) {
	ct, body := agreeBody(format, [][2]string{{"content", content}})
	desc := fmt.Sprintf("post %.60q (%s, %s) with %s", content, format, path, r.tokenName(lt))
	if key != "" {
		desc += " and key " + key
	}
	res := r.exchange(desc, "", func(s *agreeServer) request {
		return request{Method: "POST", Path: path, Token: s.token(lt, r.unknown), ContentType: ct, Body: body, Header: withKey(key)}
	})
	if res[0].Status != http.StatusCreated || lt < 0 {
		return
	}
	if key != "" && slices.Contains(slices.Collect(maps.Values(r.srv[0].msgs)), agreeAnswerID(res[0])) {
		return // the first answer again: no message made
	}
	m := len(r.msgs)
	r.msgs = append(r.msgs, &agreeMsg{owner: r.tokens[lt].user, content: content})
	for i, s := range r.srv {
		if res[i].Status != http.StatusCreated {
			continue
		}
		var msg struct {
			ID        uint64 `json:"id"`
			CreatedAt string `json:"createdAt"`
		}
		if err := json.Unmarshal(res[i].Body, &msg); err != nil {
			continue
		}
		s.msgs[m] = msg.ID
		s.etags[m] = append(s.etags[m], res[i].Header.Get("ETag"))
		if i == 0 {
			if at, err := time.Parse(time.RFC3339Nano, msg.CreatedAt); err == nil {
				r.times = append(r.times, at)
			}
		}
	}
}

// agreeAnswerID is the ID of the message in a create's answer; 0 when
// there is none.
func agreeAnswerID(res *response) uint64 {
	var msg struct {
		ID uint64 `json:"id"`
	}
	_ = json.Unmarshal(res.Body, &msg)
	return msg.ID
}

func (r *agreeRun) opPostBad() {
	lt := r.anyToken()
	var desc, ct, body string
	switch r.pick(11) {
	case 0:
		desc, ct, body = "post empty content", "application/json", `{"content":""}`
	case 1:
		desc, ct, body = "post blank content", "application/json", `{"content":" \t\n "}`
	case 2:
		desc, ct, body = "post content one over the limit", "application/json", fmt.Sprintf(`{"content":%q}`, strings.Repeat("é", model.MaxContentChars+1))
	case 3:
		desc, ct, body = "post bad JSON", "application/json", `{"content":"x"`
	case 4:
		desc, ct, body = "post with an unknown field", "application/json", `{"content":"x","title":"y"}`
	case 5:
		desc, ct, body = "post with a read-only owner", "application/json", `{"content":"x","user":{"email":"root@example.com"}}`
	case 6:
		desc, ct, body = "post a number", "application/json", `{"content":5}`
	case 7:
		desc, ct, body = "post as text/plain", "text/plain", "hello"
	case 8:
		desc, ct, body = "post without content", "application/json", `{}`
	case 9:
		desc, ct, body = "post null content", "application/json", `{"content":null}`
	default:
		desc, ct, body = "post a body over 64 KiB", "application/json", fmt.Sprintf(`{"content":%q}`, strings.Repeat("x", 70000))
	}
	res := r.exchange(desc+" with "+r.tokenName(lt), "", func(s *agreeServer) request {
		return request{Method: "POST", Path: "/api/messages", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
	if res[0].Status == http.StatusCreated {
		r.t.Errorf("seed %d step %d: %s was accepted: %s", r.c.seed, r.step, desc, res[0].Body)
	}
}

// message picks a logical message: mostly one that exists, sometimes a
// deleted one. -1 when there is none.
func (r *agreeRun) message() int {
	if len(r.msgs) == 0 {
		return -1
	}
	var alive []int
	for i, m := range r.msgs {
		if !m.gone {
			alive = append(alive, i)
		}
	}
	if len(alive) > 0 && r.chance(0.85) {
		return alive[r.pick(len(alive))]
	}
	return r.pick(len(r.msgs))
}

// messageRef is a message path segment: a logical message's ID on each
// server, or a raw segment naming none.
func (r *agreeRun) messageRef() (m int, raw, desc string) {
	m = r.message()
	if m < 0 || r.chance(0.08) {
		raw = []string{"999999", "0", "-1", "abc", "1.5", "18446744073709551616", "%20", "00001"}[r.pick(8)]
		return -1, raw, "message " + strconv.Quote(raw)
	}
	state := "alive"
	if r.msgs[m].gone {
		state = "deleted"
	}
	return m, "", fmt.Sprintf("m%d (%s, of u%d)", m, state, r.msgs[m].owner)
}

func (s *agreeServer) msgPath(m int, raw string) string {
	if m < 0 {
		return "/api/messages/" + raw
	}
	return "/api/messages/" + s.msgID(m)
}

// ifMatch chooses an If-Match for message m: none, its current tag, a
// stale one, a wildcard, a weak tag or a list. back is how many tags back.
func (r *agreeRun) ifMatch() (kind string, back int) {
	switch n := r.pick(100); {
	case n < 40:
		return "", 0
	case n < 70:
		return "current", 0
	case n < 85:
		return "stale", 1 + r.pick(2)
	case n < 90:
		return "*", 0
	case n < 95:
		return "weak", 0
	default:
		return "list", 0
	}
}

func (s *agreeServer) ifMatchHeader(kind string, m, back int) http.Header {
	var v string
	switch kind {
	case "":
		return nil
	case "current":
		v = s.etag(m, 0)
	case "stale":
		v = s.etag(m, back)
		if back > 0 && len(s.etags[m]) <= back {
			v = `"1-999"`
		}
	case "*":
		v = "*"
	case "weak":
		v = "W/" + s.etag(m, 0)
	case "list":
		v = `"nope", ` + s.etag(m, 0)
	}
	return http.Header{"If-Match": {v}}
}

func (r *agreeRun) opGet() {
	m, raw, desc := r.messageRef()
	lt := r.anyToken()
	inm := ""
	method := "GET"
	switch n := r.pick(10); {
	case n < 2 && m >= 0:
		inm = "current"
	case n < 3:
		inm = "*"
	}
	r.exchange(fmt.Sprintf("%s %s with %s (If-None-Match: %s)", method, desc, r.tokenName(lt), inm), "", func(s *agreeServer) request {
		req := request{Method: method, Path: s.msgPath(m, raw), Token: s.token(lt, r.unknown)}
		switch inm {
		case "current":
			req.Header = http.Header{"If-None-Match": {s.etag(m, 0)}}
		case "*":
			req.Header = http.Header{"If-None-Match": {"*"}}
		}
		return req
	})
}

// writer picks who writes to message m: in a hundred draws, its owner in
// the first owner (when m exists), another account in the next fifteen,
// then an administrator, then any token at all.
func (r *agreeRun) writer(m, owner int) int {
	switch n := r.pick(100); {
	case n < owner && m >= 0:
		return r.tokenOf(r.msgs[m].owner)
	case n < owner+15:
		return r.tokenOf(-1)
	case n < 90:
		return r.adminToken()
	default:
		return r.anyToken()
	}
}

// write is a PATCH or DELETE of message m (or the raw path's) with lt's
// token and the If-Match chosen.
func (s *agreeServer) write(method string, m int, raw string, lt int, unknown, im string, back int) request {
	req := request{Method: method, Path: s.msgPath(m, raw), Token: s.token(lt, unknown)}
	if m >= 0 {
		req.Header = s.ifMatchHeader(im, m, back)
	}
	return req
}

func (r *agreeRun) opPatch() {
	m, raw, desc := r.messageRef()
	lt := r.writer(m, 65)
	im, back := r.ifMatch()
	content := r.content()
	if m >= 0 && r.chance(0.15) {
		content = r.msgs[m].content // no change
	}
	format := []string{"json", "json", "merge", "merge", "form", "multipart"}[r.pick(6)]
	fields := [][2]string{{"content", content}}
	var ct, body string
	switch n := r.pick(100); {
	case n < 5:
		ct, body = "application/merge-patch+json", `{}`
	case n < 9:
		ct, body = "application/merge-patch+json", `{"content":null}`
	case n < 13:
		ct, body = "application/json", `{"content":""}`
	case n < 16:
		ct, body = "application/json", `{"content":"x","id":5}`
	case n < 18:
		ct, body = "text/plain", "x"
	default:
		ct, body = agreeBody(format, fields)
	}
	res := r.exchange(fmt.Sprintf("PATCH %s with %s, If-Match %s %d, %s %.60q", desc, r.tokenName(lt), im, back, ct, body), "", func(s *agreeServer) request {
		req := s.write("PATCH", m, raw, lt, r.unknown, im, back)
		req.ContentType, req.Body = ct, body
		return req
	})
	if m < 0 || res[0].Status != http.StatusOK {
		return
	}
	if strings.Contains(body, "content") && !strings.Contains(body, "null") {
		r.msgs[m].content = content
	}
	for i, s := range r.srv {
		if res[i].Status == http.StatusOK {
			if tag := res[i].Header.Get("ETag"); tag != s.etag(m, 0) {
				s.etags[m] = append(s.etags[m], tag)
			}
		}
	}
}

func (r *agreeRun) opDelete() {
	m, raw, desc := r.messageRef()
	lt := r.writer(m, 60)
	im, back := r.ifMatch()
	res := r.exchange(fmt.Sprintf("DELETE %s with %s, If-Match %s %d", desc, r.tokenName(lt), im, back), "", func(s *agreeServer) request {
		return s.write("DELETE", m, raw, lt, r.unknown, im, back)
	})
	if m >= 0 && res[0].Status == http.StatusNoContent {
		r.msgs[m].gone = true
	}
}

// timeParam is a bound for since or until: near a message's creation
// time, or far off, in one of the spellings RFC 3339 allows.
func (r *agreeRun) timeParam() string {
	var at time.Time
	switch n := r.pick(100); {
	case n < 70 && len(r.times) > 0:
		at = r.times[r.pick(len(r.times))]
		at = at.Add([]time.Duration{0, 0, time.Microsecond, -time.Microsecond, time.Nanosecond, -time.Nanosecond, time.Second, -time.Second}[r.pick(8)])
	case n < 80:
		at = r.clock.Now()
	case n < 85:
		return "0001-01-01T00:00:00Z"
	case n < 88:
		return "9999-12-31T23:59:59.999999999Z"
	case n < 90:
		return "yesterday"
	default:
		at = r.clock.Now().Add(-time.Duration(r.rng.Int64N(int64(48 * time.Hour))))
	}
	switch r.pick(5) {
	case 0:
		return at.In(time.FixedZone("", 2*3600)).Format(time.RFC3339Nano)
	case 2:
		return at.Format(time.RFC3339)
	case 3:
		// The lower-case 't' and 'z' RFC 3339 allows.
		return strings.ToLower(at.Format(time.RFC3339Nano))
	}
	return at.Format(time.RFC3339Nano)
}

func (r *agreeRun) query() string {
	switch n := r.pick(100); {
	case n < 55:
		return r.caseVariant(r.word())
	case n < 75:
		return r.caseVariant(r.word()) + agreeSeps[r.pick(len(agreeSeps))] + r.caseVariant(r.word())
	case n < 80:
		return "nomatchatall"
	case n < 84:
		return []string{"!!!", "...", " - ", "😀"}[r.pick(4)]
	case n < 86:
		var ws []string
		for i := range 17 {
			ws = append(ws, fmt.Sprintf("w%d", i))
		}
		return strings.Join(ws, " ")
	case n < 88:
		return strings.Repeat("a ", 513)
	case n < 92:
		return "hello world fox dog"
	default:
		return r.word() + " " + r.word() + " " + r.word()
	}
}

func (r *agreeRun) opSearch() {
	lt := r.anyToken()
	if r.search != nil && r.chance(0.45) {
		// The next page of the last search, or its cursor with other
		// filters.
		r.afterSearch(r.nextPage("search", r.search, "/api/messages", "hello", "", lt, func(s *agreeServer) string { return s.searchNext }))
		return
	}
	params := url.Values{}
	if r.chance(0.6) {
		params.Set("q", r.query())
	}
	if r.chance(0.25) && len(r.users) > 0 {
		owner := r.caseVariant(r.users[r.pick(len(r.users))].email)
		switch r.pick(12) {
		case 0:
			owner = "nobody@example.com"
		case 1:
			owner = "   "
		case 2:
			owner = []string{"\x00", "root@example.com\x00", "root%"}[r.pick(3)]
		}
		params.Set("owner", owner)
	}
	if r.chance(0.2) {
		params.Set("since", r.timeParam())
	}
	if r.chance(0.2) {
		params.Set("until", r.timeParam())
	}
	switch n := r.pick(100); {
	case n < 60:
		params.Set("limit", strconv.Itoa(1+r.pick(5)))
	case n < 64:
		params.Set("limit", []string{"0", "101", "x", "100", "-1"}[r.pick(5)])
	}
	raw := params.Encode()
	switch n := r.pick(100); {
	case n < 2:
		raw += "&cursor=AgAAAAAAAAAFAAAAAAAAAAA"
	case n < 4:
		raw += "&cursor=garbage"
	case n < 5:
		raw += "&foo=1"
	case n < 6:
		raw += "&limit=2&limit=3"
	case n < 7:
		raw += "&q=%ff"
	}
	res := r.exchange(fmt.Sprintf("search %s with %s", raw, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "GET", Path: "/api/messages?" + raw, Token: s.token(lt, r.unknown)}
	})
	if p, err := url.ParseQuery(raw); err == nil {
		r.afterSearch(res, p)
	}
}

func (r *agreeRun) afterSearch(res [2]*response, params url.Values) {
	r.search = r.follow(res, params, func(s *agreeServer) *string { return &s.searchNext })
}

// nextPage asks each server for the next page of q at path with its own
// cursor (cursor), its ID sometimes made another; with otherQ (when not
// "") as q now and then, to see a cursor refused for other filters. It
// returns the answers, compared as kind says (exchange), and the
// parameters asked with.
func (r *agreeRun) nextPage(what string, q *agreeQuery, path, otherQ, kind string, lt int, cursor func(*agreeServer) string) ([2]*response, url.Values) {
	params := maps.Clone(q.params)
	desc := what + ", next page"
	if otherQ != "" && r.chance(0.1) {
		params.Set("q", otherQ)
		desc += " with another q"
	}
	tamper := r.tamper()
	if tamper != 0 {
		desc += fmt.Sprintf(" with its cursor's ID made %d", tamper)
	}
	res := r.exchange(fmt.Sprintf("%s of %s with %s", desc, q.params.Encode(), r.tokenName(lt)), kind, func(s *agreeServer) request {
		p := maps.Clone(params)
		p.Set("cursor", agreeTamper(cursor(s), tamper))
		return request{Method: "GET", Path: path + "?" + p.Encode(), Token: s.token(lt, r.unknown)}
	})
	return res, params
}

// follow is the query whose next page a later step may ask for, nil when
// bbolt's page was the last; each server's own cursor goes where next
// says.
func (r *agreeRun) follow(res [2]*response, params url.Values, next func(s *agreeServer) *string) *agreeQuery {
	if pageNext(res[0]) == "" {
		return nil
	}
	params = maps.Clone(params)
	params.Del("cursor")
	for i, s := range r.srv {
		*next(s) = pageNext(res[i])
	}
	return &agreeQuery{params: params}
}

// pageNext is a page's next cursor, or "" when it has none.
func pageNext(res *response) string {
	var page struct {
		Next *string `json:"next"`
	}
	if res.Status != http.StatusOK || json.Unmarshal(res.Body, &page) != nil || page.Next == nil {
		return ""
	}
	return *page.Next
}

func (r *agreeRun) opAccounts() {
	lt := r.adminOrNot()
	if r.accounts != nil && r.chance(0.5) {
		r.afterAccounts(r.nextPage("list accounts", r.accounts, "/api/admin/users", "zzz", "accounts", lt, func(s *agreeServer) string { return s.listNext }))
		return
	}
	params := url.Values{}
	switch n := r.pick(100); {
	case n < 40 && len(r.users) > 0:
		e := r.users[r.pick(len(r.users))].email
		i := r.pick(len(e))
		j := min(len(e), i+1+r.pick(6))
		for i > 0 && !utf8.RuneStart(e[i]) {
			i--
		}
		for j < len(e) && !utf8.RuneStart(e[j]) {
			j++
		}
		params.Set("q", r.caseVariant(e[i:j]))
	case n < 70:
		params.Set("q", []string{"%", "_", "\\", "example", "EXAMPLE.COM", "ß", "ss", "SS", "σ", "Σ", "@", "zzz", " ", "\x00", "ä", "a\u0308", "'"}[r.pick(17)])
	}
	switch n := r.pick(100); {
	case n < 60:
		params.Set("limit", strconv.Itoa(1+r.pick(4)))
	case n < 65:
		params.Set("limit", []string{"0", "101", "x"}[r.pick(3)])
	}
	raw := params.Encode()
	if r.chance(0.03) {
		raw += "&owner=x"
	}
	res := r.exchange(fmt.Sprintf("list accounts %s with %s", raw, r.tokenName(lt)), "accounts", func(s *agreeServer) request {
		return request{Method: "GET", Path: "/api/admin/users?" + raw, Token: s.token(lt, r.unknown)}
	})
	if p, err := url.ParseQuery(raw); err == nil {
		r.afterAccounts(res, p)
	}
}

var agreeDigits = regexp.MustCompile(`/[^/?]*[0-9][^/?]*`)

// agreeRoute is a request's path without its query, IDs and handles
// shown as {}.
func agreeRoute(path string) string {
	path, _, _ = strings.Cut(path, "?")
	if strings.HasPrefix(path, "/api/me/tokens/") {
		return "/api/me/tokens/{}"
	}
	return agreeDigits.ReplaceAllString(path, "/{}")
}

// tamper is, now and then, an ID to put in a cursor in place of the one
// the server wrote (0: leave it): cursors are opaque, but nothing stops a
// client from editing one, and both stores must then answer alike.
func (r *agreeRun) tamper() uint64 {
	if !r.chance(0.2) {
		return 0
	}
	newest := uint64(len(r.msgs) + len(r.users) + 5)
	return []uint64{1, 2, 3, newest, newest + 1000, math.MaxInt64 - 1, math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}[r.pick(9)]
}

// agreeTamper puts id in cursor in place of the ID it holds, keeping its
// format and fingerprint (see encodeCursor in messages.go).
func agreeTamper(cursor string, id uint64) string {
	if id == 0 {
		return cursor
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(b) != 17 {
		return cursor
	}
	binary.BigEndian.PutUint64(b[1:], id)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (r *agreeRun) afterAccounts(res [2]*response, params url.Values) {
	r.accounts = r.follow(res, params, func(s *agreeServer) *string { return &s.listNext })
}

// account picks a logical account for an administration request: -1 and
// a raw segment for one that names none.
func (r *agreeRun) account() (u int, raw, desc string) {
	if len(r.users) == 0 || r.chance(0.06) {
		raw = []string{"999999", "0", "abc", "-3"}[r.pick(4)]
		return -1, raw, "account " + strconv.Quote(raw)
	}
	u = r.pick(len(r.users))
	state := ""
	switch {
	case r.users[u].gone:
		state = ", deleted"
	case r.users[u].suspended:
		state = ", suspended"
	}
	if r.users[u].admin {
		state += ", admin"
	}
	return u, "", fmt.Sprintf("u%d (%s%s)", u, r.users[u].email, state)
}

func (s *agreeServer) accountPath(u int, raw string) string {
	if u < 0 {
		return "/api/admin/users/" + raw
	}
	return "/api/admin/users/" + s.userID(u)
}

func (r *agreeRun) opAccount() {
	lt := r.adminOrNot()
	u, raw, desc := r.account()
	r.exchange(fmt.Sprintf("get account %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "GET", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown)}
	})
}

func (r *agreeRun) opAccountPatch() {
	lt := r.adminOrNot()
	u, raw, desc := r.account()
	var body string
	var suspend, admin *bool
	t, f := true, false
	switch n := r.pick(100); {
	case n < 30:
		suspend = &t
		body = `{"suspended":true}`
	case n < 55:
		suspend = &f
		body = `{"suspended":false}`
	case n < 70:
		admin = &t
		body = `{"admin":true}`
	case n < 80:
		admin = &f
		body = `{"admin":false}`
	case n < 85:
		suspend, admin = &t, &f
		body = `{"suspended":true,"admin":false}`
	case n < 88:
		body = `{}`
	case n < 91:
		body = `{"suspended":"yes"}`
	case n < 94:
		body = `{"email":"x@example.com"}`
	case n < 96:
		body = `{"suspended":null}`
	default:
		body = `{"nope":1}`
	}
	ct := "application/merge-patch+json"
	if r.chance(0.2) {
		ct = "application/json"
	}
	res := r.exchange(fmt.Sprintf("PATCH account %s with %s: %s", desc, r.tokenName(lt), body), "", func(s *agreeServer) request {
		return request{Method: "PATCH", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
	if u < 0 || res[0].Status != http.StatusOK {
		return
	}
	if suspend != nil {
		if *suspend && !r.users[u].suspended {
			for _, tk := range r.tokens {
				if tk.user == u {
					tk.dead = true
				}
			}
		}
		r.users[u].suspended = *suspend
	}
	if admin != nil {
		r.users[u].admin = *admin
	}
}

func (r *agreeRun) opAccountDelete() {
	lt := r.adminOrNot()
	u, raw, desc := r.account()
	res := r.exchange(fmt.Sprintf("delete account %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "DELETE", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown)}
	})
	if u >= 0 && res[0].Status == http.StatusNoContent {
		r.accountGone(u)
	}
}

func (r *agreeRun) opAccountMessagesDelete() {
	lt := r.adminOrNot()
	u, raw, desc := r.account()
	res := r.exchange(fmt.Sprintf("delete the messages of %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "DELETE", Path: s.accountPath(u, raw) + "/messages", Token: s.token(lt, r.unknown)}
	})
	if u >= 0 && res[0].Status == http.StatusNoContent {
		for _, m := range r.msgs {
			if m.owner == u {
				m.gone = true
			}
		}
	}
}

func (r *agreeRun) opReset() {
	if len(r.resets) == 0 || r.chance(0.4) {
		u, raw, desc := r.account()
		r.makeReset(r.adminOrNot(), u, raw, desc)
		return
	}
	k := r.pick(len(r.resets))
	next := r.newPassword()
	code := ""
	switch n := r.pick(100); {
	case n < 8:
		code = mintCode(r.t, auth.ResetPrefix)
	case n < 12:
		code = "herald_reset_nope"
	case n < 15:
		next = "short"
	case n < 17:
		code = " "
	}
	r.useReset(k, code, next)
}

// makeReset has lt make a password reset for account u (raw when u < 0)
// and returns the logical reset, or -1.
func (r *agreeRun) makeReset(lt, u int, raw, desc string) int {
	r.issue = agreeIssue{user: -1, token: -1, code: fmt.Sprintf("<reset code r%d>", len(r.resets))}
	res := r.exchange(fmt.Sprintf("make a password reset for %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "POST", Path: s.accountPath(u, raw) + "/password-reset", Token: s.token(lt, r.unknown)}
	})
	if u < 0 || res[0].Status != http.StatusCreated {
		return -1
	}
	for _, old := range r.resets {
		if old.user == u {
			old.used = true // replaced
		}
	}
	k := len(r.resets)
	r.resets = append(r.resets, &agreeReset{user: u})
	r.bind(res, func(s *agreeServer, m map[string]any) { s.resetCodes[k] = fmt.Sprint(m["code"]) }, http.StatusCreated)
	return k
}

// useReset sets the password next with reset k's code, or with code when
// it is not empty.
func (r *agreeRun) useReset(k int, code, next string) {
	desc := fmt.Sprintf("reset the password with code r%d (of u%d, used %v) to %q", k, r.resets[k].user, r.resets[k].used, next)
	if code != "" {
		desc = fmt.Sprintf("reset a password with code %.24q to %q", code, next)
	}
	format := r.format()
	res := r.exchange(desc, "", func(s *agreeServer) request {
		c := code
		if c == "" {
			c = s.resetCodes[k]
		}
		ct, body := agreeBody(format, [][2]string{{"code", c}, {"newPassword", next}})
		return request{Method: "POST", Path: "/api/password-reset", ContentType: ct, Body: body}
	})
	if res[0].Status == http.StatusNoContent && code == "" {
		u := r.resets[k].user
		r.resets[k].used = true
		r.users[u].password = next
		for _, tk := range r.tokens {
			if tk.user == u {
				tk.dead = true
			}
		}
	}
}

// patchAccount has lt send body as a merge patch of account u.
func (r *agreeRun) patchAccount(lt, u int, body string) *response {
	res := r.exchange(fmt.Sprintf("PATCH account u%d with %s: %s", u, r.tokenName(lt), body), "", func(s *agreeServer) request {
		return request{Method: "PATCH", Path: s.accountPath(u, ""), Token: s.token(lt, r.unknown), ContentType: "application/merge-patch+json", Body: body}
	})
	if res[0].Status == http.StatusOK {
		var a struct {
			Roles     []string `json:"roles"`
			Suspended bool     `json:"suspended"`
		}
		if json.Unmarshal(res[0].Body, &a) == nil {
			if a.Suspended && !r.users[u].suspended {
				for _, tk := range r.tokens {
					if tk.user == u {
						tk.dead = true
					}
				}
			}
			r.users[u].suspended = a.Suspended
			r.users[u].admin = slices.Contains(a.Roles, model.RoleAdmin)
		}
	}
	return res[0]
}

// clockStepsBack has the clock step back a little between two acts of u
// that both stores time: two logins, which each note the account's last
// sight; a message created, then another, whose creation time must not
// fall below the first's; failed logins counted against
// u, then u's own login once the limit would have let it in, had the
// clock not gone back.
func (r *agreeRun) clockStepsBack(u, story int) {
	back := time.Duration(30+r.pick(150)) * time.Second
	switch story {
	case 0:
		r.login(u, r.users[u].email, r.users[u].password, "json")
		r.clock.Advance(back)
		r.login(u, r.users[u].email, r.users[u].password, "json")
		r.clock.Advance(-back)
		r.login(u, r.users[u].email, r.users[u].password, "json")
		admin := r.adminToken()
		r.exchange(fmt.Sprintf("get account u%d with %s", u, r.tokenName(admin)), "", func(s *agreeServer) request {
			return request{Method: "GET", Path: s.accountPath(u, ""), Token: s.token(admin, r.unknown)}
		})
	case 1:
		// The newest message is kept: when it is deleted before the step,
		// the stores differ, by design. bbolt's floor is the newest
		// message it holds, PostgreSQL's the newest it ever created
		// (change_counter.message_created), which a deletion does not
		// lower; so a message created after the step is dated from the
		// deleted one on PostgreSQL alone.
		lt := r.tokenOf(u)
		r.post(lt, "the newest, for now", "json", "/api/messages")
		r.clock.Advance(-back)
		r.post(lt, "created after the clock stepped back", "json", "/api/messages")
	default:
		for range 11 {
			r.login(u, r.users[u].email, "wrong password", "json")
		}
		r.clock.Advance(auth.LoginFailuresPerAccount().Every + back)
		r.login(-1, "nobody@example.com", "wrong password", "json")
		r.clock.Advance(-2 * back)
		r.login(u, r.users[u].email, r.users[u].password, "json")
	}
}

// opScenario plays one short story whose steps random choice seldom
// strings together.
func (r *agreeRun) opScenario() {
	var plain []int // accounts that work and are not administrators
	for _, u := range r.liveUsers() {
		if !r.users[u].admin {
			plain = append(plain, u)
		}
	}
	if len(plain) == 0 {
		return
	}
	u := plain[r.pick(len(plain))]
	desc := fmt.Sprintf("u%d (%s)", u, r.users[u].email)
	switch r.pick(6) {
	case 5: // the clock steps back, as a system clock may
		r.clockStepsBack(u, r.pick(3))
	case 0: // a reset, then a suspension, then the code
		k := r.makeReset(r.adminToken(), u, "", desc)
		r.patchAccount(r.adminToken(), u, `{"suspended":true}`)
		if k >= 0 {
			r.useReset(k, "", r.newPassword())
		}
		r.patchAccount(r.adminToken(), u, `{"suspended":false}`)
		r.login(u, r.users[u].email, r.users[u].password, "json")
	case 1: // a reset replaced by another
		k1 := r.makeReset(r.adminToken(), u, "", desc)
		k2 := r.makeReset(r.adminToken(), u, "", desc)
		if k1 >= 0 && k2 >= 0 {
			r.useReset(k1, "", r.newPassword())
			r.useReset(k2, "", r.newPassword())
			r.useReset(k2, "", r.newPassword())
		}
		r.login(u, r.users[u].email, r.users[u].password, "json")
	case 2: // a reset, then the owner changes the password
		k := r.makeReset(r.adminToken(), u, "", desc)
		lt := r.tokenOf(u)
		next := r.newPassword()
		res := r.exchange("change password with "+r.tokenName(lt), "", func(s *agreeServer) request {
			return request{Method: "POST", Path: "/api/me/password", Token: s.token(lt, r.unknown), ContentType: "application/json",
				Body: fmt.Sprintf(`{"currentPassword":%q,"newPassword":%q}`, r.users[u].password, next)}
		})
		if res[0].Status == http.StatusNoContent {
			r.users[u].password = next
		}
		if k >= 0 {
			r.useReset(k, "", r.newPassword())
		}
	case 3: // an administrator made, acting, and unmade
		root := r.adminToken()
		r.patchAccount(root, u, `{"admin":true}`)
		lt := r.tokenOf(u)
		r.exchange("list accounts with the new administrator's "+r.tokenName(lt), "accounts", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/admin/users?limit=2", Token: s.token(lt, r.unknown)}
		})
		r.patchAccount(lt, u, `{"admin":false}`)
		r.exchange("audit log with "+r.tokenName(lt), "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/admin/audit?limit=3", Token: s.token(lt, r.unknown)}
		})
	default: // an invitation used up
		lt := r.adminToken()
		r.issue = agreeIssue{user: -1, token: -1, code: fmt.Sprintf("<invite code i%d>", len(r.invites))}
		res := r.exchange("create an invitation for one", "", func(s *agreeServer) request {
			return request{Method: "POST", Path: "/api/admin/invites", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: `{"maxUses":1}`}
		})
		if res[0].Status != http.StatusCreated {
			return
		}
		k := len(r.invites)
		r.invites = append(r.invites, &agreeInvite{})
		r.bind(res, func(s *agreeServer, m map[string]any) {
			s.invites[k] = agreeUint(m["id"])
			s.inviteCodes[k] = fmt.Sprint(m["code"])
		}, http.StatusCreated)
		r.register(r.newEmail(), pw, "json", k, "")
		r.register(r.newEmail(), pw, "json", k, "")
		r.exchange("list invitations", "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/admin/invites", Token: s.token(lt, r.unknown)}
		})
	}
}

func (r *agreeRun) opInvite() {
	lt := r.adminOrNot()
	switch n := r.pick(100); {
	case n < 50:
		var body string
		switch n := r.pick(100); {
		case n < 40:
			body = `{}`
		case n < 60:
			body = fmt.Sprintf(`{"maxUses":%d}`, 1+r.pick(3))
		case n < 75:
			body = fmt.Sprintf(`{"maxUses":2,"expiresAt":%q}`, r.clock.Now().Add(time.Duration(1+r.pick(48))*time.Hour).Format(time.RFC3339Nano))
		case n < 80:
			body = fmt.Sprintf(`{"expiresAt":%q}`, r.clock.Now().Add(-time.Hour).Format(time.RFC3339))
		case n < 85:
			body = `{"maxUses":0}`
		case n < 88:
			body = `{"maxUses":1.5}`
		case n < 91:
			body = `{"expiresAt":"tomorrow"}`
		case n < 94:
			body = `{"maxUses":10001}`
		case n < 97:
			body = `{"code":"mine"}`
		default:
			body = `{"maxUses":"2"}`
		}
		r.issue = agreeIssue{user: -1, token: -1, code: fmt.Sprintf("<invite code i%d>", len(r.invites))}
		res := r.exchange(fmt.Sprintf("create an invitation %s with %s", body, r.tokenName(lt)), "", func(s *agreeServer) request {
			return request{Method: "POST", Path: "/api/admin/invites", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
		})
		if res[0].Status != http.StatusCreated {
			return
		}
		k := len(r.invites)
		r.invites = append(r.invites, &agreeInvite{})
		r.bind(res, func(s *agreeServer, m map[string]any) {
			s.invites[k] = agreeUint(m["id"])
			s.inviteCodes[k] = fmt.Sprint(m["code"])
		}, http.StatusCreated)
	case n < 75:
		r.exchange("list invitations with "+r.tokenName(lt), "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/admin/invites", Token: s.token(lt, r.unknown)}
		})
	default:
		k, raw := -1, ""
		if len(r.invites) == 0 || r.chance(0.1) {
			raw = []string{"999999", "0", "x"}[r.pick(3)]
		} else {
			k = r.pick(len(r.invites))
		}
		res := r.exchange(fmt.Sprintf("revoke invitation i%d %q with %s", k, raw, r.tokenName(lt)), "", func(s *agreeServer) request {
			id := raw
			if k >= 0 {
				id = s.inviteID(k)
			}
			return request{Method: "DELETE", Path: "/api/admin/invites/" + id, Token: s.token(lt, r.unknown)}
		})
		if k >= 0 && res[0].Status == http.StatusNoContent {
			r.invites[k].gone = true
		}
	}
}

func (r *agreeRun) opAudit() {
	lt := r.adminOrNot()
	if r.audit != nil && r.chance(0.5) {
		r.afterAudit(r.nextPage("audit log", r.audit, "/api/admin/audit", "", "", lt, func(s *agreeServer) string { return s.auditNext }))
		return
	}
	params := url.Values{}
	switch n := r.pick(100); {
	case n < 70:
		params.Set("limit", strconv.Itoa(1+r.pick(5)))
	case n < 75:
		params.Set("limit", []string{"0", "201", "x"}[r.pick(3)])
	case n < 78:
		params.Set("cursor", "garbage")
	}
	raw := params.Encode()
	res := r.exchange(fmt.Sprintf("audit log %s with %s", raw, r.tokenName(lt)), "", func(s *agreeServer) request {
		return request{Method: "GET", Path: "/api/admin/audit?" + raw, Token: s.token(lt, r.unknown)}
	})
	r.afterAudit(res, params)
}

func (r *agreeRun) afterAudit(res [2]*response, params url.Values) {
	r.audit = r.follow(res, params, func(s *agreeServer) *string { return &s.auditNext })
}

// opGuessBurst sends failed guesses in a row, past the guessing limits
// sometimes: wrong passwords for one account, wrong invitation or reset
// codes, wrong current passwords.
func (r *agreeRun) opGuessBurst() {
	n := 2 + r.pick(12)
	switch r.pick(4) {
	case 0, 1:
		if len(r.users) == 0 {
			return
		}
		u := r.pick(len(r.users))
		for i := range n {
			password := "wrong password"
			if i == n-1 && r.chance(0.5) {
				password = r.users[u].password // the right one, after the failures
			}
			r.login(u, r.caseVariant(r.users[u].email), password, "json")
		}
	case 2:
		for range n {
			code := mintCode(r.t, auth.ResetPrefix)
			r.exchange("guess a reset code", "", func(*agreeServer) request {
				return request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
					Body: fmt.Sprintf(`{"code":%q,"newPassword":"a guessed password"}`, code)}
			})
		}
	default:
		lt := r.tokenOf(-1)
		for range n {
			r.exchange("change password with a wrong current one, with "+r.tokenName(lt), "", func(s *agreeServer) request {
				return request{Method: "POST", Path: "/api/me/password", Token: s.token(lt, r.unknown), ContentType: "application/json",
					Body: `{"currentPassword":"a wrong guess","newPassword":"never stored"}`}
			})
		}
	}
}

// opRegisterBurst registers several accounts in a row, past the limit on
// registrations sometimes.
func (r *agreeRun) opRegisterBurst() {
	for range 3 + r.pick(10) {
		r.opRegister()
	}
}

// opBulkPost posts several messages of one account in a row, so searches
// have pages to go through.
func (r *agreeRun) opBulkPost() {
	lt := r.tokenOf(-1)
	for range 3 + r.pick(12) {
		if r.chance(0.3) {
			r.clock.Advance(time.Duration(r.rng.Int64N(int64(time.Millisecond))))
		}
		r.post(lt, r.content(), "json", "/api/messages")
	}
}

// opManyLogins logs one account in past the most tokens it may hold, the
// clock moving between logins, and then uses its oldest tokens.
func (r *agreeRun) opManyLogins() {
	users := r.liveUsers()
	if len(users) == 0 {
		return
	}
	u := users[r.pick(len(users))]
	first := len(r.tokens)
	for range model.MaxTokensPerUser + 2 - len(r.liveTokens(u)) {
		r.clock.Advance(time.Millisecond + time.Duration(r.rng.Int64N(int64(time.Millisecond))))
		r.login(u, r.users[u].email, r.users[u].password, "json")
	}
	var oldest []int
	for lt, tk := range r.tokens {
		if tk.user == u && len(oldest) < 4 {
			oldest = append(oldest, lt)
		}
	}
	oldest = append(oldest, first)
	for _, lt := range oldest {
		if lt < len(r.tokens) {
			r.exchange("me with the old token "+r.tokenName(lt), "", func(s *agreeServer) request {
				return request{Method: "GET", Path: "/api/me", Token: s.token(lt, r.unknown)}
			})
		}
	}
}

// opStream opens a live stream resuming after an event, with a filter
// sometimes, on both servers, and compares the first events each sends
// from its change log. The stream is otherwise left out: only what a
// resume replays is compared, not live delivery.
func (r *agreeRun) opStream() {
	// A token of its own, logged out once the streams are closed: a
	// stream checks its token again in the background, on the server's
	// own timer, which notes a use at whatever the shared clock says by
	// then; the two servers' timers would note different times, and the
	// token's lastUsedAt and its account's lastSeenAt differ for no fault
	// of either store. Once logged out, the token notes nothing more.
	lt := []int{tokNone, tokMalformed, tokUnknown}[r.pick(3)]
	if users := r.liveUsers(); len(users) > 0 && r.chance(0.9) {
		u := users[r.pick(len(users))]
		var ok bool
		if lt, ok = r.login(u, r.users[u].email, r.users[u].password, "json"); !ok {
			return
		}
		defer r.exchange("logout with the stream's token "+r.tokenName(lt), "", func(s *agreeServer) request {
			r.tokens[lt].dead = true
			return request{Method: "POST", Path: "/api/logout", Token: s.token(lt, r.unknown)}
		})
	}
	last := "0"
	switch n := r.pick(10); {
	case n < 5 && len(r.events) > 0:
		last = r.events[r.pick(len(r.events))]
	case n < 8:
		last = strconv.Itoa(r.pick(r.step + 1))
	case n < 9:
		last = []string{"x", "-1", "99999999", "18446744073709551615"}[r.pick(4)]
	}
	query := ""
	switch r.pick(4) {
	case 0:
		query = "q=" + url.QueryEscape(r.caseVariant(r.word()))
	case 1:
		if len(r.users) > 0 {
			query = "owner=" + url.QueryEscape(r.caseVariant(r.users[r.pick(len(r.users))].email))
		}
	}
	r.step++
	desc := fmt.Sprintf("stream %s after event %s with %s", query, last, r.tokenName(lt))
	var got [2][]string
	for i, s := range r.srv {
		res, st := s.e.tryStream(s.token(lt, r.unknown), query, last)
		if res != nil {
			n := s.normalise("", res)
			got[i] = append(got[i], fmt.Sprintf("refused: %d %v %s", n.status, n.header, n.body))
			continue
		}
		// A resumed stream sends what its log holds at once, in one write:
		// bbolt's events are read until a short quiet, PostgreSQL's as
		// many as bbolt sent, each waited for longer, then one more
		// looked for briefly.
		for k := range 4 {
			wait := 150 * time.Millisecond
			switch {
			case i == 0 && k == 0:
				wait = 400 * time.Millisecond
			case i == 1 && k < len(got[0]):
				wait = 2 * time.Second
			}
			ev, ok := st.tryNext(wait)
			if !ok {
				break
			}
			data := ev.Data
			var v any
			dec := json.NewDecoder(strings.NewReader(data))
			dec.UseNumber()
			if dec.Decode(&v) == nil {
				b, _ := json.Marshal(s.walk("", "", v))
				data = string(b)
			}
			got[i] = append(got[i], fmt.Sprintf("id=%s event=%s data=%s", ev.ID, ev.Event, data))
			if i == 0 && ev.ID != "" {
				r.events = append(r.events, ev.ID)
			}
		}
		st.close()
	}
	if r.trace {
		r.t.Logf("step %d: %s -> %d %d events", r.step, desc, len(got[0]), len(got[1]))
	}
	if !slices.Equal(got[0], got[1]) && r.reports < agreeMaxReports {
		r.reports++
		r.t.Errorf("seed %d step %d: the stores disagree on %s\n  bbolt:    %q\n  postgres: %q", r.c.seed, r.step, desc, got[0], got[1])
	}
}

func (r *agreeRun) opMisc() {
	switch r.pick(7) {
	case 0, 1:
		lt := r.anyToken()
		if r.chance(0.4) {
			lt = r.adminToken()
		}
		r.exchange("info with "+r.tokenName(lt), "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/info", Token: s.token(lt, r.unknown)}
		})
	case 2:
		r.exchange("health", "", func(*agreeServer) request { return request{Method: "GET", Path: "/healthz"} })
	case 3:
		lt := r.anyToken()
		r.exchange("an unknown route", "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/nothing/here", Token: s.token(lt, r.unknown)}
		})
	case 4:
		m, raw, desc := r.messageRef()
		lt := r.anyToken()
		r.exchange("PUT "+desc, "", func(s *agreeServer) request {
			return request{Method: "PUT", Path: s.msgPath(m, raw), Token: s.token(lt, r.unknown), ContentType: "application/json", Body: `{"content":"x"}`}
		})
	case 5:
		lt := r.anyToken()
		r.exchange("POST /api/me", "", func(s *agreeServer) request {
			return request{Method: "POST", Path: "/api/me", Token: s.token(lt, r.unknown)}
		})
	default:
		lt := r.anyToken()
		r.exchange("GET /api/messages/stream/x", "", func(s *agreeServer) request {
			return request{Method: "GET", Path: "/api/messages/stream/x", Token: s.token(lt, r.unknown)}
		})
	}
}
