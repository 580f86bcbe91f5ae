package http_test

import (
	"net/http"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// TestRegister_LookAlike: beside root@example.com, an address drawn like
// it is refused: as taken (409, saying it looks like an account's
// address) when it is a plausible address on its own, or as a bad
// address (422 on email, saying what to do) when it uses styled forms,
// another script inside one part, or an ideographic full stop for a dot.
// Addresses wholly in one script, or with accents, register.
func TestRegister_LookAlike(t *testing.T) {
	e := apitest.New(t)
	const pw, otherPW = "correct horse", "another horse"
	acctRegister(t, e, "root@example.com", pw)
	acctRegister(t, e, "ape@example.com", pw)

	for _, tt := range []struct{ email, detail string }{
		{"r\u1d0fot@example.com", "the e-mail r\u1d0fot@example.com looks like the address of an existing account (the same letters drawn alike); register with another address"},
		{"\u0430\u0440\u0435@example.com", "the e-mail \u0430\u0440\u0435@example.com looks like the address of an existing account (the same letters drawn alike); register with another address"},
		{"ROOT@example.com", "the e-mail ROOT@example.com is already registered"},
	} {
		t.Run(tt.email, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: apitest.JSONBody(t, map[string]string{"email": tt.email, "password": otherPW})})
			p := apitest.AssertProblem(t, res, http.StatusConflict)
			if got := p["detail"]; got != tt.detail {
				t.Errorf("detail = %q, want %q", got, tt.detail)
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, tt.email, otherPW)
		})
	}

	for _, tt := range []struct{ email, message string }{
		{"root@exa\u217fple.com", `must not contain styled forms of characters, such as fullwidth or mathematical letters (U+217F is "m" styled); type the plain characters instead`},
		{"\uff52oot@example.com", `must not contain styled forms of characters, such as fullwidth or mathematical letters (U+FF52 is "r" styled); type the plain characters instead`},
		{"\U0001d69boot@example.com", `must not contain styled forms of characters, such as fullwidth or mathematical letters (U+1D69B is "r" styled); type the plain characters instead`},
		{"ro\u2c9ft@example.com", "must not mix Latin and Coptic letters in one part (\"ro\u2c9ft\"), a common way to imitate another address"},
		{"r\u0585ot@example.com", "must not mix Latin and Armenian letters in one part (\"r\u0585ot\"), a common way to imitate another address"},
		{"root@example\u3002com", "must separate the parts of the domain with '.', not with the ideographic full stop (U+3002)"},
	} {
		t.Run(tt.email, func(t *testing.T) {
			before := e.Counts()
			res := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: apitest.JSONBody(t, map[string]string{"email": tt.email, "password": pw})})
			p := apitest.AssertProblem(t, res, http.StatusUnprocessableEntity)
			vs, _ := p["violations"].([]any)
			if len(vs) != 1 {
				t.Fatalf("violations = %v, want one, on email", p["violations"])
			}
			v, _ := vs[0].(map[string]any)
			if v["propertyPath"] != "email" || v["message"] != tt.message {
				t.Errorf("violation = %v, want email: %q", v, tt.message)
			}
			acctAssertUnchanged(t, e, before)
			acctAssertNoLogin(t, e, tt.email, pw)
		})
	}

	for _, email := range []string{"иван@пример.рф", "αλφα@παράδειγμα.ελ", "山田太郎@例え.jp", "josé@example.com", "jose@example.com"} {
		if got := acctRegister(t, e, email, pw)["email"]; got != email {
			t.Errorf("registered %q as %v", email, got)
		}
		if !strings.Contains(acctMustLogin(t, e, email, pw), "herald_") {
			t.Errorf("%s cannot log in", email)
		}
	}
}
