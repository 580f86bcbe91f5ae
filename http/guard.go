package http

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"herald/auth"
	"herald/model"
)

// Limits bounds guessing: failed logins (and failed password confirmations)
// per account and per client address, and registrations per client
// address. Zero Rates take auth's defaults.
type Limits struct {
	LoginFailuresPerAccount auth.Rate
	LoginFailuresPerAddress auth.Rate
	RegistrationsPerAddress auth.Rate
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed; without them the client address is the connection's.
	TrustedProxies []netip.Prefix
}

// guard applies Limits. The limiters live in memory, bounded in size; a
// restart forgets them, which costs a guesser nothing they could not get by
// waiting a few minutes.
type guard struct {
	perAccount, perAddress, registrations *auth.Limiter
	trusted                               []netip.Prefix
}

func newGuard(l Limits, now func() time.Time) *guard {
	orDefault := func(r auth.Rate, def func() auth.Rate) auth.Rate {
		if r == (auth.Rate{}) {
			return def()
		}
		return r
	}
	return &guard{
		perAccount:    auth.NewLimiter(orDefault(l.LoginFailuresPerAccount, auth.LoginFailuresPerAccount), auth.DefaultMaxKeys, now),
		perAddress:    auth.NewLimiter(orDefault(l.LoginFailuresPerAddress, auth.LoginFailuresPerAddress), auth.DefaultMaxKeys, now),
		registrations: auth.NewLimiter(orDefault(l.RegistrationsPerAddress, auth.RegistrationsPerAddress), auth.DefaultMaxKeys, now),
		trusted:       l.TrustedProxies,
	}
}

// loginAttempt is one password check that counts against the limits until
// it turns out not to: a success, or a check that never ran.
type loginAttempt struct {
	g                *guard
	account, address string
}

// startLogin takes one try from the account's and the address's budgets
// before any hashing, so that parallel guesses cannot all slip through
// before the first failure is counted. Errors: 429 when either is spent.
func (g *guard) startLogin(r *http.Request, email string) (*loginAttempt, error) {
	a := &loginAttempt{g: g, account: model.EmailKey(email), address: auth.AddressKey(g.clientAddr(r))}
	okAccount, waitAccount := g.perAccount.Spend(a.account)
	okAddress, waitAddress := g.perAddress.Spend(a.address)
	switch {
	case okAccount && okAddress:
		return a, nil
	case okAccount:
		g.perAccount.Refund(a.account)
	case okAddress:
		g.perAddress.Refund(a.address)
	}
	return nil, tooManyRequests("too many failed logins; try again later", max(waitAccount, waitAddress))
}

// uncounted gives the try back: the password was right, or was never
// checked (the server was busy, the client left).
func (a *loginAttempt) uncounted() {
	a.g.perAccount.Refund(a.account)
	a.g.perAddress.Refund(a.address)
}

// startRegistration counts one registration from the request's address.
// Errors: 429 beyond the limit.
func (g *guard) startRegistration(r *http.Request) error {
	if ok, wait := g.registrations.Spend(auth.AddressKey(g.clientAddr(r))); !ok {
		return tooManyRequests("too many registrations from your address; try again later", wait)
	}
	return nil
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
