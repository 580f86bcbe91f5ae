package http_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

func tokenList(e *apitest.Env, token string) []map[string]any {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/me/tokens", Token: token})
	if res.Status != http.StatusOK {
		e.T.Fatalf("GET /api/me/tokens: %d %s", res.Status, res.Body)
	}
	var out []map[string]any
	for _, it := range res.JSON(e.T)["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func status(e *apitest.Env, req apitest.Request) int {
	e.T.Helper()
	return e.Do(req).Status
}

func me(token string) apitest.Request {
	return apitest.Request{Method: "GET", Path: "/api/me", Token: token}
}

func TestTokenRoutes(t *testing.T) {
	e := apitest.New(t)
	reg := e.Register("ada@example.com", pw)
	e.Clock.Advance(time.Second)
	laptop := e.Login("ada@example.com", pw)
	e.Clock.Advance(time.Second)
	phone := e.Login("ada@example.com", pw)
	bob := e.Register("bob@example.com", pw)

	list := tokenList(e, laptop)
	if got, want := len(list), 3; got != want {
		t.Fatalf("ada lists %d tokens, want %d", got, want)
	}
	idRE := regexp.MustCompile(`^[0-9a-f]{16}$`)
	var current []bool
	for _, it := range list {
		id, _ := it["id"].(string)
		if !idRE.MatchString(id) {
			t.Errorf("token id %q is not a 16-digit hex handle", id)
		}
		current = append(current, it["current"].(bool))
	}
	// Newest first: phone, laptop (the caller), registration.
	if want := []bool{false, true, false}; !slices.Equal(current, want) {
		t.Errorf("current flags = %v, want %v", current, want)
	}
	// Nothing of a secret or its hash appears in the list.
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/me/tokens", Token: laptop})
	for _, secret := range []string{reg, laptop, phone} {
		sum := sha256.Sum256([]byte(secret))
		for _, leak := range []string{secret, strings.TrimPrefix(secret, "herald_"), hex.EncodeToString(sum[:]), hex.EncodeToString(sum[:8])} {
			if strings.Contains(string(res.Body), leak) {
				t.Errorf("token list contains %q", leak)
			}
		}
	}

	t.Run("another user's token is not found", func(t *testing.T) {
		bobID := tokenList(e, bob)[0]["id"].(string)
		p := apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: "/api/me/tokens/" + bobID, Token: laptop}), http.StatusNotFound)
		if strings.Contains(fmt.Sprint(p["detail"]), "bob") {
			t.Errorf("detail %q tells whose token it is", p["detail"])
		}
		if got := status(e, me(bob)); got != http.StatusOK {
			t.Errorf("bob's token after ada tried to revoke it: %d", got)
		}
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "DELETE", Path: "/api/me/tokens/not-an-id", Token: laptop}), http.StatusNotFound)
	})
	t.Run("revoke one device", func(t *testing.T) {
		phoneID := tokenList(e, phone)[0]["id"].(string)
		if got := status(e, apitest.Request{Method: "DELETE", Path: "/api/me/tokens/" + phoneID, Token: laptop}); got != http.StatusNoContent {
			t.Fatalf("DELETE own device token: %d", got)
		}
		apitest.AssertProblem(t, e.Do(me(phone)), http.StatusUnauthorized)
		if got := status(e, me(laptop)); got != http.StatusOK {
			t.Errorf("the revoking token: %d", got)
		}
		if got := len(tokenList(e, laptop)); got != 2 {
			t.Errorf("tokens after revoking one = %d, want 2", got)
		}
	})
	t.Run("last used is kept to the minute", func(t *testing.T) {
		e.Clock.Advance(5 * time.Minute)
		e.Do(me(reg))
		var regInfo map[string]any
		for _, it := range tokenList(e, laptop) {
			if !it["current"].(bool) {
				regInfo = it
			}
		}
		if regInfo == nil || regInfo["lastUsedAt"] == regInfo["createdAt"] {
			t.Errorf("registration token after use: %v, want lastUsedAt moved on", regInfo)
		}
	})
	t.Run("log out everywhere", func(t *testing.T) {
		if got := status(e, apitest.Request{Method: "DELETE", Path: "/api/me/tokens", Token: laptop}); got != http.StatusNoContent {
			t.Fatalf("DELETE /api/me/tokens: %d", got)
		}
		for _, tok := range []string{reg, laptop} {
			apitest.AssertProblem(t, e.Do(me(tok)), http.StatusUnauthorized)
		}
		if got := status(e, me(bob)); got != http.StatusOK {
			t.Errorf("bob after ada logged out everywhere: %d", got)
		}
	})
}

func TestChangePassword(t *testing.T) {
	e := apitest.New(t)
	laptop := e.Register("ada@example.com", pw)
	phone := e.Login("ada@example.com", pw)
	change := func(token, body string) *apitest.Response {
		return e.Do(apitest.Request{Method: "POST", Path: "/api/me/password", Token: token, ContentType: "application/json", Body: body})
	}
	t.Run("wrong current password", func(t *testing.T) {
		p := apitest.AssertProblem(t, change(laptop, `{"currentPassword":"wrong password","newPassword":"a new password"}`), http.StatusUnauthorized)
		if p["detail"] != "the password is incorrect" {
			t.Errorf("detail = %q", p["detail"])
		}
		if got := status(e, me(phone)); got != http.StatusOK {
			t.Errorf("other token after a refused change: %d", got)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		for body, field := range map[string]string{
			`{"currentPassword":"` + pw + `","newPassword":"short"}`:    "newPassword",
			`{"currentPassword":"` + pw + `","newPassword":"        "}`: "newPassword",
			`{"currentPassword":"` + pw + `"}`:                          "newPassword",
			`{"newPassword":"a new password"}`:                          "currentPassword",
		} {
			p := apitest.AssertProblem(t, change(laptop, body), http.StatusUnprocessableEntity)
			assertViolation(t, p, field)
		}
		apitest.AssertProblem(t, change(laptop, `{"currentPassword":"x","newPassword":"y","password":"z"}`), http.StatusBadRequest)
	})
	t.Run("ok", func(t *testing.T) {
		if res := change(laptop, `{"currentPassword":"`+pw+`","newPassword":"a new password"}`); res.Status != http.StatusNoContent {
			t.Fatalf("change: %d %s", res.Status, res.Body)
		}
		if got := status(e, me(laptop)); got != http.StatusOK {
			t.Errorf("the changing token: %d, want 200", got)
		}
		apitest.AssertProblem(t, e.Do(me(phone)), http.StatusUnauthorized)
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
			Body: `{"username":"ada@example.com","password":"` + pw + `"}`}), http.StatusUnauthorized)
		e.Login("ada@example.com", "a new password")
	})
}

func TestDeleteAccount(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", pw)
	other := e.Login("ada@example.com", pw)
	bob := e.Register("bob@example.com", pw)
	var adaIDs []uint64
	for i := range 3 {
		adaIDs = append(adaIDs, apitest.MsgID(t, e.Post(ada, fmt.Sprint("ada's secret diary ", i))))
	}
	bobID := apitest.MsgID(t, e.Post(bob, "bob's diary"))
	del := func(body string) *apitest.Response {
		return e.Do(apitest.Request{Method: "DELETE", Path: "/api/me", Token: ada, ContentType: "application/json", Body: body})
	}
	apitest.AssertProblem(t, del(`{"password":"wrong password"}`), http.StatusUnauthorized)
	assertViolation(t, apitest.AssertProblem(t, del(`{}`), http.StatusUnprocessableEntity), "password")
	if got := e.Counts(); got.Users != 2 || got.Messages != 4 {
		t.Fatalf("refused deletions changed the store: %+v", got)
	}
	if res := del(`{"password":"` + pw + `"}`); res.Status != http.StatusNoContent {
		t.Fatalf("DELETE /api/me: %d %s", res.Status, res.Body)
	}
	for _, tok := range []string{ada, other} {
		apitest.AssertProblem(t, e.Do(me(tok)), http.StatusUnauthorized)
	}
	for _, id := range adaIDs {
		apitest.AssertProblem(t, e.Do(apitest.Request{Method: "GET", Path: msgPath(id), Token: bob}), http.StatusNotFound)
	}
	for q, want := range map[string][]uint64{
		"q=diary":                 {bobID},
		"q=secret":                nil,
		"owner=ada%40example.com": nil,
		"":                        {bobID},
	} {
		if got := searchIDs(t, e.Do(apitest.Request{Method: "GET", Path: "/api/messages?" + q, Token: bob})); !slices.Equal(got, want) {
			t.Errorf("search %q after deletion = %v, want %v", q, got, want)
		}
	}
	// The e-mail is free again, for a new account with nothing of the old.
	again := e.Register("Ada@Example.com", "another password")
	if got := searchIDs(t, e.Do(apitest.Request{Method: "GET", Path: "/api/messages?owner=ada%40example.com", Token: again})); len(got) != 0 {
		t.Errorf("the new account owns %v", got)
	}
	if got := e.Counts(); got.Users != 2 || got.Messages != 1 || got.Tokens != 2 {
		t.Errorf("store after deletion and re-registration: %+v", got)
	}
}

// loginAs posts credentials from a client address, through a trusted proxy
// that names it in X-Forwarded-For.
func loginFrom(e *apitest.Env, addr, email, password string) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
		Body:   apitest.JSONBody(e.T, map[string]string{"username": email, "password": password}),
		Header: http.Header{"X-Forwarded-For": {addr}}})
}

func retryAfter(t *testing.T, res *apitest.Response) int {
	t.Helper()
	apitest.AssertProblem(t, res, http.StatusTooManyRequests)
	n, err := strconv.Atoi(res.Header.Get("Retry-After"))
	if err != nil || n < 1 {
		t.Fatalf("Retry-After = %q, want whole seconds ≥ 1", res.Header.Get("Retry-After"))
	}
	return n
}

func TestLoginLimits(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

	t.Run("per account, from many addresses", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{TrustedProxies: loopback}))
		e.Register("ada@example.com", pw)
		// Two mistypes never lock the owner out.
		for range 2 {
			apitest.AssertProblem(t, loginFrom(e, "198.51.100.1", "ada@example.com", "mistyped"), http.StatusUnauthorized)
		}
		if res := loginFrom(e, "198.51.100.1", "ada@example.com", pw); res.Status != http.StatusOK {
			t.Fatalf("login after two mistypes: %d", res.Status)
		}
		// A guesser rotating addresses gets 10 tries at the account, all
		// told apart from nothing by the answer but the status.
		guesses := 0
		for i := range 30 {
			res := loginFrom(e, fmt.Sprintf("203.0.113.%d", i), "ADA@example.com", fmt.Sprint("guess ", i))
			if res.Status == http.StatusTooManyRequests {
				retryAfter(t, res)
				break
			}
			apitest.AssertProblem(t, res, http.StatusUnauthorized)
			guesses++
		}
		// The two mistypes above count too: a failure is a failure.
		if guesses > 8 {
			t.Errorf("%d guesses at one account got through, want at most 10 failures in all", guesses)
		}
		// Even the right password waits now, from any address...
		retryAfter(t, loginFrom(e, "192.0.2.7", "ada@example.com", pw))
		// ...until the budget refills.
		e.Clock.Advance(5 * time.Minute)
		if res := loginFrom(e, "192.0.2.7", "ada@example.com", pw); res.Status != http.StatusOK {
			t.Errorf("login after waiting: %d %s", res.Status, res.Body)
		}
	})

	t.Run("per address, across accounts", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{TrustedProxies: loopback}))
		e.Register("ada@example.com", pw)
		blocked := 0
		for i := range 40 {
			res := loginFrom(e, "203.0.113.9", fmt.Sprintf("user%d@example.com", i), "guess")
			if res.Status == http.StatusTooManyRequests {
				blocked++
			}
		}
		if blocked == 0 {
			t.Errorf("40 failed logins from one address across 40 accounts were never limited")
		}
		// Another address is not affected, nor is the account.
		if res := loginFrom(e, "198.51.100.1", "ada@example.com", pw); res.Status != http.StatusOK {
			t.Errorf("login from another address: %d", res.Status)
		}
	})

	t.Run("success elsewhere does not reset failures", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{TrustedProxies: loopback, LoginFailuresPerAccount: auth.Rate{Burst: 4, Every: time.Hour}}))
		e.Register("ada@example.com", pw)
		for range 3 {
			apitest.AssertProblem(t, loginFrom(e, "203.0.113.1", "ada@example.com", "guess"), http.StatusUnauthorized)
		}
		for range 5 { // the owner logs in from home, again and again
			if res := loginFrom(e, "198.51.100.1", "ada@example.com", pw); res.Status != http.StatusOK {
				t.Fatalf("owner's login: %d", res.Status)
			}
		}
		apitest.AssertProblem(t, loginFrom(e, "203.0.113.1", "ada@example.com", "guess"), http.StatusUnauthorized)
		retryAfter(t, loginFrom(e, "203.0.113.1", "ada@example.com", "guess"))
	})

	t.Run("X-Forwarded-For from an untrusted peer is ignored", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{LoginFailuresPerAddress: auth.Rate{Burst: 3, Every: time.Hour}}))
		for i := range 3 {
			apitest.AssertProblem(t, loginFrom(e, fmt.Sprintf("203.0.113.%d", i), fmt.Sprintf("u%d@example.com", i), "guess"), http.StatusUnauthorized)
		}
		// A fresh spoofed address buys nothing: all of it came from 127.0.0.1.
		retryAfter(t, loginFrom(e, "198.51.100.200", "someone@example.com", "guess"))
	})

	t.Run("only trusted hops are skipped", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{TrustedProxies: loopback, LoginFailuresPerAddress: auth.Rate{Burst: 2, Every: time.Hour}}))
		// The client wrote the first entry itself; the proxy appended the
		// address it saw. Only the latter counts.
		for i := range 2 {
			apitest.AssertProblem(t, loginFrom(e, fmt.Sprintf("10.9.9.%d, 203.0.113.5", i), fmt.Sprintf("u%d@example.com", i), "guess"), http.StatusUnauthorized)
		}
		retryAfter(t, loginFrom(e, "10.9.9.99, 203.0.113.5", "x@example.com", "guess"))
		// Some proxies write the client's port too: still that client.
		retryAfter(t, loginFrom(e, "203.0.113.5:4711", "x@example.com", "guess"))
		apitest.AssertProblem(t, loginFrom(e, "10.9.9.99, 203.0.113.6", "x@example.com", "guess"), http.StatusUnauthorized)
		apitest.AssertProblem(t, loginFrom(e, "[2001:db8::1]:4711", "x@example.com", "guess"), http.StatusUnauthorized)
	})

	t.Run("password confirmation counts as a login", func(t *testing.T) {
		e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{LoginFailuresPerAccount: auth.Rate{Burst: 3, Every: time.Hour}}))
		token := e.Register("ada@example.com", pw)
		for range 3 {
			apitest.AssertProblem(t, e.Do(apitest.Request{Method: "POST", Path: "/api/me/password", Token: token, ContentType: "application/json",
				Body: `{"currentPassword":"guess","newPassword":"a new password"}`}), http.StatusUnauthorized)
		}
		retryAfter(t, e.Do(apitest.Request{Method: "DELETE", Path: "/api/me", Token: token, ContentType: "application/json", Body: `{"password":"guess"}`}))
		retryAfter(t, e.Do(apitest.Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
			Body: `{"username":"ada@example.com","password":"` + pw + `"}`}))
	})
}

func TestRegistrationLimit(t *testing.T) {
	e := apitest.New(t)
	created := 0
	var last *apitest.Response
	for i := range 200 {
		last = e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
			Body: apitest.JSONBody(t, map[string]string{"email": fmt.Sprintf("flood%d@example.com", i), "password": pw})})
		if last.Status != http.StatusCreated {
			break
		}
		created++
	}
	if created == 0 || created > 100 {
		t.Errorf("%d registrations from one address before the limit, want 1..100", created)
	}
	wait := retryAfter(t, last)
	// Over an hour at full speed, at most 100 get through in all.
	for elapsed := 0; elapsed < 3600; elapsed += wait {
		e.Clock.Advance(time.Duration(wait) * time.Second)
		res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
			Body: apitest.JSONBody(t, map[string]string{"email": fmt.Sprintf("later%d@example.com", elapsed), "password": pw})})
		if res.Status == http.StatusCreated {
			created++
		}
	}
	if created > 100 {
		t.Errorf("%d registrations from one address within an hour, want at most 100", created)
	}
}

// TestWritesRacingLogout starts edits with a token, logs the token out
// while they run, and checks that no edit begun after the logout answered
// succeeded: the token is checked inside each write's transaction.
func TestWritesRacingLogout(t *testing.T) {
	e := apitest.New(t)
	token := e.Register("ada@example.com", pw)
	path := msgPath(apitest.MsgID(t, e.Post(token, "original")))
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		loggedOut  bool
		lateWins   int
		afterTries int
	)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each writer goes on until it has made 5 edits after the
			// logout, so the test always has late edits to judge.
			for i, late := 0, 0; late < 5; i++ {
				mu.Lock()
				after := loggedOut
				mu.Unlock()
				if after {
					late++
				}
				res := e.Do(apitest.Request{Method: "PATCH", Path: path, Token: token, ContentType: "application/json",
					Body: fmt.Sprintf(`{"content":"writer %d edit %d"}`, w, i)})
				if after {
					mu.Lock()
					afterTries++
					if res.Status == http.StatusOK {
						lateWins++
					}
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(5 * time.Millisecond) // let the edits get going; correctness does not depend on it
	if got := status(e, apitest.Request{Method: "POST", Path: "/api/logout", Token: token}); got != http.StatusNoContent {
		t.Fatalf("logout: %d", got)
	}
	mu.Lock()
	loggedOut = true
	mu.Unlock()
	wg.Wait()
	if lateWins != 0 {
		t.Errorf("%d of %d edits begun after the logout's 204 succeeded", lateWins, afterTries)
	}
}

// TestLoginUpgradesWeakHash: a password hashed under weaker parameters
// than the server's is re-hashed on a successful login, and the login still
// gets its token.
func TestLoginUpgradesWeakHash(t *testing.T) {
	e := apitest.New(t) // hashes with apitest.FastParams
	e.Register("ada@example.com", pw)
	stronger := apitest.FastParams
	stronger.MemoryKiB *= 2
	srv := httptest.NewServer(heraldhttp.NewServer(e.DB, auth.NewHasher(stronger, 1), heraldhttp.Config{}))
	defer srv.Close()
	res, err := http.Post(srv.URL+"/api/login", "application/json", strings.NewReader(`{"username":"ada@example.com","password":"`+pw+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login on the stronger server: %d", res.StatusCode)
	}
	u, err := e.DB.UserByEmail(context.Background(), "ada@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("m=%d,", stronger.MemoryKiB); !strings.Contains(u.PasswordHash, want) {
		t.Errorf("stored hash %q, want it re-hashed with %s", u.PasswordHash, want)
	}
	// The old server still verifies the upgraded hash (parameters travel
	// inside it).
	e.Login("ada@example.com", pw)
}
