package snaphttp_test

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snaphttp"
)

// TestBodyReadRefusalNamesNoSocket: the 400 answering a body that did
// not come within ReadTimeout names the field and the reason, and says
// nothing of the sockets: the error of the read names the node's own
// address (behind NAT or in a container, one the peer does not know)
// and port, which are none of the peer's business.
func TestBodyReadRefusalNamesNoSocket(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.ReadTimeout = 100 * time.Millisecond })
	host := strings.TrimPrefix(e.base, "http://")
	_, port, _ := net.SplitHostPort(host)
	for name, req := range map[string]string{
		"short Content-Length": "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{",
		"endless chunked":      "POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
		"100-continue":         "POST /snap HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.9", host)
			defer c.Close()
			io.WriteString(c, req)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(c)
			i := strings.Index(string(b), "{\"error\"")
			if i < 0 {
				t.Fatalf("no SNAP error in the answer:\n%s", b)
			}
			var body struct {
				Error struct {
					Code    int            `json:"code"`
					Message string         `json:"message"`
					Data    map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b[i:], &body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != 1003 || body.Error.Data["field"] != "message" || body.Error.Data["reason"] != "timeout" {
				t.Errorf("got %+v, want 1003 naming field message and reason timeout", body.Error)
			}
			if strings.Contains(body.Error.Message, "127.0.0.") || strings.Contains(body.Error.Message, port) {
				t.Errorf("the refusal names the sockets: %q", body.Error.Message)
			}
		})
	}
}
