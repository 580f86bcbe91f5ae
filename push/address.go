package push

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// No request may make Herald connect to an address of the operator's
// network: a subscription's endpoint is a URL anyone with an account
// chooses. Its host is checked when the subscription is made, and every
// address it resolves to is checked again right before each connection
// (see dialer), since what a name resolves to can change in between.

// nonPublic are the ranges an endpoint may not reach, besides those
// netip.Addr's own predicates name (loopback, link-local, multicast,
// unspecified).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),     // RFC 1918
	netip.MustParsePrefix("172.16.0.0/12"),  // RFC 1918
	netip.MustParsePrefix("192.168.0.0/16"), // RFC 1918
	netip.MustParsePrefix("100.64.0.0/10"),  // RFC 6598, carrier-grade NAT
	netip.MustParsePrefix("fc00::/7"),       // RFC 4193, unique local
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("192.0.0.0/24"),   // RFC 6890, protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // RFC 2544, benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"), // RFC 8215, NAT64 of a local network
	netip.MustParsePrefix("100::/64"),       // RFC 6666, discard
}

// IPv6 forms that carry an IPv4 address a gateway may forward to:
// NAT64's well-known prefix (RFC 6052) and 6to4 (RFC 3056). One that
// carries a private IPv4 address is as private as it is.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// Private reports whether ip is an address Herald must not connect to on
// a subscription's behalf: loopback, RFC 1918, fc00::/7, 100.64.0.0/10,
// link-local, multicast or unspecified, in IPv4, IPv6, or IPv4 mapped
// into IPv6; the reserved, benchmarking and discard ranges; and NAT64 or
// 6to4 forms of any of these. A zone (fe80::1%eth0) changes nothing.
func Private(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsUnspecified() || ip.IsMulticast() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	switch b := ip.As16(); {
	case ip.Is6() && nat64.Contains(ip):
		return Private(netip.AddrFrom4([4]byte(b[12:16])))
	case ip.Is6() && sixToFour.Contains(ip):
		return Private(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}

// Resolver finds a host's addresses; *net.Resolver is one. Tests give
// their own, to have a name resolve where they need it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ErrPrivateAddress is the dialer's refusal of a connection to a private
// address (see Private).
var ErrPrivateAddress = errors.New("the push endpoint's address is not a public one")

// EndpointProblem says what is wrong with a subscription's endpoint; ""
// when nothing is. The endpoint must be an https URL whose host resolves,
// to public addresses only unless allowPrivate.
func EndpointProblem(ctx context.Context, r Resolver, endpoint string, allowPrivate bool) string {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return "endpoint must be an absolute https:// URL"
	case u.Scheme != "https" || !strings.HasPrefix(endpoint, "https://"):
		return "endpoint must be an https:// URL"
	case u.User != nil:
		return "endpoint must not hold a user name or password"
	case len(endpoint) > MaxEndpointBytes:
		return fmt.Sprintf("endpoint must be at most %d bytes", MaxEndpointBytes)
	}
	host := u.Hostname()
	addrs, err := resolve(ctx, r, host)
	if err != nil || len(addrs) == 0 {
		return "endpoint's host " + host + " does not resolve"
	}
	if allowPrivate {
		return ""
	}
	for _, a := range addrs {
		if Private(a) {
			return "endpoint's host " + host + " is or resolves to a private address (loopback, private network, link-local, multicast or unspecified)"
		}
	}
	return ""
}

// MaxEndpointBytes bounds an endpoint's URL; push services' are a few
// hundred bytes.
const MaxEndpointBytes = 2048

// resolve returns host's addresses: itself when it is an IP literal (a
// zone kept), else what r finds.
func resolve(ctx context.Context, r Resolver, host string) ([]netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}, nil
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return nil, errors.New("no host")
	}
	return r.LookupNetIP(ctx, "ip", host)
}

// dialer connects to push services: it resolves the host itself, refuses
// a host with a private address (unless allowPrivate), and dials only the
// addresses it checked, so a name that resolves elsewhere by the time of
// the connection gains nothing.
type dialer struct {
	resolver     Resolver
	allowPrivate bool
	net          net.Dialer
}

// DialContext is http.Transport's DialContext.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := resolve(ctx, d.resolver, host)
	if err != nil {
		return nil, err
	}
	// One private address among public ones refuses them all, as at
	// subscription: a name that mixes them is no push service's.
	for _, a := range addrs {
		if !d.allowPrivate && Private(a) {
			return nil, fmt.Errorf("%s: %w", host, ErrPrivateAddress)
		}
	}
	var errs []error
	for _, a := range addrs {
		conn, err := d.net.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}
