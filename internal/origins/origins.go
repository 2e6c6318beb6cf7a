package origins

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Any in a list allows every origin, or every host.
const Any = "*"

// List is a checked list of allowed origins; its zero value allows none.
type List struct {
	any bool
	set map[string]bool
}

// Parse checks and normalizes list: each entry "*" or an http:// or
// https:// origin, written as a browser sends it (a trailing "/" and the
// scheme's default port are dropped, letters made lower case).
func Parse(list []string) (List, error) {
	all, set, err := parseEntries(list, Normalize)
	return List{any: all, set: set}, err
}

// parseEntries reads list: all when it holds Any, and the set of the
// other entries as norm writes them ("" with no error: left out), the
// errors of norm joined.
func parseEntries(list []string, norm func(string) (string, error)) (all bool, set map[string]bool, _ error) {
	set = make(map[string]bool, len(list))
	var errs []error
	for _, e := range list {
		if e == Any {
			all = true
			continue
		}
		n, err := norm(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n != "" {
			set[n] = true
		}
	}
	return all, set, errors.Join(errs...)
}

// Normalize returns origin as a browser writes it in Origin, or an error
// when it is no http:// or https:// origin.
func Normalize(origin string) (string, error) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return "", fmt.Errorf("origin %q: want \"*\" or scheme://host[:port], such as https://app.example.com or http://localhost:5173", origin)
	}
	host := strings.ToLower(u.Host)
	if p := u.Port(); (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return u.Scheme + "://" + host, nil
}

// Any reports whether l allows every origin.
func (l List) Any() bool { return l.any }

// Has reports whether l allows origin, as a browser sent it.
func (l List) Has(origin string) bool { return l.any || l.set[origin] }

// Origins returns the origins l names, "*" aside.
func (l List) Origins() []string {
	out := make([]string, 0, len(l.set))
	for o := range l.set {
		out = append(out, o)
	}
	return out
}

// Changes returns, sorted, the entries of next that old lacks (added) and
// those of old that next lacks (removed), "*" among them, as a log says
// what a reload changed.
func Changes(old, next List) (added, removed []string) {
	return missing(next, old), missing(old, next)
}

// missing returns, sorted, the entries of a that b lacks.
func missing(a, b List) []string {
	var out []string
	if a.any && !b.any {
		out = append(out, Any)
	}
	for o := range a.set {
		if !b.set[o] {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// Loopback reports whether origin is that of a page served from the
// machine itself: http or https on localhost, a name under .localhost
// (browsers resolve those to loopback themselves, never through DNS), or
// a loopback address, on any port.
func Loopback(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return loopbackName(u.Hostname())
}

func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// SameHost reports whether origin names host, a request's Host (as
// gorilla/websocket's default check compares them).
func SameHost(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// Hosts is a checked list of host names a server answers to besides
// loopback names and IP addresses; its zero value allows those alone.
type Hosts struct {
	any bool
	set map[string]bool
}

// ParseHosts checks list: each entry "*" or a host name (no scheme, no
// port), letters made lower case. An IP address, which Allows lets in
// anyway, is taken and needs no place in the list.
func ParseHosts(list []string) (Hosts, error) {
	all, set, err := parseEntries(list, func(name string) (string, error) {
		n := hostName(name)
		if _, err := netip.ParseAddr(n); err == nil {
			return "", nil
		}
		if n == "" || strings.ContainsAny(n, "/:@?#% ") {
			return "", fmt.Errorf("host %q: want \"*\" or a host name without scheme or port, such as node.example.com", name)
		}
		return n, nil
	})
	return Hosts{any: all, set: set}, err
}

// Allows reports whether a request whose Host is hostport is addressed
// to this server: no Host (HTTP/1.0), an IP address (a page whose origin
// is an address is served by whoever has it: no DNS rebinding can lead
// there), a loopback name, or a name of the list. A page whose name its
// DNS now resolves to this machine (DNS rebinding) names a host of its
// own, and is refused.
func (h Hosts) Allows(hostport string) bool {
	if hostport == "" || h.any {
		return true
	}
	host := hostport
	if hst, _, err := net.SplitHostPort(hostport); err == nil {
		host = hst
	}
	host = hostName(host)
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return loopbackName(host) || h.set[host]
}

// hostName is host (a Host without its port, or a list's entry) as the
// lists hold it: without the brackets of an IPv6 address, letters made
// lower case, without the trailing dot of a fully qualified name.
func hostName(host string) string {
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}
