package http_test

import (
	"fmt"
	"time"

	"herald/auth"
	"herald/http/internal/apitest"
	"herald/model"
)

// TestStoresAgree's bursts against the limits: failed guesses in a row,
// registrations past the limit on them, and logins past the most tokens an
// account may hold.

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
			r.exchange("guess a reset code", "", func(*agreeServer) apitest.Request {
				return apitest.Request{Method: "POST", Path: "/api/password-reset", ContentType: "application/json",
					Body: fmt.Sprintf(`{"code":%q,"newPassword":"a guessed password"}`, code)}
			})
		}
	default:
		lt := r.tokenOf(-1)
		for range n {
			r.exchange("change password with a wrong current one, with "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
				return apitest.Request{Method: "POST", Path: "/api/me/password", Token: s.token(lt, r.unknown), ContentType: "application/json",
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
			r.exchange("me with the old token "+r.tokenName(lt), "", func(s *agreeServer) apitest.Request {
				return apitest.Request{Method: "GET", Path: "/api/me", Token: s.token(lt, r.unknown)}
			})
		}
	}
}
