package snaphttp_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"

	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snaphttp"
)

// TestUnfinishedBodyIsAnswered: a POST /snap whose body never ends (a
// Content-Length it does not reach, a chunked body with no last chunk, a
// body awaited after 100-continue) is answered 400 once ReadTimeout
// passes, naming the field and the reason, and its connection closed; it
// is not held open for ever while net/http waits to discard the rest of
// the body. The refusal says nothing of the sockets: the error of the
// read names the node's own address (behind NAT or in a container, one
// the peer does not know) and port, which are none of the peer's
// business.
func TestUnfinishedBodyIsAnswered(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.ReadTimeout = 100 * time.Millisecond })
	host := strings.TrimPrefix(e.base, "http://")
	_, port, _ := net.SplitHostPort(host)
	for name, req := range map[string]string{
		"short Content-Length":         "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{\"a\":\"b\"}",
		"short Content-Length, 1 byte": "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{",
		"endless chunked":              "POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n",
		"endless chunked, 1 byte":      "POST /snap HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\n",
		"100-continue":                 "POST /snap HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			c := dialFrom(t, "127.0.0.9", host)
			defer c.Close()
			io.WriteString(c, req)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			for err == nil && resp.StatusCode < 200 { // 100 Continue
				resp, err = http.ReadResponse(br, nil)
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Fatalf("neither answered nor closed after 5 s (ReadTimeout 100ms)")
			}
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			var body errorAnswer
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || body.Error.Code != 1003 || body.Error.Data["field"] != "message" || body.Error.Data["reason"] != "timeout" || !resp.Close {
				t.Errorf("got %d %+v (close %v), want 400, 1003 naming field message, reason timeout, and the connection closed", resp.StatusCode, body.Error, resp.Close)
			}
			if strings.Contains(body.Error.Message, "127.0.0.") || strings.Contains(body.Error.Message, port) {
				t.Errorf("the refusal names the sockets: %q", body.Error.Message)
			}
			if _, err := io.ReadAll(br); err != nil {
				t.Errorf("connection not closed after the answer: %v", err)
			}
		})
	}
}

// TestRefusalOfUnsentBodyIsAnswered: a request refused before its body
// is read, whose body never comes, still gets its answer once
// ReadTimeout passes (net/http reads a body its handler left unread
// before it answers), then its connection is closed; the answer is not
// lost to a write deadline that passed while net/http waited.
func TestRefusalOfUnsentBodyIsAnswered(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.ReadTimeout = 300 * time.Millisecond
		c.WriteTimeout = 100 * time.Millisecond
		c.Burst, c.Rate = 1, 0.001
	})
	host := strings.TrimPrefix(e.base, "http://")
	// The rate-limit token of 127.0.0.2 is spent, so its next POST /snap
	// is refused before its body is read.
	if st, _ := postBody(t, e, "127.0.0.2", strings.NewReader("{}")); st != http.StatusOK {
		t.Fatalf("first POST: %d, want 200 (a SNAP error)", st)
	}
	for _, req := range []struct {
		src, head string
		status    int
	}{
		{"127.0.0.3", "GET /healthz HTTP/1.1\r\nHost: localhost", http.StatusOK},
		{"127.0.0.3", "GET /nowhere HTTP/1.1\r\nHost: localhost", http.StatusNotFound},
		{"127.0.0.4", "DELETE /snap HTTP/1.1\r\nHost: localhost", http.StatusMethodNotAllowed},
		{"127.0.0.4", "POST /snap HTTP/1.1\r\nHost: elsewhere.example", http.StatusMisdirectedRequest},
		{"127.0.0.5", "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded", http.StatusUnsupportedMediaType},
		{"127.0.0.2", "POST /snap HTTP/1.1\r\nHost: localhost", http.StatusTooManyRequests},
	} {
		c := dialFrom(t, req.src, host)
		defer c.Close()
		fmt.Fprintf(c, "%s\r\nContent-Length: 100\r\n\r\n{", req.head)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%s with a body that never comes: no answer: %v", strings.SplitN(req.head, "\r\n", 2)[0], err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != req.status || !resp.Close {
			t.Errorf("%s with a body that never comes: %d (close %v), want %d and the connection closed", strings.SplitN(req.head, "\r\n", 2)[0], resp.StatusCode, resp.Close, req.status)
		}
	}
}

// TestRefusalDoesNotAskForTheBody: a request that waits to be asked for
// its body (Expect: 100-continue) and is refused before the body is
// read gets its refusal at once, not a 100 Continue.
func TestRefusalDoesNotAskForTheBody(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.Burst, c.Rate = 1, 0.001 })
	host := strings.TrimPrefix(e.base, "http://")
	if st, _ := postBody(t, e, "127.0.0.2", strings.NewReader("{}")); st != http.StatusOK {
		t.Fatalf("first POST: %d, want 200 (a SNAP error)", st)
	}
	c := dialFrom(t, "127.0.0.2", host)
	defer c.Close()
	io.WriteString(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("got %d, want 429 at once", resp.StatusCode)
	}
}

// TestPostRefusesContentEncoding: a body in a content coding (gzip,
// deflate, …) is refused 415 before it is read, naming the header and
// the coding taken (none: identity), rather than read as it comes and
// answered as not JSON; a compressed bomb is never inflated.
func TestPostRefusesContentEncoding(t *testing.T) {
	e := start(t, nil, nil)
	for _, coding := range []string{"gzip", "deflate", "br", "gzip, identity"} {
		req, err := http.NewRequest(http.MethodPost, e.base+"/snap", strings.NewReader("\x1f\x8b\x08\x00"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", coding)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body errorAnswer
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		d := body.Error.Data
		if resp.StatusCode != http.StatusUnsupportedMediaType || body.Error.Code != 1005 || d["field"] != "Content-Encoding" || d["provided"] != coding ||
			fmt.Sprint(d["supported"]) != "[identity]" || resp.Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("Content-Encoding %s: %d %+v Accept-Encoding %q, want 415, 1005 naming the field, the coding and identity", coding, resp.StatusCode, body.Error, resp.Header.Get("Accept-Encoding"))
		}
	}
	// identity is no coding at all.
	req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", strings.NewReader("{}"))
	req.Header.Set("Content-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("Content-Encoding identity: %d, want 200 (a SNAP error)", resp.StatusCode)
	}
}

// TestChunkedRequestClosesItsConnection: a request with both
// Content-Length and Transfer-Encoding (a request smuggling shape: a
// proxy in front that framed it by its Content-Length would take the
// chunks as a next request) is framed by its chunks, as net/http does,
// and its connection closed after the answer, as RFC 9112 §6.1 requires
// (golang/go#80942: net/http keeps it). net/http drops the
// Content-Length before the handler sees the request, so every chunked
// request closes its connection.
func TestChunkedRequestClosesItsConnection(t *testing.T) {
	e := start(t, nil, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"2\r\n{}\r\n0\r\n\r\n"+
		"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("the request of Content-Length and Transfer-Encoding: %d (close %v), want 200 (a SNAP error) and the connection closed", resp.StatusCode, resp.Close)
	}
	if next, err := http.ReadResponse(br, nil); err == nil {
		next.Body.Close()
		t.Errorf("the request after it on the connection was answered %d: the connection was kept", next.StatusCode)
	}
}
