package relay

import (
	"net/url"
	"strings"
)

// urlKey is the form of a relay URL under which SubscribeOptions.Since is
// matched to the pool's relays: scheme and host in lower case, the
// scheme's default port (80 for ws, 443 for wss) and trailing slashes
// dropped, so that a point kept under one spelling of a relay's URL is
// found under another. A URL that does not parse is its own key.
func urlKey(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return raw
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if port := u.Port(); scheme == "ws" && port == "80" || scheme == "wss" && port == "443" {
		host = strings.TrimSuffix(host, ":"+port)
	}
	key := scheme + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
	if u.RawQuery != "" {
		key += "?" + u.RawQuery
	}
	return key
}
