package http

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"herald/http/apijson"
	"herald/model"
)

var (
	messageFields = fieldSpec{
		writable: []string{"content", "replyTo"},
		readOnly: []string{"id", "user", "createdAt", "updatedAt", "replies", "mentions"},
		integers: []string{"replyTo"},
	}
	// A message answers the message it answers for good: replyTo is
	// read-only once it is written.
	messagePatchFields = fieldSpec{
		writable:   []string{"content"},
		readOnly:   append([]string{"replyTo"}, messageFields.readOnly...),
		mergePatch: true,
	}
)

// draftOf reads a create's body as a draft.
func draftOf(f fields) (model.Draft, error) {
	d := model.Draft{Content: f.str("content")}
	replyTo, err := f.integer("replyTo")
	if err != nil {
		return d, err
	}
	if replyTo != nil {
		if *replyTo < 1 {
			var invalid model.ValidationError
			invalid.Add("replyTo", "must be the ID of a message (a whole number from 1)")
			return d, invalid.Err()
		}
		d.ReplyTo = uint64(*replyTo)
	}
	return d, nil
}

// createMessage stores a message owned by the caller; the client cannot
// choose the owner. With an Idempotency-Key, a retry gets the first
// answer (see idempotency.go).
func (s *Server) createMessage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	key, err := idempotencyKey(r)
	if err != nil {
		return err
	}
	f, err := decodeBody(w, r, s.maxBody, messageFields)
	if err != nil {
		return err
	}
	draft, err := draftOf(f)
	if err != nil {
		return err
	}
	attempt, err := s.guard.startWrite(r, caller(r).user)
	if err != nil {
		return err
	}
	var idem *model.IdempotencyKey
	if key != "" {
		idem = ptrTo(idempotencyFor(key, "message", f))
	}
	m, err := s.store.PostMessage(r.Context(), model.ByToken(caller(r).tokenHash), draft, idem)
	attempt.done(err)
	if err != nil {
		return err
	}
	w.Header().Set("Location", messagePath(m.ID))
	w.Header().Set("ETag", etag(m))
	writeMessage(w, http.StatusCreated, m)
	return nil
}

func (s *Server) getMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := messageID(ps)
	if err != nil {
		return err
	}
	u, m, err := s.store.Message(r.Context(), model.ByToken(caller(r).tokenHash), id)
	if err != nil {
		return err
	}
	noteCaller(r, u)
	w.Header().Set("ETag", etag(m))
	writeMessage(w, http.StatusOK, m)
	return nil
}

// updateMessage changes a message's content. Ownership and If-Match are
// checked by the store inside the write transaction.
//
// Creates, edits and deletes count against the account's write limit
// before they reach the store.
func (s *Server) updateMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := messageID(ps)
	if err != nil {
		return err
	}
	f, err := decodeBody(w, r, s.maxBody, messagePatchFields)
	if err != nil {
		return err
	}
	var upd model.MessageUpdate
	if content, present := f["content"]; present {
		if content == nil {
			var v model.ValidationError
			v.Add("content", "cannot be removed")
			return v.Err()
		}
		upd.Content = content
	}
	attempt, err := s.guard.startWrite(r, caller(r).user)
	if err != nil {
		return err
	}
	m, err := s.store.UpdateMessage(r.Context(), id, model.ByToken(caller(r).tokenHash), upd, ifMatch(r))
	attempt.done(err)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(m))
	writeMessage(w, http.StatusOK, m)
	return nil
}

func (s *Server) deleteMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := messageID(ps)
	if err != nil {
		return err
	}
	attempt, err := s.guard.startWrite(r, caller(r).user)
	if err != nil {
		return err
	}
	m, err := s.store.DeleteMessage(r.Context(), id, model.ByToken(caller(r).tokenHash), ifMatch(r))
	attempt.done(err)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", etag(m))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// messageID reads the :id path segment. Anything but a positive decimal
// integer names no message.
func messageID(ps httprouter.Params) (uint64, error) {
	raw := ps.ByName("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, &model.Error{Kind: model.ErrNotFound, Detail: fmt.Sprintf("message %q does not exist: message IDs are positive integers", raw)}
	}
	return id, nil
}

// ifMatch turns If-Match into a store precondition: nil without the header,
// else true when any listed tag, or "*", matches the current message. Weak
// tags (W/"...") never match, as RFC 9110 requires for If-Match.
func ifMatch(r *http.Request) model.Precondition {
	values := r.Header.Values("If-Match")
	if len(values) == 0 {
		return nil
	}
	return func(m *model.Message) bool {
		current := etag(m)
		for _, v := range values {
			for tag := range strings.SplitSeq(v, ",") {
				if tag = strings.TrimSpace(tag); tag == "*" || tag == current {
					return true
				}
			}
		}
		return false
	}
}

// Search parameter bounds beyond the store's.
const maxQueryBytes = 1024

var searchParams = []string{"q", "owner", "since", "until", "limit", "cursor"}

// searchMessages answers GET /api/messages: a page of messages, newest
// first, with an opaque cursor to the next page. The request's context
// reaches the store, so a client that goes away stops its search.
func (s *Server) searchMessages(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	q, fingerprint, err := parseSearch(params)
	if err != nil {
		return err
	}
	u, page, err := s.store.SearchMessages(r.Context(), model.ByToken(caller(r).tokenHash), q)
	if err != nil {
		return err
	}
	noteCaller(r, u)
	var next string
	if page.NextBeforeID != 0 {
		if fingerprint == 0 { // not computed yet: the query came without a cursor
			fingerprint = q.Fingerprint()
		}
		next = encodeCursor(page.NextBeforeID, fingerprint)
		params.Set("cursor", next)
		w.Header().Set("Link", "</api/messages?"+params.Encode()+`>; rel="next"`)
	}
	buf := s.pageBuffer()
	*buf = apijson.AppendPage((*buf)[:0], page.Messages, next)
	writeBody(w, "application/json", http.StatusOK, *buf)
	s.recyclePageBuffer(buf)
	return nil
}

// maxPooledPage is the largest page buffer kept for reuse: a page of 20
// ordinary messages fits many times over, and a rare page of 100 long ones
// is not worth holding on to.
const maxPooledPage = 64 << 10

// pageBuffer returns a buffer to write a search page into.
func (s *Server) pageBuffer() *[]byte {
	if buf, ok := s.pages.Get().(*[]byte); ok {
		return buf
	}
	buf := make([]byte, 0, 16<<10)
	return &buf
}

// recyclePageBuffer takes back buf once its page has been written:
// net/http's HTTP/1.1 server, the only one Herald runs, has copied the
// body out or sent it by the time Write returns. (Serving HTTP/2 would
// need this looked at again: its Write may return while a frame still
// points at the slice.)
func (s *Server) recyclePageBuffer(buf *[]byte) {
	if cap(*buf) <= maxPooledPage {
		s.pages.Put(buf)
	}
}

// parseSearch validates the query parameters. Empty values count as absent,
// as an HTML form sends them; unknown or repeated parameters are refused so
// a typo does not silently widen a search.
func parseSearch(params url.Values) (q model.SearchQuery, fingerprint uint64, err error) {
	q = model.SearchQuery{Limit: model.DefaultSearchLimit}
	if err := checkParamNames(params, "search", searchParams); err != nil {
		return q, 0, err
	}
	if q.Terms, err = parseQueryTerms(params); err != nil {
		return q, 0, err
	}
	if q.OwnerEmail, err = parseOwner(params); err != nil {
		return q, 0, err
	}
	if q.Since, err = parseTimeParam(params, "since"); err != nil {
		return q, 0, err
	}
	if q.Until, err = parseTimeParam(params, "until"); err != nil {
		return q, 0, err
	}
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > model.MaxSearchLimit {
			return q, 0, badLimit(model.MaxSearchLimit)
		}
		q.Limit = n
	}
	if v := params.Get("cursor"); v != "" {
		id, got, ok := decodeCursor(v)
		if !ok {
			return q, 0, foreignCursor()
		}
		fingerprint = q.Fingerprint()
		if got != fingerprint {
			return q, 0, badRequest("cursor", "cursor belongs to a search with other q, owner, since or until; send those unchanged, or drop the cursor to start over")
		}
		q.BeforeID = id
	}
	return q, fingerprint, nil
}

// checkParamNames refuses parameters that operation does not take, and
// any given twice, so a typo does not silently widen a search or a stream.
func checkParamNames(params url.Values, operation string, known []string) error {
	// Sorted, so a query with several bad parameters always names the same one.
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !slices.Contains(known, name) {
			return badRequest(name, "unknown parameter %q; %s takes %s", name, operation, strings.Join(known, ", "))
		}
		if len(params[name]) > 1 {
			return badRequest(name, "parameter %q is given more than once", name)
		}
	}
	return nil
}

// parseOwner reads the owner parameter of a search or a stream: "" when
// absent or empty, as a form's empty field sends it. One that is only
// spaces, or not text at all, is refused rather than read as absent: like
// a q with no word, it would silently widen the filter to everyone.
func parseOwner(params url.Values) (string, error) {
	raw := params.Get("owner")
	owner := model.NormalizeEmail(raw)
	switch {
	case !utf8.ValidString(raw):
		return "", badRequest("owner", "owner must be valid UTF-8")
	case owner == "" && raw != "":
		return "", badRequest("owner", "owner is blank; give the owner's e-mail address, or leave owner out")
	}
	return owner, nil
}

// parseQueryTerms reads the q parameter of a search or a stream: nil when
// absent, else its distinct words.
func parseQueryTerms(params url.Values) ([]string, error) {
	v := params.Get("q")
	if v == "" {
		return nil, nil
	}
	if !utf8.ValidString(v) || len(v) > maxQueryBytes {
		return nil, badRequest("q", "q must be valid UTF-8 of at most %d bytes", maxQueryBytes)
	}
	terms := model.Terms(v)
	switch {
	case len(terms) == 0:
		// Matching everything would be a surprising answer to a search
		// for "!!!"; say what a word is instead.
		return nil, badRequest("q", "q has no word to search for: words are letters, digits and combining marks")
	case len(terms) > model.MaxQueryTerms:
		return nil, badRequest("q", "q has %d distinct words; at most %d are allowed", len(terms), model.MaxQueryTerms)
	}
	return terms, nil
}

// parseTimeParam reads an RFC 3339 timestamp; nil when the parameter is
// absent. An unescaped '+' in a query string arrives as a space, so a space
// before the zone offset is taken back to '+' rather than refused. RFC 3339
// allows lower-case 't' and 'z', which Go's parser does not; nothing else in
// a timestamp has a case.
func parseTimeParam(params url.Values, name string) (*time.Time, error) {
	v := strings.ToUpper(params.Get(name))
	if v == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t, err = time.Parse(time.RFC3339Nano, strings.Replace(v, " ", "+", 1))
	}
	if err != nil {
		return nil, badRequest(name, "%s must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z", name)
	}
	t = t.UTC()
	return &t, nil
}

// A cursor is a format byte, the ID the next page starts below, and the
// fingerprint of the filters of the search that issued it, base64url
// encoded so clients treat it as opaque. The fingerprint binds a cursor to
// its query: reused with other filters it would page through a different
// result set from a position chosen for this one.
const cursorFormat = 2

func encodeCursor(beforeID, fingerprint uint64) string {
	var b [17]byte
	b[0] = cursorFormat
	binary.BigEndian.PutUint64(b[1:], beforeID)
	binary.BigEndian.PutUint64(b[9:], fingerprint)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func decodeCursor(s string) (beforeID, fingerprint uint64, ok bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 17 || b[0] != cursorFormat {
		return 0, 0, false
	}
	beforeID = binary.BigEndian.Uint64(b[1:])
	return beforeID, binary.BigEndian.Uint64(b[9:]), beforeID != 0
}
