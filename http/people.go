package http

import (
	"crypto/sha256"
	"encoding/binary"
	"net/http"
	"net/url"

	"github.com/julienschmidt/httprouter"

	"herald/http/apijson"
	"herald/model"
)

var (
	repliesParams           = []string{"limit", "cursor"}
	notificationsParams     = []string{"limit", "cursor", "unread"}
	notificationsReadFields = fieldSpec{
		writable: []string{"upTo"},
		integers: []string{"upTo"},
	}
)

// listingFingerprint binds a cursor to the listing it came from: the
// replies of one message, or the notifications read or all.
func listingFingerprint(listing string, id uint64) uint64 {
	sum := sha256.Sum256(binary.BigEndian.AppendUint64([]byte(listing+"\x00"), id))
	return binary.BigEndian.Uint64(sum[:])
}

// listReplies answers GET /api/messages/{id}/replies: the message's
// replies, oldest first, a page at a time.
func (s *Server) listReplies(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := messageID(ps)
	if err != nil {
		return err
	}
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	if err := checkParamNames(params, "the listing of replies", repliesParams); err != nil {
		return err
	}
	fingerprint := listingFingerprint("replies", id)
	q := model.RepliesQuery{MessageID: id}
	if q.Limit, q.AfterID, err = parsePage(params, model.DefaultSearchLimit, model.MaxSearchLimit, fingerprint,
		"cursor belongs to the replies of another message; drop the cursor to start over"); err != nil {
		return err
	}
	page, err := s.store.Replies(r.Context(), model.ByToken(caller(r).tokenHash), q)
	if err != nil {
		return err
	}
	var next string
	if page.NextAfterID != 0 {
		next = encodeCursor(page.NextAfterID, fingerprint)
		params.Set("cursor", next)
		w.Header().Set("Link", "<"+messagePath(id)+"/replies?"+params.Encode()+`>; rel="next"`)
	}
	buf := s.pageBuffer()
	*buf = apijson.AppendPage((*buf)[:0], page.Messages, next)
	writeBody(w, "application/json", http.StatusOK, *buf)
	s.recyclePageBuffer(buf)
	return nil
}

// listNotifications answers GET /api/me/notifications: the caller's
// notifications, newest first, with the number unread.
func (s *Server) listNotifications(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	if err := checkParamNames(params, "the listing of notifications", notificationsParams); err != nil {
		return err
	}
	var q model.NotificationQuery
	switch v := params.Get("unread"); v {
	case "", "false":
	case "true":
		q.Unread = true
	default:
		return badRequest("unread", "unread must be true or false")
	}
	listing := "notifications"
	if q.Unread {
		listing = "unread notifications"
	}
	fingerprint := listingFingerprint(listing, 0)
	if q.Limit, q.BeforeID, err = parsePage(params, model.DefaultNotificationsLimit, model.MaxNotificationsLimit, fingerprint,
		"cursor belongs to a listing with another unread; send unread unchanged, or drop the cursor to start over"); err != nil {
		return err
	}
	page, err := s.store.Notifications(r.Context(), model.ByToken(caller(r).tokenHash), q)
	if err != nil {
		return err
	}
	var next string
	if page.NextBeforeID != 0 {
		next = encodeCursor(page.NextBeforeID, fingerprint)
		params.Set("cursor", next)
		w.Header().Set("Link", "</api/me/notifications?"+params.Encode()+`>; rel="next"`)
	}
	buf := s.pageBuffer()
	*buf = apijson.AppendNotifications((*buf)[:0], page.Items, next, page.Unread)
	writeBody(w, "application/json", http.StatusOK, *buf)
	s.recyclePageBuffer(buf)
	return nil
}

// markNotificationsRead answers POST /api/me/notifications/read: upTo
// and every older notification read, or all of them without upTo.
func (s *Server) markNotificationsRead(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, notificationsReadFields)
	if err != nil {
		return err
	}
	upTo, err := f.integer("upTo")
	if err != nil {
		return err
	}
	var id uint64
	if upTo != nil {
		if *upTo < 1 {
			var invalid model.ValidationError
			invalid.Add("upTo", "must be the ID of a notification (a whole number from 1); send {} to mark all read")
			return invalid.Err()
		}
		id = uint64(*upTo)
	}
	if err := s.store.MarkNotificationsRead(r.Context(), model.ByToken(caller(r).tokenHash), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
