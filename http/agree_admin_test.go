package http_test

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"herald/auth"
	"herald/http/internal/apitest"
	"herald/model"
)

// TestStoresAgree's administration: the accounts' list and pages, one
// account read, changed and removed, its messages removed, password
// resets, invitations and the audit log.

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
	res := r.exchange(fmt.Sprintf("list accounts %s with %s", raw, r.tokenName(lt)), "accounts", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: "/api/admin/users?" + raw, Token: s.token(lt, r.unknown)}
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

func (r *agreeRun) afterAccounts(res [2]*apitest.Response, params url.Values) {
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
	r.exchange(fmt.Sprintf("get account %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown)}
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
	res := r.exchange(fmt.Sprintf("PATCH account %s with %s: %s", desc, r.tokenName(lt), body), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "PATCH", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
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
	res := r.exchange(fmt.Sprintf("delete account %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "DELETE", Path: s.accountPath(u, raw), Token: s.token(lt, r.unknown)}
	})
	if u >= 0 && res[0].Status == http.StatusNoContent {
		r.accountGone(u)
	}
}

func (r *agreeRun) opAccountMessagesDelete() {
	lt := r.adminOrNot()
	u, raw, desc := r.account()
	res := r.exchange(fmt.Sprintf("delete the messages of %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "DELETE", Path: s.accountPath(u, raw) + "/messages", Token: s.token(lt, r.unknown)}
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
	res := r.exchange(fmt.Sprintf("make a password reset for %s with %s", desc, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: s.accountPath(u, raw) + "/password-reset", Token: s.token(lt, r.unknown)}
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
	res := r.exchange(desc, "", func(s *agreeServer) apitest.Request {
		c := code
		if c == "" {
			c = s.resetCodes[k]
		}
		ct, body := agreeBody(format, [][2]string{{"code", c}, {"newPassword", next}})
		return apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: ct, Body: body}
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
func (r *agreeRun) patchAccount(lt, u int, body string) *apitest.Response {
	res := r.exchange(fmt.Sprintf("PATCH account u%d with %s: %s", u, r.tokenName(lt), body), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "PATCH", Path: s.accountPath(u, ""), Token: s.token(lt, r.unknown), ContentType: "application/merge-patch+json", Body: body}
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
		res := r.exchange(fmt.Sprintf("create an invitation %s with %s", body, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
			return apitest.Request{Method: "POST", Path: "/api/admin/invites", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
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
		r.exchange("list invitations with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
			return apitest.Request{Method: "GET", Path: "/api/admin/invites", Token: s.token(lt, r.unknown)}
		})
	default:
		k, raw := -1, ""
		if len(r.invites) == 0 || r.chance(0.1) {
			raw = []string{"999999", "0", "x"}[r.pick(3)]
		} else {
			k = r.pick(len(r.invites))
		}
		res := r.exchange(fmt.Sprintf("revoke invitation i%d %q with %s", k, raw, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
			id := raw
			if k >= 0 {
				id = s.inviteID(k)
			}
			return apitest.Request{Method: "DELETE", Path: "/api/admin/invites/" + id, Token: s.token(lt, r.unknown)}
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
	res := r.exchange(fmt.Sprintf("audit log %s with %s", raw, r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: "/api/admin/audit?" + raw, Token: s.token(lt, r.unknown)}
	})
	r.afterAudit(res, params)
}

func (r *agreeRun) afterAudit(res [2]*apitest.Response, params url.Values) {
	r.audit = r.follow(res, params, func(s *agreeServer) *string { return &s.auditNext })
}

// opSettings reads the settings, or changes them to what is in force
// already as far as the run's model goes (the registration mode it was
// started with, writes as good as unlimited), or sends values the
// settings do not take. A change is stored and audited alike on both.
func (r *agreeRun) opSettings() {
	lt := r.adminOrNot()
	if r.chance(0.4) {
		r.exchange(fmt.Sprintf("get settings with %s", r.tokenName(lt)), "", func(s *agreeServer) apitest.Request {
			return apitest.Request{Method: "GET", Path: "/api/admin/settings", Token: s.token(lt, r.unknown)}
		})
		return
	}
	body := []string{
		fmt.Sprintf(`{"registration":%q}`, r.c.mode),
		`{"writesPerAccount":"1000000/1ns"}`,
		fmt.Sprintf(`{"registration":%q,"writesPerAccount":"1000000/1ns"}`, r.c.mode),
		`{}`,
		`{"registration":"sometimes"}`,
		`{"registration":null}`,
		`{"writesPerAccount":"0/5s"}`,
		`{"writesPerAccount":"fast"}`,
		`{"writesPerAccount":"5/48h"}`,
		`{"writesPerAccount":60}`,
		`{"colour":"blue"}`,
	}[r.pick(11)]
	ct := "application/merge-patch+json"
	if r.chance(0.3) {
		ct = "application/json"
	}
	r.exchange(fmt.Sprintf("PATCH settings with %s: %s", r.tokenName(lt), body), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "PATCH", Path: "/api/admin/settings", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
	})
}
