package http

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"herald/auth"
	"herald/model"
)

// Limits bounds guessing and writing: failed logins (and failed password
// confirmations, invitations and reset codes) per account and per client
// address, registrations per client address, and the writes one account
// makes. Zero Rates take auth's defaults.
type Limits struct {
	LoginFailuresPerAccount auth.Rate
	LoginFailuresPerAddress auth.Rate
	RegistrationsPerAddress auth.Rate
	WritesPerAccount        auth.Rate
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed; without them the client address is the connection's.
	TrustedProxies []netip.Prefix
}

// localLimiter is an auth.Limiter in this process's memory, as a Spender.
type localLimiter struct{ l *auth.Limiter }

func (l localLimiter) Spend(_ context.Context, key string) (bool, time.Duration) {
	return l.l.Spend(key)
}

func (l localLimiter) Refund(_ context.Context, key string) { l.l.Refund(key) }

// guard applies Limits. Unless the store keeps them (SharedLimits), the
// limiters live in memory, bounded in size; a restart forgets them, which
// costs a guesser nothing they could not get by waiting a few minutes.
type guard struct {
	perAccount, perAddress, registrations auth.Spender
	// resetsPerEmail and resetsPerAddress bound the reset links asked for
	// by e-mail.
	resetsPerEmail, resetsPerAddress auth.Spender
	// writes is the write limit an administrator may change at run time
	// (setWriteRate): a new limiter takes the old one's place.
	writes  atomic.Pointer[rateLimiter]
	trusted []netip.Prefix
	limiter func(name string, r auth.Rate) auth.Spender
}

// rateLimiter is a limiter and the rate it allows.
type rateLimiter struct {
	auth.Spender
	rate auth.Rate
}

// writesLimiter names the write limit's limiter.
const writesLimiter = "writes-per-account"

// newGuard applies l, counting in shared when it is not nil.
func newGuard(l Limits, shared SharedLimits, now func() time.Time) *guard {
	limiter := func(name string, r auth.Rate) auth.Spender {
		if shared != nil {
			return shared.Limiter(name, r)
		}
		return localLimiter{auth.NewLimiter(r, auth.DefaultMaxKeys, now)}
	}
	orDefault := func(r auth.Rate, def func() auth.Rate) auth.Rate {
		if r == (auth.Rate{}) {
			return def()
		}
		return r
	}
	g := &guard{
		perAccount:       limiter("login-failures-per-account", orDefault(l.LoginFailuresPerAccount, auth.LoginFailuresPerAccount)),
		perAddress:       limiter("login-failures-per-address", orDefault(l.LoginFailuresPerAddress, auth.LoginFailuresPerAddress)),
		registrations:    limiter("registrations-per-address", orDefault(l.RegistrationsPerAddress, auth.RegistrationsPerAddress)),
		resetsPerEmail:   limiter("reset-requests-per-email", auth.ResetRequests()),
		resetsPerAddress: limiter("reset-requests-per-address", auth.ResetRequests()),
		trusted:          l.TrustedProxies,
		limiter:          limiter,
	}
	g.setWriteRate(orDefault(l.WritesPerAccount, auth.WritesPerAccount))
	return g
}

// setWriteRate makes r the write limit. A limiter of the new rate takes
// the old one's place: kept in memory, its counts start afresh, which
// gives each account at most one more burst per change; kept by the store
// (SharedLimits), they carry on under the same name.
func (g *guard) setWriteRate(r auth.Rate) {
	if cur := g.writes.Load(); cur != nil && cur.rate == r {
		return
	}
	g.writes.Store(&rateLimiter{Spender: g.limiter(writesLimiter, r), rate: r})
}

// writeRate is the write limit in force.
func (g *guard) writeRate() auth.Rate { return g.writes.Load().rate }

// spendResetRequest takes a request for a reset link from the budgets of
// its e-mail address and of the client's address, and reports whether
// both had one left.
func (g *guard) spendResetRequest(r *http.Request, email string) bool {
	ctx := r.Context()
	okEmail, _ := g.resetsPerEmail.Spend(ctx, model.EmailKey(email))
	okAddress, _ := g.resetsPerAddress.Spend(ctx, auth.AddressKey(g.clientAddr(r)))
	return okEmail && okAddress
}

// loginAttempt is one password check that counts against the limits until
// it turns out not to: a success, or a check that never ran.
type loginAttempt struct {
	g                *guard
	ctx              context.Context
	account, address string
}

// startLogin takes one try from the account's and the address's budgets
// before any hashing, so that parallel guesses cannot all slip through
// before the first failure is counted. Errors: 429 when either is spent.
func (g *guard) startLogin(r *http.Request, email string) (*loginAttempt, error) {
	a := &loginAttempt{g: g, ctx: r.Context(), account: model.EmailKey(email), address: auth.AddressKey(g.clientAddr(r))}
	okAccount, waitAccount := g.perAccount.Spend(a.ctx, a.account)
	okAddress, waitAddress := g.perAddress.Spend(a.ctx, a.address)
	switch {
	case okAccount && okAddress:
		return a, nil
	case okAccount:
		g.perAccount.Refund(a.ctx, a.account)
	case okAddress:
		g.perAddress.Refund(a.ctx, a.address)
	}
	return nil, tooManyRequests("too many failed logins; try again later", max(waitAccount, waitAddress))
}

// uncounted gives the try back: the password was right, or was never
// checked (the server was busy, the client left).
func (a *loginAttempt) uncounted() {
	if a.account != "" {
		a.g.perAccount.Refund(a.ctx, a.account)
	}
	a.g.perAddress.Refund(a.ctx, a.address)
}

// startCodeAttempt takes one try from the address's budget of failed
// logins before an invitation or a password-reset code is checked:
// guessing codes is guessing, and counts as such. Errors: 429 when the
// budget is spent.
func (g *guard) startCodeAttempt(r *http.Request) (*loginAttempt, error) {
	a := &loginAttempt{g: g, ctx: r.Context(), address: auth.AddressKey(g.clientAddr(r))}
	if ok, wait := g.perAddress.Spend(a.ctx, a.address); !ok {
		return nil, tooManyRequests("too many failed attempts from your address; try again later", wait)
	}
	return a, nil
}

// startRegistration counts one registration from the request's address.
// Errors: 429 beyond the limit.
func (g *guard) startRegistration(r *http.Request) error {
	if ok, wait := g.registrations.Spend(r.Context(), auth.AddressKey(g.clientAddr(r))); !ok {
		return tooManyRequests("too many registrations from your address; try again later", wait)
	}
	return nil
}

// writeAttempt is one create, edit or delete counted against its account's
// write limit.
type writeAttempt struct {
	writes auth.Spender // the limiter it was counted by
	ctx    context.Context
	key    string // "" for a write that is not counted
}

// startWrite counts one create, edit or delete of u's against the
// account's budget. Administrators' writes are not limited: they are
// trusted, and removing a flood can take many. Errors: 429 beyond the
// limit.
func (g *guard) startWrite(r *http.Request, u *model.User) (*writeAttempt, error) {
	a := &writeAttempt{writes: g.writes.Load(), ctx: r.Context()}
	if u.CanAdminister() {
		return a, nil
	}
	a.key = strconv.FormatUint(u.ID, 10)
	if ok, wait := a.writes.Spend(a.ctx, a.key); !ok {
		return nil, tooManyRequests("this account is writing faster than the server allows; slow down and try again", wait)
	}
	return a, nil
}

// done gives the write back to the budget when the server could not take
// it (a full disk, a shutdown, the client gone): retrying it is no flood.
func (a *writeAttempt) done(err error) {
	if a.key == "" || err == nil {
		return
	}
	if errors.Is(err, model.ErrNoSpace) || errors.Is(err, model.ErrUnavailable) || errors.Is(err, context.Canceled) {
		a.writes.Refund(a.ctx, a.key)
	}
}

// clientAddr is the address the limits count. It is the connection's peer,
// unless that peer is a trusted proxy: then X-Forwarded-For is read from
// the right, skipping trusted proxies, and the first address not trusted
// is the client. Entries left of it were written by the client itself and
// prove nothing.
func (g *guard) clientAddr(r *http.Request) netip.Addr {
	peer := remoteAddr(r)
	if !g.isTrusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := parseHop(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a garbled chain: trust none of it
		}
		hop = hop.Unmap()
		if !g.isTrusted(hop) {
			return hop
		}
		peer = hop
	}
	return peer
}

// parseHop reads one X-Forwarded-For entry: an address, or an address with
// a port as some proxies write it (192.0.2.1:4711, [2001:db8::1]:4711).
func parseHop(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, nil
	}
	ap, err := netip.ParseAddrPort(s)
	return ap.Addr(), err
}

func (g *guard) isTrusted(a netip.Addr) bool {
	for _, p := range g.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr is the connection's peer address; the zero Addr if it cannot
// be read (then every such request shares one limiter key).
func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}
