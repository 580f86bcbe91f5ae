package http_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/model"
)

// TestStoresAgree's operations on accounts and tokens: registrations,
// well-formed or not, logins and logouts, the caller's account and
// tokens, revocations, password changes and an account's own deletion.

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
	res := r.exchange(desc, "", func(s *agreeServer) apitest.Request {
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
		return apitest.Request{Method: "POST", Path: "/api/register", ContentType: ct, Body: body}
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

// login logs u in with email and password and records the token.
func (r *agreeRun) login(u int, email, password, format string) (int, bool) {
	ct, body := agreeBody(format, [][2]string{{"username", email}, {"password", password}})
	r.issue = agreeIssue{user: -1, token: len(r.tokens)}
	res := r.exchange(fmt.Sprintf("login %q (%s, u%d)", email, format, u), "", func(*agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/login", ContentType: ct, Body: body}
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
	res := r.exchange(desc, "", func(*agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/register", ContentType: ct, Body: body}
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
	res := r.exchange("logout with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/logout", Token: s.token(lt, r.unknown)}
	})
	if res[0].Status == http.StatusNoContent && lt >= 0 {
		r.tokens[lt].dead = true
	}
}

func (r *agreeRun) opMe() {
	lt := r.anyToken()
	r.exchange("me with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: "/api/me", Token: s.token(lt, r.unknown)}
	})
}

func (r *agreeRun) opTokens() {
	lt := r.anyToken()
	r.listTokens(lt)
}

// listTokens lists the tokens of lt's account with lt, learning lt's
// handle on each server from the item marked current.
func (r *agreeRun) listTokens(lt int) {
	res := r.exchange("list tokens with "+r.tokenName(lt), "tokens", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "GET", Path: "/api/me/tokens", Token: s.token(lt, r.unknown)}
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
	res := r.exchange(desc, "", func(s *agreeServer) apitest.Request {
		h := bogus
		if h == "" {
			h = s.handles[target]
			s.echo[h] = fmt.Sprintf("<handle of t%d>", target)
		}
		return apitest.Request{Method: "DELETE", Path: "/api/me/tokens/" + h, Token: s.token(caller, r.unknown)}
	})
	if res[0].Status == http.StatusNoContent && bogus == "" {
		r.tokens[target].dead = true
	}
}

func (r *agreeRun) opRevokeAll() {
	lt := r.anyToken()
	res := r.exchange("log out everywhere with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "DELETE", Path: "/api/me/tokens", Token: s.token(lt, r.unknown)}
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
	res := r.exchange(fmt.Sprintf("change password with %s to %q", r.tokenName(lt), next), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "POST", Path: "/api/me/password", Token: s.token(lt, r.unknown), ContentType: ct, Body: body}
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
	res := r.exchange(fmt.Sprintf("delete my account with %s, password %q", r.tokenName(lt), password), "", func(s *agreeServer) apitest.Request {
		return apitest.Request{Method: "DELETE", Path: "/api/me", Token: s.token(lt, r.unknown), ContentType: "application/json", Body: body}
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
