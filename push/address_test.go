package push

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestPrivate(t *testing.T) {
	tests := []struct {
		addr    string
		private bool
	}{
		{"127.0.0.1", true},
		{"127.255.0.9", true},
		{"::1", true},
		{"10.0.0.1", true},
		{"10.255.255.255", true},
		{"172.16.0.1", true},
		{"172.31.255.254", true},
		{"172.32.0.1", false},
		{"172.15.255.255", false},
		{"192.168.1.1", true},
		{"192.169.0.1", false},
		{"100.64.0.1", true},
		{"100.127.255.255", true},
		{"100.128.0.1", false},
		{"100.63.255.255", false},
		{"169.254.169.254", true}, // cloud metadata
		{"fe80::1", true},
		{"fe80::1%eth0", true},
		{"fc00::1", true},
		{"fd12:3456::1", true},
		{"fe00::1", false},
		{"224.0.0.1", true},
		{"239.255.255.250", true},
		{"ff02::1", true},
		{"ff05::1%eth0", true},
		{"0.0.0.0", true},
		{"0.1.2.3", true},
		{"::", true},
		{"::ffff:127.0.0.1", true},
		{"::ffff:10.1.2.3", true},
		{"::ffff:192.168.0.1", true},
		{"::ffff:169.254.1.1", true},
		{"::ffff:100.64.0.1", true},
		{"::ffff:0.0.0.0", true},
		{"::ffff:8.8.8.8", false},
		{"8.8.8.8", false},
		{"142.250.74.46", false},
		{"2606:4700::1111", false},
		{"2a00:1450:4001:82a::200a", false},
		{"192.0.0.8", true},
		{"198.18.0.1", true},
		{"198.19.255.255", true},
		{"198.20.0.1", false},
		{"240.0.0.1", true},
		{"255.255.255.255", true},
		{"64:ff9b::7f00:1", true},    // NAT64 of 127.0.0.1
		{"64:ff9b::a00:1", true},     // NAT64 of 10.0.0.1
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", false},  // NAT64 of 8.8.8.8
		{"64:ff9b:1::1", true},
		{"2002:a00:1::1", true},    // 6to4 of 10.0.0.1
		{"2002:7f00:1::", true},    // 6to4 of 127.0.0.1
		{"2002:808:808::1", false}, // 6to4 of 8.8.8.8
		{"100::1", true},
	}
	for _, tt := range tests {
		ip, err := netip.ParseAddr(tt.addr)
		if err != nil {
			t.Fatalf("%s: %v", tt.addr, err)
		}
		if got := Private(ip); got != tt.private {
			t.Errorf("Private(%s) = %v, want %v", tt.addr, got, tt.private)
		}
	}
	if !Private(netip.Addr{}) {
		t.Error("the zero address is not refused")
	}
}

// fakeResolver answers names from its map; others do not resolve.
type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

var names = fakeResolver{
	"push.example":     {"142.250.74.46", "2a00:1450:4001:82a::200a"},
	"inside.example":   {"10.1.2.3"},
	"mixed.example":    {"142.250.74.46", "192.168.0.7"},
	"mixed6.example":   {"2a00:1450:4001:82a::200a", "fd00::7"},
	"loop.example":     {"127.0.0.1"},
	"mapped.example":   {"::ffff:127.0.0.1"},
	"metadata.example": {"169.254.169.254"},
}

func TestEndpointProblem(t *testing.T) {
	tests := []struct {
		endpoint string
		want     string // a part of the problem; "" for none
	}{
		{"https://push.example/send/abc", ""},
		{"https://push.example:8443/send/abc", ""},
		{"https://142.250.74.46/x", ""},
		{"https://[2a00:1450:4001:82a::200a]/x", ""},
		{"http://push.example/send/abc", "https://"},
		{"wss://push.example/x", "https://"},
		{"push.example/x", "absolute"},
		{"", "absolute"},
		{"https:///x", "absolute"},
		{"https://user:pw@push.example/x", "user name"},
		{"https://nowhere.example/x", "does not resolve"},
		{"https://inside.example/x", "private"},
		{"https://mixed.example/x", "private"},
		{"https://mixed6.example/x", "private"},
		{"https://loop.example/x", "private"},
		{"https://mapped.example/x", "private"},
		{"https://metadata.example/x", "private"},
		{"https://127.0.0.1/x", "private"},
		{"https://127.0.0.1:443/x", "private"},
		{"https://localhost./x", "does not resolve"},
		{"https://[::1]/x", "private"},
		{"https://[::ffff:7f00:1]/x", "private"},
		{"https://[::ffff:127.0.0.1]/x", "private"},
		{"https://[fe80::1%25eth0]/x", "private"},
		{"https://[fd00::1]/x", "private"},
		{"https://10.0.0.8/x", "private"},
		{"https://172.20.1.1/x", "private"},
		{"https://192.168.178.1/x", "private"},
		{"https://100.100.100.100/x", "private"},
		{"https://0.0.0.0/x", "private"},
		{"https://[::]/x", "private"},
		{"https://224.0.0.251/x", "private"},
		{"https://push.example/" + strings.Repeat("a", MaxEndpointBytes), "at most"},
	}
	for _, tt := range tests {
		got := EndpointProblem(context.Background(), names, tt.endpoint, false)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("EndpointProblem(%q) = %q, want %q", tt.endpoint, got, tt.want)
		}
	}
	// Allowed private addresses still must be https and resolve.
	if got := EndpointProblem(context.Background(), names, "https://loop.example/x", true); got != "" {
		t.Errorf("a private endpoint with private addresses allowed: %q", got)
	}
	if got := EndpointProblem(context.Background(), names, "https://nowhere.example/x", true); got == "" {
		t.Error("an endpoint that does not resolve is taken with private addresses allowed")
	}
}

// TestDialerRefusesPrivate: the dialer resolves itself and refuses a
// host with a private address among its addresses, before connecting:
// the listener on loopback never sees a connection.
func TestDialerRefusesPrivate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	d := &dialer{resolver: fakeResolver{"rebound.example": {"127.0.0.1"}, "mixed.example": {"142.250.74.46", "127.0.0.1"}}}
	for _, host := range []string{"rebound.example", "mixed.example", "127.0.0.1", "::ffff:127.0.0.1"} {
		_, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort(host, port))
		if !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("dialing %s = %v, want ErrPrivateAddress", host, err)
		}
	}
	select {
	case <-accepted:
		t.Error("a refused dial reached the listener")
	default:
	}
	d.allowPrivate = true
	conn, err := d.DialContext(context.Background(), "tcp", net.JoinHostPort("rebound.example", port))
	if err != nil {
		t.Fatalf("dialing with private addresses allowed: %v", err)
	}
	conn.Close()
}

// TestErrTextHidesEndpoint: a failed request's error is logged without
// the endpoint's path.
func TestErrTextHidesEndpoint(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://push.example/send/SECRET-DEVICE-TOKEN", Err: errors.New("connection refused")}
	if got := errText(err); strings.Contains(got, "SECRET") || !strings.Contains(got, "connection refused") {
		t.Errorf("errText = %q", got)
	}
}
