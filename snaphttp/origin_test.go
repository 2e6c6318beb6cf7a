package snaphttp_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snaphttp"
)

// AllowedOrigins is the one list of the web pages that may send
// messages, for POST /snap and the WebSocket upgrade alike; a page of
// another origin gets 403 on both, a page of the endpoint's own origin
// and a request without Origin are served. AllowedHosts adds names the
// server answers to; other names get 421.
func TestAllowedOriginsAndHosts(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.AllowedOrigins = []string{"https://app.example", "http://localhost:5173"}
		c.AllowedHosts = []string{"node.example"}
	})
	hostport := strings.TrimPrefix(e.base, "http://")
	post := func(origin, site, host string) int {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", bytes.NewReader(raw(t, request(t, "message/send", sendPayload))))
		req.Header.Set("Content-Type", "text/plain")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		if host != "" {
			req.Host = host
		}
		return do(t, "POST", http.DefaultClient, req).status
	}
	upgrade := func(origin, host string) int {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		if host != "" {
			h.Set("Host", host)
		}
		c, resp, err := websocket.DefaultDialer.Dial(e.ws, h)
		if c != nil {
			c.Close()
		}
		if resp == nil {
			t.Fatalf("upgrade from %q: %v", origin, err)
		}
		return resp.StatusCode
	}
	for _, tt := range []struct {
		origin, site, host string
		post, ws           int
	}{
		{"", "", "", 200, 101},
		{"https://app.example", "cross-site", "", 200, 101},
		{"http://localhost:5173", "same-site", "", 200, 101},
		{"http://localhost:5174", "same-site", "", 403, 403},
		{"https://evil.example", "cross-site", "", 403, 403},
		{"https://evil.example", "", "", 403, 403},
		{"null", "cross-site", "", 403, 403},
		{"http://" + hostport, "same-origin", "", 200, 101},
		{"http://node.example:1", "same-origin", "node.example:1", 200, 101},
		{"http://evil.example:1", "same-origin", "evil.example:1", 421, 421},
	} {
		if got := post(tt.origin, tt.site, tt.host); got != tt.post {
			t.Errorf("POST from %q (Sec-Fetch-Site %q, Host %q): %d, want %d", tt.origin, tt.site, tt.host, got, tt.post)
		}
		if got := upgrade(tt.origin, tt.host); got != tt.ws {
			t.Errorf("upgrade from %q (Host %q): %d, want %d", tt.origin, tt.host, got, tt.ws)
		}
	}

	e = start(t, nil, func(c *snaphttp.Config) { c.AllowedOrigins, c.AllowedHosts = []string{"*"}, []string{"*"} })
	if got := post("https://evil.example", "cross-site", "evil.example"); got != 200 {
		t.Errorf(`POST with AllowedOrigins and AllowedHosts "*": %d, want 200`, got)
	}
	for _, bad := range []snaphttp.Config{{AllowedOrigins: []string{"app.example"}}, {AllowedHosts: []string{"https://node.example"}}} {
		bad.Handler = e.snap
		if _, err := snaphttp.New(bad); err == nil {
			t.Errorf("New(%v %v): no error", bad.AllowedOrigins, bad.AllowedHosts)
		}
	}
}
