package connlimit

import (
	"net"
	"net/http"
	"net/netip"
	"testing"
)

// peerConn is a connection from a given peer; admit and free read nothing
// else of it.
type peerConn struct {
	net.Conn
	peer *net.TCPAddr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

func from(addrPort string) net.Conn {
	return peerConn{peer: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addrPort))}
}

// TestAddressesCounted: an IPv6 address counts with its /64, as the
// guessing limits count it (a host is usually handed a whole /64), and an
// IPv4 address the same whether or not it arrives mapped into IPv6.
func TestAddressesCounted(t *testing.T) {
	l := Limit(&http.Server{}, nil, Options{PerAddress: 2}).(*listener)
	steps := []struct {
		peer  string
		admit bool
	}{
		{"[2001:db8::1]:1000", true},
		{"[2001:db8::2]:1000", true},
		{"[2001:db8::ffff:3]:1000", false}, // the same /64
		{"[2001:db8:0:1::1]:1000", true},   // the next /64
		{"192.0.2.1:1000", true},
		{"[::ffff:192.0.2.1]:1001", true},
		{"192.0.2.1:1002", false}, // the same address, mapped or not
		{"192.0.2.2:1000", true},
	}
	for _, s := range steps {
		if got := l.admit(from(s.peer)); got != s.admit {
			t.Errorf("admit(%s) = %v, want %v", s.peer, got, s.admit)
		}
	}
	// A refused connection held no place, so freeing it frees none; a
	// counted one frees its own, once.
	l.free(from("[2001:db8::ffff:3]:1000"))
	if l.admit(from("[2001:db8::4]:1000")) {
		t.Error("freeing a refused connection freed a place")
	}
	l.free(from("[2001:db8::1]:1000"))
	l.free(from("[2001:db8::1]:1000"))
	if !l.admit(from("[2001:db8::5]:1000")) {
		t.Error("a closed connection's place was not freed")
	}
	if l.admit(from("[2001:db8::6]:1000")) {
		t.Error("a connection freed twice gave back two places")
	}
}
