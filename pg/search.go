package pg

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Search. A message matches when its terms — model.SortedTerms of its
// content, stored in messages.terms, a text[] under a GIN index — contain
// every term of the query (terms @> query), it belongs to the owner asked
// for, and it was created in [since, until). Pages are newest first by ID,
// and a cursor is the ID to go on below, exactly as in the bbolt store:
// IDs and creation times both rise in commit order (the counter row gives
// them out), so since and until become ID bounds, read from the
// (created_at, id) index, and a cursor neither skips nor repeats a message
// while others are created or deleted.
//
// Cost. A query without words never walks more than its page: the newest
// messages through the primary key, or an owner's through (owner_id, id).
// A query with words could: the bbolt store walks posting lists and stops
// a page after a budget of steps; here PostgreSQL picks the plan, and the
// budget is a span of IDs. A page is looked for in ID windows below the
// cursor, each its own branch of one UNION ALL, read in order until the
// page is full: the newest windowSizes[0] IDs first, then the next
// windowSizes[1], and so on. Within a window PostgreSQL either walks the
// primary key (or the owner's index) down through at most the window's
// messages, filtering on the terms — the right plan when the words are
// common — or intersects the words' GIN posting lists and reads only the
// matches in the window — the right plan when one is rare. Either way a
// window costs at most its own messages, whatever the estimate that chose
// the plan, so words that seldom meet (each common, so PostgreSQL walks;
// together almost never) cost at most searchSpan messages for one page,
// not the whole table. When the windows are spent before the page is
// full, the page comes back short with a cursor below the last window, as
// a bbolt page that spent its steps does, and the client goes on from
// there. A page deep in the results costs what the first does: the
// windows start at its cursor. A first page's windows start at the newest
// message ID this instance knows of, or below until when the search has
// one; the newest window is open above, so messages another instance
// created since are found too.
//
// Which plan is right depends on the words. With PostgreSQL's statistics
// of the terms, Herald chooses (termstats.go) and sends the search in one
// of two forms, each written so it can be run one way only: the walk down
// the IDs in windows, or the read of the rarest word's postings. The
// postings bound that search's cost as the windows bound a walk's, and
// the index hands each window a word's whole posting list anyway, so it
// has one window reaching down to the first message: a rare word's
// matches are found however old, as bbolt's walk of the word's postings
// finds them. Each form is planned once; a search filtered by owner or
// time, and every search before there are statistics, is planned for its
// own values each time (its transaction sets plan_cache_mode for itself),
// in the form that reads postings when its rarest word is rare and in
// windows otherwise, while every other statement keeps the plan it was
// prepared with.
//
// A search is one round trip. A page without words, which walks an index
// for at most its own rows, is sent together with other reads
// (readbatch.go): a client that goes away stops waiting for it, and the
// batch still runs it. So is a search with words that, by the statistics,
// fills its page within the first window (termstats.go's choose): it costs
// little more than a page without words, and a round trip of its own would
// cost more than the search
// (docs/performance.md, "PostgreSQL: searches sent together"). Those go in
// batches of their own, so no read waits behind a search. Any other search
// with words — expected to spend its windows, or planned for its values —
// is sent on its own: when the client goes away its context ends, and pgx
// asks PostgreSQL to cancel the statement. Those and the batches of
// searches together run on at most half the pool's connections; the rest
// wait their turn, so clients sending costly searches cannot take every
// connection from the short reads and writes of everyone else
// (bench/scale.sh's list_beside_costly).

// searchPlan is how a search with words is planned (termstats.go).
type searchPlan int

const (
	// planByValues: planned for its values at every request.
	planByValues searchPlan = iota
	// planWalk: each window is walked down its IDs and every message's
	// terms checked, planned once; for common words.
	planWalk
	// planPostings: each window reads the words' postings from the GIN
	// index and sorts the matches, planned once; for a rare word.
	planPostings
)

// windowSizes are the ID spans of one page's windows, in the order they
// are read. Small first: common words fill a page within a few thousand
// messages.
var windowSizes = []int64{2048, 8192, 32768}

// searchSpan is the most IDs one page of a search with words covers.
var searchSpan = func() int64 {
	var n int64
	for _, w := range windowSizes {
		n += w
	}
	return n
}()

// SearchMessages returns a page of the query's messages, newest first, and
// the caller's account, resolved in the same round trip. Errors:
// model.ErrInvalid for too many terms, model.ErrUnauthorized, the
// context's error when it ends.
func (db *DB) SearchMessages(ctx context.Context, by model.Caller, q model.SearchQuery) (_ *model.User, _ *model.SearchPage, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	if len(q.Terms) > model.MaxQueryTerms {
		return nil, nil, model.TooManyTerms()
	}
	limit := q.PageLimit()
	words := len(q.Terms) > 0
	newest := int64(db.feed.newestMessage())
	plan, early := planByValues, false
	filtered := q.OwnerEmail != "" || q.Since != nil || q.Until != nil
	if words {
		plan, early = db.terms.Load().choose(q.Terms, limit+1)
		if filtered {
			// Planned for its values: which index serves best depends on
			// the owner's share of the messages or the span of time. A
			// rare word keeps the form that reads its postings, with no
			// span of IDs, so that a page finds its matches however old
			// (the postings bound its cost); a walk becomes a search in
			// windows, planned for its values.
			early = false
			if plan == planWalk {
				plan = planByValues
			}
		}
	}
	perRequest := words && (plan == planByValues || filtered)
	sql, args := searchQuery(&q, limit, newest, plan)
	var (
		resolve      resolver
		u            *model.User
		lo, top      int64
		ownerMissing bool
		msgs         []*model.Message
	)
	queue := func(b *pgx.Batch) {
		if perRequest {
			b.Queue("BEGIN READ ONLY")
			b.Queue("SET LOCAL plan_cache_mode = force_custom_plan")
		}
		resolve = db.queueCaller(b, by)
		b.Queue(sql, args...)
		if perRequest {
			b.Queue("COMMIT")
		}
	}
	read := func(br pgx.BatchResults) error {
		top, lo, ownerMissing, msgs = 0, 0, false, nil
		if perRequest {
			for range 2 {
				if _, err := br.Exec(); err != nil {
					return ctxErr(ctx, err)
				}
			}
		}
		var err error
		if u, err = resolve(br); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return ctxErr(ctx, err)
		}
		defer rows.Close()
		var (
			kind int64
			r    pageMessage
		)
		dest := append([]any{&kind}, r.dest()...)
		// The rows' messages share one allocation.
		store := make([]model.Message, 0, limit+1)
		for rows.Next() {
			if err := scanWire(rows, dest...); err != nil {
				return err
			}
			if kind == 0 {
				// The bounds row of a search with words: the windows' top in
				// id, lo in owner_id, and whether the owner asked for exists
				// in revision.
				top, lo, ownerMissing = r.id, r.owner, r.rev == 0
				continue
			}
			store = append(store, model.Message{})
			if err := r.message(&store[len(store)-1]); err != nil {
				return err
			}
			msgs = append(msgs, &store[len(store)-1])
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return ctxErr(ctx, err)
		}
		if perRequest {
			if _, err := br.Exec(); err != nil {
				return ctxErr(ctx, err)
			}
		}
		return nil
	}
	switch {
	case !words:
		// A page without words walks an index for at most its own rows.
		err = db.readTogether(ctx, queue, read)
	case early:
		// Expected to cost little more than a page without words, in
		// batches of its own so that no read waits behind it.
		err = db.sendTogether(ctx, &db.searches, queue, read)
	default:
		// Its own round trip, on the request's context: a client that
		// leaves cancels its search, or stops waiting for its turn.
		select {
		case db.wordSearches <- struct{}{}:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		defer func() { <-db.wordSearches }()
		err = db.sendAlone(ctx, queue, read)
		if err != nil && ctx.Err() != nil {
			err = ctx.Err() // the client left: its search was cancelled
		}
	}
	if err != nil {
		return nil, nil, err
	}
	page := &model.SearchPage{}
	slices.SortFunc(msgs, func(a, b *model.Message) int { return cmpDesc(a.ID, b.ID) })
	bottom := top - searchSpan + 1 // the lowest ID the windows cover
	switch {
	case len(msgs) > limit:
		// One match beyond the page proves there is a next page.
		page.Messages = msgs[:limit]
		page.NextBeforeID = msgs[limit-1].ID
	case words && plan != planPostings && !ownerMissing && bottom > lo && bottom > 1:
		// The windows are spent and IDs below them remain: a short page,
		// and a cursor to go on below the last window.
		page.Messages = msgs
		page.NextBeforeID = uint64(bottom)
	default:
		page.Messages = msgs
	}
	if page.Messages, err = db.fillOwners(ctx, page.Messages); err != nil {
		return nil, nil, err
	}
	return u, page, nil
}

// windowsTop is the ID the windows of q start from: below its cursor, or
// at the newest message ID known.
func windowsTop(q *model.SearchQuery, newest int64) int64 {
	if q.BeforeID != 0 && q.BeforeID <= math.MaxInt64 && int64(q.BeforeID-1) < newest {
		return int64(q.BeforeID - 1)
	}
	return newest
}

func cmpDesc(a, b uint64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// ctxErr prefers the context's error, when it has ended, to the error the
// cancelled statement came back with.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// searchQuery builds the statement for q: for a query with words, a
// bounds row first; then the matches in order, at most limit+1 of them (one
// more proves a next page). newest is the newest message ID known.
//
// Rows: kind (0 the bounds row, 1 a message), id, owner_id, content,
// created_at, updated_at, revision, reply_to (0 for none), replies,
// mentions (see messagePageColumns). The bounds row carries lo,
// the lowest ID since allows, in owner_id, and in revision 1 when there is
// no owner filter or its owner exists.
func searchQuery(q *model.SearchQuery, limit int, newest int64, plan searchPlan) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	const maxID = "9223372036854775807"
	// Bounds as subqueries, run once (InitPlans). Creation times never
	// fall as IDs rise, so the first ID created at or after an instant is
	// found in the time index.
	firstAt := func(t time.Time) string {
		return "(SELECT id FROM messages WHERE created_at >= " + arg(boundTime(t)) + " ORDER BY created_at, id LIMIT 1)"
	}
	// Written as m.id + 0, a bound on IDs is not one the primary key can
	// serve: the plan that reads postings then has no other way.
	id := "m.id"
	if plan == planPostings {
		id = "(m.id + 0)"
	}
	var filter strings.Builder
	if q.BeforeID != 0 && q.BeforeID <= math.MaxInt64 {
		filter.WriteString(" AND " + id + " < " + arg(int64(q.BeforeID)))
	}
	lo := "1"
	if q.Since != nil {
		lo = "coalesce(" + firstAt(*q.Since) + ", " + maxID + ")"
		filter.WriteString(" AND " + id + " >= " + lo + " AND m.created_at >= " + arg(boundTime(*q.Since)))
	}
	// until's bound is read once, in a CTE: the filter of every window
	// and the windows' top (below) need it.
	with, until := "", ""
	if q.Until != nil {
		with = "WITH b AS MATERIALIZED (SELECT coalesce(" + firstAt(*q.Until) + ", " + maxID + ") AS until_id)\n"
		until = "(SELECT until_id FROM b)"
		filter.WriteString(" AND " + id + " < " + until + " AND m.created_at < " + arg(boundTime(*q.Until)))
	}
	owner := ""
	if q.OwnerEmail != "" {
		if key := model.EmailKey(q.OwnerEmail); holdsNUL(key) {
			owner = "(NULL::bigint)" // no such account
		} else {
			owner = "(SELECT id FROM users WHERE email_key = " + arg(key) + ")"
		}
	}
	// Without the owners' addresses: fillOwners sets them.
	const columns = messagePageColumns
	if len(q.Terms) == 0 {
		order := " ORDER BY m.id DESC"
		if owner != "" {
			// An owner's messages come from their own index, newest first,
			// like a posting list, whatever share of all messages the plan
			// (made once for every owner) guesses they are: guessed a
			// tenth, the newest messages were walked until the owner's
			// turned up, all of another account's first. Written as a
			// range, and ordered by owner too, the owner is not a constant
			// the planner may drop from the order, so only the index gives
			// it.
			filter.WriteString(" AND m.owner_id >= " + owner + " AND m.owner_id <= " + owner)
			order = " ORDER BY m.owner_id DESC, m.id DESC"
		}
		return with + "SELECT 1::bigint, " + columns + " FROM messages m WHERE true" +
			filter.String() + order + " LIMIT " + arg(limit+1), args
	}
	if owner != "" {
		filter.WriteString(" AND m.owner_id = " + owner)
	}
	terms := "m.terms"
	if plan == planWalk {
		// Not the indexed column itself, so the walk cannot turn into a
		// read of postings.
		terms = "coalesce(m.terms, '{}'::text[])"
	}
	filter.WriteString(" AND " + terms + " @> " + arg(slices.Clone(q.Terms)) + "::text[]")
	ownerOK := "1"
	if owner != "" {
		ownerOK = "CASE WHEN " + owner + " IS NULL THEN 0 ELSE 1 END"
	}
	// The windows start below the cursor, or at the newest message known,
	// and below until: the messages above it cannot match.
	top := "0" // none: the postings' one window has no bounds
	if plan != planPostings {
		top = arg(windowsTop(q, newest))
		if until != "" {
			top = "least(" + top + ", " + until + " - 1)"
		}
	}
	var sb strings.Builder
	sb.WriteString(with + "SELECT r.kind, r.id, r.owner_id, r.content, r.created_at, r.updated_at, r.revision, " +
		"r.reply_to, r.replies, r.mentions FROM (\n")
	sb.WriteString("(SELECT 0::bigint AS kind, " + top + "::bigint AS id, " + lo + "::bigint AS owner_id, NULL::bytea AS content, " +
		"NULL::timestamptz AS created_at, NULL::timestamptz AS updated_at, " + ownerOK + "::bigint AS revision, " +
		"0::bigint AS reply_to, 0::bigint AS replies, NULL::text AS mentions)")
	// below is the window bound offset IDs below the top.
	below := func(offset int64) string { return "(" + top + " - " + strconv.FormatInt(offset, 10) + ")" }
	n := arg(limit + 1)
	windows := windowSizes
	if plan == planPostings {
		// The scan of the GIN index hands over every message holding the
		// word, and a window's bounds would only filter the rows it
		// fetched: each window would read the same postings and rows
		// again. The postings bound the search's cost, as a span of IDs
		// bounds a walk's, so the search has one window, down to the
		// first message: a page finds a rare word's matches however old,
		// as bbolt's, which walks the word's postings, does.
		windows = []int64{0}
	}
	var above int64 // IDs the windows before this one cover
	for i, size := range windows {
		// The newest window is open above: messages newer than the newest
		// this instance has heard of are in it (the cursor bounds it, when
		// there is one).
		window := "true"
		if size != 0 {
			window = id + " >= " + below(above+size-1)
		}
		order := "m.id DESC"
		if plan == planPostings {
			order = "m.id + 0 DESC"
		}
		if i > 0 {
			window += " AND " + id + " <= " + below(above)
			// The windows after the first are read only when the first held
			// too few matches, so the words are not common here: the primary
			// key may not hand these windows over in order, which would let
			// PostgreSQL walk one hoping to stop early. It intersects the
			// words' postings instead, or reads the window once at most.
			order = "m.id + 0 DESC"
		}
		sb.WriteString("\nUNION ALL\n(SELECT 1, " + messagePageColumns + " FROM messages m WHERE " +
			window + filter.String() + " ORDER BY " + order + " LIMIT " + n + ")")
		above += size
	}
	sb.WriteString("\nLIMIT " + arg(limit+2) + ") r")
	return sb.String(), args
}

// boundTime is a since or until bound as the search applies it: rounded
// up to the microseconds PostgreSQL keeps (see model.BoundMicros).
func boundTime(t time.Time) time.Time {
	return time.UnixMicro(model.BoundMicros(t)).UTC()
}
