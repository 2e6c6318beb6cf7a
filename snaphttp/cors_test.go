package snaphttp_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snaphttp"
)

// A page of an origin in AllowedOrigins can use /snap as a browser SDK
// does: its fetch of Content-Type application/json is preceded by a CORS
// preflight, answered 204 naming the origin, POST and the headers it
// asked for, and the answer to its POST (SSE too) names the origin, so
// that the page may read it. Before, the preflight got 405 and the answer
// no Access-Control-Allow-Origin: a listed page could send (text/plain)
// but never read an answer. A page of another origin gets no allowance.
func TestAllowedOriginPreflight(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.AllowedOrigins = []string{"https://app.example"} })
	preflight := func(origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, e.base+"/snap", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "content-type,accept")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := preflight("https://app.example")
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "content-type") {
		t.Errorf("preflight of a listed origin: %d %v; want 204 allowing the origin, POST and Content-Type", resp.StatusCode, h)
	}
	if resp := preflight("https://evil.example"); resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.StatusCode != http.StatusForbidden {
		t.Errorf("preflight of another origin: %d %v; want 403 with no allowance", resp.StatusCode, resp.Header)
	}

	for _, accept := range []string{"", "text/event-stream"} {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", bytes.NewReader(raw(t, request(t, "message/send", sendPayload))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("POST (Accept %q) of a listed origin: %d, Access-Control-Allow-Origin %q; want 200 naming the origin",
				accept, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
		}
		if !strings.Contains(resp.Header.Get("Vary"), "Origin") {
			t.Errorf("POST (Accept %q): Vary %q, want Origin", accept, resp.Header.Get("Vary"))
		}
	}
}

// The refusals a listed page's POST can meet before its message is read
// (a body over MaxBody, 413; its address over the rate, 429) name the
// origin too, so that the page can read why and when to try again
// (Retry-After is exposed) rather than see an opaque network error.
func TestAllowedOriginReadsRefusals(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.AllowedOrigins = []string{"https://app.example"}
		c.MaxBody = 1024
		c.Rate, c.Burst = 0.001, 1
	})
	post := func(body []byte) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post(bytes.Repeat([]byte(" "), 4096)); resp.StatusCode != http.StatusRequestEntityTooLarge || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("a body over MaxBody: %d, Access-Control-Allow-Origin %q; want 413 naming the origin", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
	var resp *http.Response
	for range 3 {
		if resp = post([]byte("{}")); resp.StatusCode == http.StatusTooManyRequests {
			break
		}
	}
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("over the rate: %d, Access-Control-Allow-Origin %q; want 429 naming the origin", resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"))
	}
}
