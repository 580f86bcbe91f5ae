package http

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/model"
)

// The administration routes. The route table lets only administrators in,
// and the store checks the role again inside each act's transaction, where
// it also writes the act to the audit log.

var (
	accountPatchFields = fieldSpec{
		writable:   []string{"suspended", "admin"},
		readOnly:   []string{"id", "email", "roles", "createdAt", "lastSeenAt", "messages"},
		mergePatch: true,
		booleans:   []string{"suspended", "admin"},
	}
	inviteFields = fieldSpec{
		writable: []string{"maxUses", "expiresAt"},
		readOnly: []string{"id", "code", "url", "uses", "createdAt"},
		integers: []string{"maxUses"},
	}
	accountParams = []string{"q", "limit", "cursor"}
	auditParams   = []string{"limit", "cursor"}
)

// adminBy is the caller of an administration route, checked again by the
// store in the act's own transaction.
func adminBy(r *http.Request) model.Caller { return model.ByToken(caller(r).tokenHash) }

// pathID reads the :id path segment; anything but a positive decimal
// integer names nothing.
func pathID(ps httprouter.Params, what string) (uint64, error) {
	raw := ps.ByName("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, &model.Error{Kind: model.ErrNotFound, Detail: fmt.Sprintf("%s %q does not exist: IDs are positive integers", what, raw)}
	}
	return id, nil
}

// parsePage reads the limit and cursor of a listing: limit from 1 to max,
// def when absent; a cursor this listing gave out with the same
// fingerprint, else a refusal saying mismatch.
func parsePage(params url.Values, def, maxLimit int, fingerprint uint64, mismatch string) (limit int, before uint64, err error) {
	limit = def
	if v := params.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return 0, 0, badLimit(maxLimit)
		}
		limit = n
	}
	if v := params.Get("cursor"); v != "" {
		id, got, ok := decodeCursor(v)
		if !ok {
			return 0, 0, foreignCursor()
		}
		if got != fingerprint {
			return 0, 0, badRequest("cursor", "%s", mismatch)
		}
		before = id
	}
	return limit, before, nil
}

// matchFingerprint binds a cursor of the accounts listing to its q.
func matchFingerprint(match string) uint64 {
	sum := sha256.Sum256([]byte("accounts\x00" + model.EmailKey(match)))
	return binary.BigEndian.Uint64(sum[:])
}

// listAccounts answers GET /api/admin/users: accounts newest first, those
// whose e-mail holds q, with a cursor to the next page.
func (s *Server) listAccounts(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	if err := checkParamNames(params, "the listing of accounts", accountParams); err != nil {
		return err
	}
	q := model.AccountQuery{Match: model.NormalizeEmail(params.Get("q"))}
	fingerprint := matchFingerprint(q.Match)
	if q.Limit, q.BeforeID, err = parsePage(params, model.DefaultAccountLimit, model.MaxAccountLimit, fingerprint,
		"cursor belongs to a listing with another q; send q unchanged, or drop the cursor to start over"); err != nil {
		return err
	}
	page, err := s.store.ListAccounts(r.Context(), adminBy(r), q)
	if err != nil {
		return err
	}
	out := accountPageJSON{Items: make([]adminUserJSON, len(page.Accounts))}
	for i, a := range page.Accounts {
		out.Items[i] = newAdminUserJSON(a)
	}
	if page.NextBeforeID != 0 {
		next := encodeCursor(page.NextBeforeID, fingerprint)
		out.Next = &next
		params.Set("cursor", next)
		w.Header().Set("Link", "</api/admin/users?"+params.Encode()+`>; rel="next"`)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// getAccount answers GET /api/admin/users/{id}.
func (s *Server) getAccount(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "account")
	if err != nil {
		return err
	}
	a, err := s.store.Account(r.Context(), adminBy(r), id)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newAdminUserJSON(a))
	return nil
}

// updateAccount answers PATCH /api/admin/users/{id}: suspend or lift a
// suspension, grant or revoke the administrator role.
func (s *Server) updateAccount(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "account")
	if err != nil {
		return err
	}
	f, err := decodeBody(w, r, s.maxBody, accountPatchFields)
	if err != nil {
		return err
	}
	var upd model.AccountUpdate
	if upd.Suspended, err = f.boolean("suspended"); err != nil {
		return err
	}
	if upd.Admin, err = f.boolean("admin"); err != nil {
		return err
	}
	a, err := s.store.UpdateAccount(r.Context(), adminBy(r), id, upd)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newAdminUserJSON(a))
	return nil
}

// removeAccount answers DELETE /api/admin/users/{id}: the account, its
// tokens and its messages go, as for DELETE /api/me.
func (s *Server) removeAccount(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "account")
	if err != nil {
		return err
	}
	if err := s.store.RemoveAccount(r.Context(), adminBy(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// removeMessages answers DELETE /api/admin/users/{id}/messages: every
// message the account holds goes; live streams hear of each.
func (s *Server) removeMessages(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "account")
	if err != nil {
		return err
	}
	if _, err := s.store.RemoveMessagesOf(r.Context(), adminBy(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createPasswordReset answers POST /api/admin/users/{id}/password-reset:
// a code, shown this once, and the web client's link that uses it, for
// the administrator to hand to the account's owner.
func (s *Server) createPasswordReset(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "account")
	if err != nil {
		return err
	}
	code, hash, err := auth.MintCode(auth.ResetPrefix)
	if err != nil {
		return err
	}
	reset, err := s.store.CreatePasswordReset(r.Context(), adminBy(r), id, hash, model.DefaultResetLifetime)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusCreated, resetJSON{Code: code, URL: s.origin(r) + "/#reset=" + code, ExpiresAt: apiTime(reset.ExpiresAt)})
	return nil
}

// createInvite answers POST /api/admin/invites: an invitation for maxUses
// registrations (1 when absent) until expiresAt (in 7 days when absent);
// its code is shown this once, with the web client's link that uses it.
func (s *Server) createInvite(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, inviteFields)
	if err != nil {
		return err
	}
	inv := &model.Invite{MaxUses: 1, ExpiresAt: s.now().Add(model.DefaultInviteLifetime)}
	uses, err := f.integer("maxUses")
	if err != nil {
		return err
	}
	if uses != nil {
		inv.MaxUses = int(min(max(*uses, -1), model.MaxInviteUses+1)) // out of range either way: Validate says so
	}
	if v := f.str("expiresAt"); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			var invalid model.ValidationError
			invalid.Add("expiresAt", "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z")
			return invalid.Err()
		}
		inv.ExpiresAt = at.UTC()
	}
	code, hash, err := auth.MintCode(auth.InvitePrefix)
	if err != nil {
		return err
	}
	inv.CodeHash = hash
	if err := s.store.CreateInvite(r.Context(), adminBy(r), inv); err != nil {
		return err
	}
	out := newInviteJSON(inv)
	out.Code, out.URL = code, s.origin(r)+"/#invite="+code
	s.writeJSON(w, r, http.StatusCreated, out)
	return nil
}

// listInvites answers GET /api/admin/invites, without their codes.
func (s *Server) listInvites(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	invites, err := s.store.Invites(r.Context(), adminBy(r))
	if err != nil {
		return err
	}
	out := inviteListJSON{Items: make([]inviteJSON, len(invites))}
	for i, inv := range invites {
		out.Items[i] = newInviteJSON(inv)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// revokeInvite answers DELETE /api/admin/invites/{id}.
func (s *Server) revokeInvite(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, err := pathID(ps, "invitation")
	if err != nil {
		return err
	}
	if err := s.store.RevokeInvite(r.Context(), adminBy(r), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// auditLog answers GET /api/admin/audit: administrative acts, newest
// first.
func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	params, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformedQuery()
	}
	if err := checkParamNames(params, "the audit log", auditParams); err != nil {
		return err
	}
	var q model.AuditQuery
	if q.Limit, q.BeforeID, err = parsePage(params, model.DefaultAuditLimit, model.MaxAuditLimit, 0, ""); err != nil {
		return err
	}
	page, err := s.store.AuditLog(r.Context(), adminBy(r), q)
	if err != nil {
		return err
	}
	out := auditPageJSON{Items: make([]auditJSON, len(page.Entries))}
	for i, e := range page.Entries {
		out.Items[i] = newAuditJSON(e)
	}
	if page.NextBeforeID != 0 {
		next := encodeCursor(page.NextBeforeID, 0)
		out.Next = &next
		params.Set("cursor", next)
		w.Header().Set("Link", "</api/admin/audit?"+params.Encode()+`>; rel="next"`)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// origin is the scheme and host people reach this server at, for links:
// the configured public URL, else the request's own, https when it came
// over TLS or through a trusted proxy that says so.
func (s *Server) origin(r *http.Request) string {
	if s.public != "" {
		return s.public
	}
	scheme := "http"
	if r.TLS != nil || s.guard.isTrusted(remoteAddr(r)) && r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// backup answers GET /api/admin/backup: a consistent snapshot of the live
// database, streamed while writers go on, from a store that can copy
// itself (HotBackup). The copy holds exactly the writes committed before
// it began.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	hot, ok := s.store.(HotBackup)
	if !ok {
		return errNoHotBackup
	}
	// Written before the copy is taken, so the copy holds it too. On a
	// full disk the act cannot be recorded, but the copy, which is when an
	// operator needs it most, is still made: the log says who took it.
	if err := s.store.RecordBackup(r.Context(), adminBy(r)); errors.Is(err, model.ErrNoSpace) {
		s.log.WarnContext(r.Context(), "backup not recorded in the audit log: out of storage", "user", caller(r).user.ID)
	} else if err != nil {
		return err
	}
	// A large file takes longer to send than the server's write timeout
	// allows an ordinary answer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Hour))
	name := "herald-backup-" + time.Now().UTC().Format("20060102T150405Z") + ".db"
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	n, err := hot.WriteBackup(r.Context(), w)
	if err != nil {
		if n == 0 {
			return err // nothing sent yet: still room for a problem document
		}
		// Headers and part of the file are out; all that is left is to
		// cut the connection so the client sees a broken download.
		s.log.ErrorContext(r.Context(), "backup stopped midway", "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.InfoContext(r.Context(), "backup sent", "bytes", strconv.FormatInt(n, 10))
	return nil
}
