package snaphttp_test

import (
	"bufio"
	"encoding/json"
	"errors"

	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snaphttp"
)

// TestUnfinishedBodyIsAnswered: a POST /snap whose body never ends (a
// Content-Length it does not reach, a chunked body with no last chunk)
// is answered 400 once ReadTimeout passes, naming the reason, and its
// connection closed; it is not held open for ever while net/http waits
// to discard the rest of the body.
func TestUnfinishedBodyIsAnswered(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.ReadTimeout = 100 * time.Millisecond })
	host := strings.TrimPrefix(e.base, "http://")
	for name, req := range map[string]string{
		"short Content-Length": "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{\"a\":\"b\"}",
		"endless chunked":      "POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, req)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Fatalf("neither answered nor closed after 5 s (ReadTimeout 100ms)")
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct {
					Code int            `json:"code"`
					Data map[string]any `json:"data"`
				} `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || body.Error.Code != 1003 || body.Error.Data["field"] != "message" || body.Error.Data["reason"] != "timeout" || !resp.Close {
				t.Errorf("got %d %+v (close %v), want 400, 1003 naming field message, reason timeout, and the connection closed", resp.StatusCode, body.Error, resp.Close)
			}
			if _, err := io.ReadAll(c); err != nil {
				t.Errorf("connection not closed after the answer: %v", err)
			}
		})
	}
}
