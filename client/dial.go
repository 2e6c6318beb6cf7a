package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
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
	// NAT: 100.64.0.0/10), unspecified, multicast, reserved
	// (240.0.0.0/4), IETF protocol assignment (192.0.0.0/24, where a
	// cloud's legacy metadata service answers), benchmarking
	// (198.18.0.0/15), documentation and IPv6 site-local (fec0::/10)
	// addresses, and to an IPv4 one of these written in
	// IPv6 (IPv4-mapped, IPv4-compatible, NAT64's 64:ff9b::/96, 6to4's
	// 2002::/16), and to NAT64's local-use prefix (64:ff9b:1::/48), whose
	// mapping the site decides: what an agent's card names
	// must not make the client reach the machine or its network. The
	// check is made on the address each connection is opened to, after
	// the name was resolved, so that a name that resolves to such an
	// address is refused too. Such a client uses no HTTP proxy, whose
	// address would be the one checked. A name's refused addresses are
	// skipped and its others tried in turn; the failure wraps
	// ErrPrivateAddress when the name has no other, and else is the
	// failure of those tried (a refused connection, a time-out), naming
	// the refused ones.
	RefusePrivate bool
	// OnRefused, when set, is called with each address RefusePrivate
	// refused, from the goroutine dialing.
	OnRefused func(netip.AddrPort)
	// Resolver resolves the endpoints' names; nil: net.DefaultResolver.
	Resolver *net.Resolver

	// class names the class of an address RefusePrivate refuses, ""
	// for one it connects to; nil: nonPublic. Tests set it.
	class func(netip.Addr) string
}

// newNet returns the HTTP client and the WebSocket dialer of cfg.
func newNet(cfg NetConfig) (*http.Client, *websocket.Dialer) {
	defaults.Positive(&cfg.DialTimeout, DefaultDialTimeout)
	defaults.Positive(&cfg.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	defaults.Positive(&cfg.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	if cfg.class == nil {
		cfg.class = nonPublic
	}
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second, Resolver: cfg.Resolver}
	proxy, dial := http.ProxyFromEnvironment, d.DialContext
	if cfg.RefusePrivate {
		d.Control = refusePrivate(cfg.class, cfg.OnRefused)
		proxy = nil
		dial = (&refusingDialer{d: d, class: cfg.class, onRefused: cfg.OnRefused}).DialContext
	}
	tr := &http.Transport{
		Proxy:                 proxy,
		DialContext:           dial,
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
		NetDialContext: dial,
		// The whole opening handshake: connect, TLS, the upgrade's answer.
		HandshakeTimeout: cfg.DialTimeout + cfg.TLSHandshakeTimeout + cfg.ResponseHeaderTimeout,
	}
	return hc, ws
}

// refusingDialer connects as its net.Dialer, whose Control refuses the
// addresses NetConfig.RefusePrivate names, but resolves a name itself
// and connects to its addresses in turn, so that a failure names what
// failed: net.Dialer reports only the first address's failure, and a
// name that resolves to a refused address and to one that failed to
// connect would read as refused (not worth trying again) when the one
// tried failed in a way that may pass. It tries the addresses one at a
// time, in the resolver's order, without net.Dialer's racing of IPv6
// and IPv4.
type refusingDialer struct {
	d         *net.Dialer
	class     func(netip.Addr) string
	onRefused func(netip.AddrPort)
}

// DialContext connects to address (host:port). The error, when only
// refused addresses were found, wraps ErrPrivateAddress; else it wraps
// each failure of the addresses tried and names the refused ones.
func (r *refusingDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return r.d.DialContext(ctx, network, address)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if _, notAddr := netip.ParseAddr(host); notAddr == nil || err != nil {
		// An address (Control judges it), or a port by name.
		return r.d.DialContext(ctx, network, address)
	}
	ipNet := "ip"
	switch network {
	case "tcp4":
		ipNet = "ip4"
	case "tcp6":
		ipNet = "ip6"
	}
	resolver := r.d.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	addrs, err := resolver.LookupNetIP(ctx, ipNet, host)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var (
		refused []string
		allowed []netip.AddrPort
	)
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.Unmap(), uint16(port))
		if class := r.class(a); class != "" {
			if r.onRefused != nil {
				r.onRefused(ap)
			}
			refused = append(refused, fmt.Sprintf("%s is %s", ap, class))
			continue
		}
		allowed = append(allowed, ap)
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("%w: %s: %s", ErrPrivateAddress, host, strings.Join(refused, ", "))
	}
	var failed []error
	for i, ap := range allowed {
		c, err := r.dialOne(ctx, network, ap, len(allowed)-i)
		if err == nil {
			return c, nil
		}
		failed = append(failed, err)
		if ctx.Err() != nil {
			break
		}
	}
	err = errors.Join(failed...)
	if len(refused) > 0 {
		// Named, not wrapped: the failure is the addresses' tried.
		err = fmt.Errorf("%w (%s's non-public addresses not connected to: %s)", err, host, strings.Join(refused, ", "))
	}
	return nil, err
}

// dialOne connects to ap, one of the left addresses still to try, within
// its share of the time left, as net.Dialer shares it: the time left
// divided among them, at least 2 s.
func (r *refusingDialer) dialOne(ctx context.Context, network string, ap netip.AddrPort, left int) (net.Conn, error) {
	deadline, ok := ctx.Deadline()
	if r.d.Timeout > 0 {
		if d := time.Now().Add(r.d.Timeout); !ok || d.Before(deadline) {
			deadline, ok = d, true
		}
	}
	if ok && left > 1 {
		remaining := time.Until(deadline)
		share := max(remaining/time.Duration(left), min(remaining, 2*time.Second))
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(share))
		defer cancel()
	}
	return r.d.DialContext(ctx, network, ap.String())
}

// refusePrivate is a net.Dialer's Control that refuses the addresses
// NetConfig.RefusePrivate names, reporting each to onRefused.
func refusePrivate(nonPublic func(netip.Addr) string, onRefused func(netip.AddrPort)) func(network, address string, _ syscall.RawConn) error {
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
	case protocolAssignments.Contains(a):
		// Not globally reachable (RFC 6890); a cloud's legacy metadata
		// service answers at 192.0.0.192.
		return "IETF protocol assignments"
	case benchmarking.Contains(a):
		// RFC 2544's, which networks use inside.
		return "benchmarking"
	case siteLocal.Contains(a):
		// Deprecated (RFC 3879), yet a site may still route it inside.
		return "site-local"
	}
	for _, p := range documentation {
		if p.Contains(a) {
			return "documentation"
		}
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

	protocolAssignments = netip.MustParsePrefix("192.0.0.0/24")
	benchmarking        = netip.MustParsePrefix("198.18.0.0/15")
	siteLocal           = netip.MustParsePrefix("fec0::/10")
	documentation       = []netip.Prefix{
		netip.MustParsePrefix("192.0.2.0/24"),
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
)
