package client

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/defaults"
)

// Connection bounds of the client NewHTTP makes (see NetConfig).
const (
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
)

// ErrPrivateAddress: an endpoint's name resolved to an address of a class
// the client refuses (NetConfig.RefusePrivate). Such a failure is not
// tried again.
var ErrPrivateAddress = errors.New("client: refused to connect to a non-public address")

// NetConfig is how the client NewHTTP makes, when HTTPConfig.HTTP and
// HTTPConfig.Dialer are nil, connects to agents: for HTTP and WebSocket
// alike.
type NetConfig struct {
	// DialTimeout bounds a TCP connect (default DefaultDialTimeout),
	// TLSHandshakeTimeout its TLS handshake (DefaultTLSHandshakeTimeout),
	// and ResponseHeaderTimeout the wait, once a request is written, for
	// the headers of its answer, a WebSocket's upgrade included
	// (DefaultResponseHeaderTimeout). The caller's context bounds the
	// whole exchange besides.
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	// NoRedirects follows no redirect at all: the redirect is the
	// exchange's answer, a *StatusError. Without it, only a host's move
	// from http to https is followed (see followRedirect).
	NoRedirects bool
	// RefusePrivate refuses connections to loopback, link-local, private
	// (RFC 1918, RFC 4193 unique local), shared (RFC 6598, carrier-grade
	// NAT: 100.64.0.0/10), unspecified, multicast and reserved
	// (240.0.0.0/4) addresses, and to an IPv4 one of these written in
	// IPv6 (IPv4-mapped, IPv4-compatible, NAT64's 64:ff9b::/96, 6to4's
	// 2002::/16), and to NAT64's local-use prefix (64:ff9b:1::/48), whose
	// mapping the site decides: what an agent's card names
	// must not make the client reach the machine or its network. The
	// check is made on the address each connection is opened to, after
	// the name was resolved, so that a name that resolves to such an
	// address is refused too. Such a client uses no HTTP proxy, whose
	// address would be the one checked. The failure wraps
	// ErrPrivateAddress.
	RefusePrivate bool
	// OnRefused, when set, is called with each address RefusePrivate
	// refused, from the goroutine dialing.
	OnRefused func(netip.AddrPort)
}

// newNet returns the HTTP client and the WebSocket dialer of cfg.
func newNet(cfg NetConfig) (*http.Client, *websocket.Dialer) {
	defaults.Positive(&cfg.DialTimeout, DefaultDialTimeout)
	defaults.Positive(&cfg.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	defaults.Positive(&cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	proxy := http.ProxyFromEnvironment
	if cfg.RefusePrivate {
		d.Control = refusePrivate(cfg.OnRefused)
		proxy = nil
	}
	tr := &http.Transport{
		Proxy:                 proxy,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
	hc := &http.Client{Transport: tr, CheckRedirect: followRedirect}
	if cfg.NoRedirects {
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	ws := &websocket.Dialer{
		Proxy:          proxy,
		NetDialContext: d.DialContext,
		// The whole opening handshake: connect, TLS, the upgrade's answer.
		HandshakeTimeout: cfg.DialTimeout + cfg.TLSHandshakeTimeout + cfg.ResponseHeaderTimeout,
	}
	return hc, ws
}

// refusePrivate is a net.Dialer's Control that refuses the addresses
// NetConfig.RefusePrivate names, reporting each to onRefused.
func refusePrivate(onRefused func(netip.AddrPort)) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrPrivateAddress, address, err)
		}
		class := nonPublic(ap.Addr())
		if class == "" {
			return nil
		}
		if onRefused != nil {
			onRefused(ap)
		}
		return fmt.Errorf("%w: %s is %s", ErrPrivateAddress, ap, class)
	}
}

// nonPublic names the class of a that a client refusing private addresses
// does not connect to, or "" when it may. An IPv4 address written in
// IPv6 (IPv4-mapped, IPv4-compatible, NAT64's well-known prefix, 6to4)
// is judged by the IPv4 address it reaches.
func nonPublic(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if a.Is6() {
		b := a.As16()
		switch {
		case a.IsUnspecified(), a.IsLoopback():
		case nat64Local.Contains(a):
			// RFC 8215: the site decides what it maps to.
			return "NAT64 local-use"
		case nat64.Contains(a), ipv4Compatible.Contains(a):
			if class := nonPublic(netip.AddrFrom4([4]byte(b[12:]))); class != "" {
				return class + " (embedded in " + a.String() + ")"
			}
		case sixToFour.Contains(a):
			if class := nonPublic(netip.AddrFrom4([4]byte(b[2:6]))); class != "" {
				return class + " (embedded in " + a.String() + ")"
			}
		}
	}
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsMulticast():
		return "multicast"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	case a.IsUnspecified(), a.Is4() && a.As4()[0] == 0:
		// 0.0.0.0/8: "this network"; Linux connects 0.0.0.0 to the
		// machine itself.
		return "unspecified"
	case shared.Contains(a):
		// Carrier-grade NAT's side of the provider, and some clouds'
		// metadata service (100.100.100.200).
		return "shared (RFC 6598)"
	case reserved.Contains(a):
		// 240.0.0.0/4 and the limited broadcast address.
		return "reserved"
	}
	return ""
}

// The prefixes nonPublic knows besides those of netip.Addr's methods.
var (
	shared         = netip.MustParsePrefix("100.64.0.0/10")
	reserved       = netip.MustParsePrefix("240.0.0.0/4")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local     = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	ipv4Compatible = netip.MustParsePrefix("::/96")
)
