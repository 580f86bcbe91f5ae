package pg

import (
	"context"
	"fmt"
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
// Cost. The bbolt store walks posting lists and stops a page after a
// budget of steps; here PostgreSQL picks the plan, and the budget is a
// span of IDs. A page is looked for in ID windows below the cursor, each
// its own branch of one UNION ALL, read in order until the page is full:
// the newest windowSizes[0] IDs first, then the next windowSizes[1], and
// so on. Within a window PostgreSQL either walks the primary key (or the
// owner's index) down through at most the window's messages, filtering on
// the terms — the right plan when the words are common — or intersects the
// words' GIN posting lists and reads only the matches in the window — the
// right plan when one is rare. Either way a window costs at most its own
// messages, whatever the estimate that chose the plan, so words that
// seldom meet (each common, so PostgreSQL walks; together almost never)
// cost at most searchSpan messages for one page, not the whole table.
// When the windows are spent before the page is full, the page comes back
// short with a cursor below the last window, as a bbolt page that spent
// its steps does, and the client goes on from there. A page deep in the
// results costs what the first does: the windows start at its cursor.
// Queries without words never need windows: the newest messages, or an
// owner's newest through the (owner_id, id) index, fill a page at once.
//
// A search is one statement; when the client goes away its context ends,
// and pgx asks PostgreSQL to cancel the statement.

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
func (db *DB) SearchMessages(ctx context.Context, by model.Caller, q model.SearchQuery) (*model.User, *model.SearchPage, error) {
	if len(q.Terms) > model.MaxQueryTerms {
		var v model.ValidationError
		v.Add("q", fmt.Sprintf("must have at most %d distinct words", model.MaxQueryTerms))
		return nil, nil, v.Err()
	}
	limit := q.Limit
	if limit <= 0 {
		limit = model.DefaultSearchLimit
	}
	limit = min(limit, model.MaxSearchLimit)
	sql, args := searchQuery(&q, limit)
	b := &pgx.Batch{}
	resolve := db.queueCaller(b, by)
	b.Queue(sql, args...)
	br := db.pool.SendBatch(ctx, b)
	defer br.Close()
	u, err := resolve(br)
	if err != nil {
		return nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, ctxErr(ctx, err)
	}
	var (
		page          = &model.SearchPage{}
		hi, lo        int64
		ownerMissing  bool
		msgs          []*model.Message
		boundsPresent bool
	)
	for rows.Next() {
		var (
			kind, id, owner, rev int64
			email                *string
			content              []byte
			created, updated     *time.Time
		)
		if err := rows.Scan(&kind, &id, &owner, &email, &content, &created, &updated, &rev); err != nil {
			rows.Close()
			return nil, nil, err
		}
		if kind == 0 {
			// The bounds row: hi and lo, and whether the owner asked for
			// exists (in rev).
			hi, lo, ownerMissing, boundsPresent = id, owner, rev == 0, true
			continue
		}
		if email == nil {
			continue // the owner's account was deleted after the match was read
		}
		msgs = append(msgs, &model.Message{ID: uint64(id), OwnerID: uint64(owner), OwnerEmail: *email,
			Content: string(content), CreatedAt: created.UTC(), UpdatedAt: updated.UTC(), Revision: uint64(rev)})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, ctxErr(ctx, err)
	}
	if err := br.Close(); err != nil {
		return nil, nil, ctxErr(ctx, err)
	}
	if !boundsPresent {
		return nil, nil, fmt.Errorf("search: no bounds row")
	}
	slices.SortFunc(msgs, func(a, b *model.Message) int { return cmpDesc(a.ID, b.ID) })
	switch {
	case len(msgs) > limit:
		// One match beyond the page proves there is a next page.
		page.Messages = msgs[:limit]
		page.NextBeforeID = msgs[limit-1].ID
	case len(q.Terms) > 0 && !ownerMissing && hi-searchSpan >= lo:
		// The windows are spent and IDs below them remain: a short page,
		// and a cursor to go on below the last window.
		page.Messages = msgs
		page.NextBeforeID = uint64(hi - searchSpan + 1)
	default:
		page.Messages = msgs
	}
	return u, page, nil
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

// searchQuery builds the statement for q: a bounds row, then the matches
// in order, at most limit+1 of them (one more proves a next page).
//
// Rows: kind (0 the bounds row, 1 a message), id, owner_id, email,
// content, created_at, updated_at, revision. The bounds row carries hi in
// id, lo in owner_id and, in revision, 1 when there is no owner filter or
// its owner exists.
func searchQuery(q *model.SearchQuery, limit int) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var sb strings.Builder
	// Bounds: hi from the cursor, the newest ID given out, and until; lo
	// from since. Creation times never fall as IDs rise, so the first ID
	// created at or after an instant is found in the time index.
	hi := "c.message_id"
	if q.BeforeID != 0 && q.BeforeID <= math.MaxInt64 {
		hi = "least(c.message_id, " + arg(int64(q.BeforeID-1)) + ")"
	}
	if q.Until != nil {
		hi = "least(" + hi + ", coalesce((SELECT id FROM messages WHERE created_at >= " + arg(boundTime(*q.Until)) +
			" ORDER BY created_at, id LIMIT 1) - 1, " + hi + "))"
	}
	lo := "1"
	if q.Since != nil {
		lo = "coalesce((SELECT id FROM messages WHERE created_at >= " + arg(boundTime(*q.Since)) +
			" ORDER BY created_at, id LIMIT 1), 9223372036854775807)"
	}
	owner := "NULL::bigint"
	ownerOK := "1"
	if q.OwnerEmail != "" {
		owner = "(SELECT id FROM users WHERE email_key = " + arg(model.EmailKey(q.OwnerEmail)) + ")"
		ownerOK = "CASE WHEN owner IS NULL THEN 0 ELSE 1 END"
	}
	sb.WriteString("WITH b AS (SELECT " + hi + " AS hi, " + lo + " AS lo, " + owner + " AS owner FROM change_counter c)\n")
	sb.WriteString("SELECT r.kind, r.id, r.owner_id, u.email, r.content, r.created_at, r.updated_at, r.revision FROM (\n")
	sb.WriteString("(SELECT 0::bigint AS kind, hi AS id, lo AS owner_id, NULL::bytea AS content, NULL::timestamptz AS created_at, NULL::timestamptz AS updated_at, " +
		ownerOK + "::bigint AS revision FROM b)")
	// Filters every branch applies besides its window. The time bounds
	// are already ID bounds; applied again they keep answers exact on a
	// database whose creation times are out of order (one upgraded from a
	// release that did not keep them monotonic), as bbolt's search does.
	var filter strings.Builder
	if q.OwnerEmail != "" {
		filter.WriteString(" AND m.owner_id = b.owner")
	}
	if len(q.Terms) > 0 {
		filter.WriteString(" AND m.terms @> " + arg(slices.Clone(q.Terms)) + "::text[]")
	}
	if q.Since != nil {
		filter.WriteString(" AND m.created_at >= " + arg(boundTime(*q.Since)))
	}
	if q.Until != nil {
		filter.WriteString(" AND m.created_at < " + arg(boundTime(*q.Until)))
	}
	n := arg(limit + 1)
	branch := func(window string) {
		sb.WriteString("\nUNION ALL\n(SELECT 1, m.id, m.owner_id, m.content, m.created_at, m.updated_at, m.revision FROM b, messages m WHERE " +
			window + filter.String() + " ORDER BY m.id DESC LIMIT " + n + ")")
	}
	if len(q.Terms) == 0 {
		branch("m.id BETWEEN b.lo AND b.hi")
	} else {
		var above int64 // IDs the windows before this one cover
		for _, size := range windowSizes {
			branch(fmt.Sprintf("m.id BETWEEN greatest(b.lo, b.hi - %d) AND b.hi - %d", above+size-1, above))
			above += size
		}
	}
	sb.WriteString("\nLIMIT " + arg(limit+2) + ") r LEFT JOIN users u ON u.id = r.owner_id AND r.kind = 1")
	return sb.String(), args
}

// boundTime is a since or until bound as the search applies it: rounded
// up to the microseconds PostgreSQL keeps (see model.BoundMicros).
func boundTime(t time.Time) time.Time {
	return time.UnixMicro(model.BoundMicros(t)).UTC()
}
