package snaphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// post sends body to /snap with the given headers and returns the answer.
func post(t *testing.T, e *env, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", bytes.NewReader(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// An SDK peer posts with Content-Type: application/json only (no
// SNAP-Version, no Accept). Also taken: a JSON type of its own (+json), a
// charset of UTF-8, no Content-Type (a peer that sends none), and
// text/plain, which a browser page's fetch sends with no CORS preflight
// (Config.AllowedOrigins).
func TestPostAnswersSignedResponse(t *testing.T) {
	e := start(t, nil, nil)
	for _, ct := range []string{"application/json", "Application/JSON; charset=UTF-8", "application/snap+json", "text/plain", "text/plain;charset=UTF-8", ""} {
		t.Run("content-type "+ct, func(t *testing.T) {
			resp, b := post(t, e, raw(t, request(t, "message/send", sendPayload)), map[string]string{"Content-Type": ct})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := resp.Header.Get("SNAP-Version"); got != "0.1" {
				t.Errorf("SNAP-Version %q", got)
			}
			v := verify(t, b)
			if v.Type != snap.TypeResponse || v.Method != "message/send" || errCode(v.Payload) != 0 {
				t.Errorf("response %s", b)
			}
		})
	}
}

// A body whose Content-Type names another format than JSON (a form, a
// file, HTML; JSON in another charset than UTF-8, RFC 8259's one) is
// refused before it is read, 415 with the SNAP error of an unsupported
// media type and the spec's data for it, {provided, supported}; the
// message is not handled. SSE requests alike.
func TestPostRefusesOtherContentTypes(t *testing.T) {
	var handled atomic.Int32
	e := start(t, &hooks{send: func(context.Context) { handled.Add(1) }}, nil)
	for _, ct := range []string{
		"application/x-www-form-urlencoded", // curl -d
		"multipart/form-data; boundary=x",
		"application/octet-stream",
		"text/html",
		"application/json; charset=ISO-8859-1",
		"not a media type;;",
	} {
		for _, accept := range []string{"", "text/event-stream"} {
			resp, b := post(t, e, raw(t, request(t, "message/send", sendPayload)), map[string]string{"Content-Type": ct, "Accept": accept})
			var doc struct {
				Error snap.Error `json:"error"`
			}
			if resp.StatusCode != http.StatusUnsupportedMediaType || json.Unmarshal(b, &doc) != nil {
				t.Fatalf("Content-Type %q, Accept %q: %d %s, want 415", ct, accept, resp.StatusCode, b)
			}
			d := doc.Error.Data
			if doc.Error.Code != snap.CodeContentTypeNotSupported || d["provided"] != ct || fmt.Sprint(d["supported"]) != "[application/json]" || d["status"] != 415.0 {
				t.Errorf("Content-Type %q: %s, want 1005 with data {status: 415, provided, supported: [application/json]}", ct, b)
			}
		}
	}
	if n := handled.Load(); n != 0 {
		t.Errorf("%d messages of a refused Content-Type handled", n)
	}
}

// Every SNAP error is HTTP 200 with payload.error: the SNAP specification's
// HTTP transport says so, and the reference SDK loses the error on any
// other status.
func TestPostSNAPErrorsAre200(t *testing.T) {
	e := start(t, nil, nil)
	dup := request(t, "tasks/get", `{"taskId":"t-1"}`)
	post(t, e, raw(t, dup), nil)
	tampered := raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`))
	tampered = bytes.Replace(tampered, []byte(`"t-1"`), []byte(`"t-2"`), 1)
	cases := []struct {
		name string
		body []byte
		want snap.Code
	}{
		// "bad signature" alone also closes the connection (forged).
		{"not an object", []byte(`[1,2]`), snap.CodeInvalidMessage},
		{"duplicate member", []byte(`{"id":"a","id":"b"}`), snap.CodeInvalidMessage},
		{"missing fields", []byte(`{"id":"x"}`), snap.CodeInvalidPayload},
		{"bad signature", tampered, snap.CodeSignatureInvalid},
		{"stale timestamp", raw(t, requestFrom(t, clientKey, addr(serverKey), "tasks/get", `{"taskId":"t-1"}`, time.Now().Add(-time.Hour))), snap.CodeTimestampExpired},
		{"another recipient", raw(t, requestFrom(t, clientKey, addr(otherKey), "tasks/get", `{"taskId":"t-1"}`, time.Now())), snap.CodeInvalidPayload},
		{"unknown method", raw(t, request(t, "tasks/nothing", `{}`)), snap.CodeMethodNotFound},
		{"handler error", raw(t, request(t, "tasks/get", `{"taskId":"nope"}`)), snap.CodeTaskNotFound},
		{"replayed", raw(t, dup), snap.CodeDuplicateMessage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, e, tc.body, map[string]string{"Content-Type": "application/json"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200: %s", resp.StatusCode, b)
			}
			var m struct {
				Type    string          `json:"type"`
				From    string          `json:"from"`
				Sig     string          `json:"sig"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if m.Type != "response" || m.From != addr(serverKey) || len(m.Sig) != 128 {
				t.Errorf("not a signed response: %s", b)
			}
			if got := errCode(m.Payload); got != tc.want {
				t.Errorf("error code %d, want %d: %s", got, tc.want, b)
			}
			if forged := tc.want == snap.CodeSignatureInvalid; resp.Close != forged {
				t.Errorf("the server closes the connection: %v, want %v", resp.Close, forged)
			}
		})
	}
}

// 400 only for a body that is not JSON; the JSON body says so.
func TestPostMalformedIs400(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxBody = 1024 })
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"not JSON", []byte(`{"id":`), "not JSON"},
		{"empty", nil, "not JSON"},
		{"binary", []byte{0xff, 0xfe, 0x00}, "not JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, e, tc.body, nil)
			if resp.StatusCode != 400 {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, b)
			}
			if !json.Valid(b) || !strings.Contains(string(b), tc.want) {
				t.Errorf("body %s, want JSON mentioning %s", b, tc.want)
			}
			if resp.Header.Get("SNAP-Version") != "0.1" {
				t.Error("no SNAP-Version on an error")
			}
		})
	}
	// A body exactly at the limit is read.
	exact := []byte(`{"pad":"` + strings.Repeat("p", 1024-10) + `"}`)
	if len(exact) != 1024 {
		t.Fatalf("%d", len(exact))
	}
	if resp, b := post(t, e, exact, nil); resp.StatusCode != 200 || errCode(verifyLoose(t, b)) == 0 {
		t.Errorf("body at the limit: %d %s", resp.StatusCode, b)
	}
}

// A body that is not JSON is 400 with the validator's syntax refusal:
// code 1003 and data naming the field and the rule broken (reason), as a
// WebSocket peer's signed answer says, where the body said only "not
// JSON". Among them what a hostile peer sends to confuse a parser: a
// byte order mark, invalid UTF-8, a NUL, data after the object, nesting
// deeper than any JSON decoder takes.
func TestPostNotJSONNamesFieldAndReason(t *testing.T) {
	e := start(t, nil, nil)
	body := raw(t, request(t, "message/send", sendPayload))
	deep := `{"payload":` + strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10002)
	cases := []struct {
		name        string
		body        []byte
		field, rule string
	}{
		{"byte order mark", append([]byte("\xef\xbb\xbf"), body...), "message", "invalid character"},
		{"NUL", []byte("{\x00}"), "message", "invalid character"},
		{"data after the object", append(append([]byte{}, body...), " {}"...), "message", "data after the JSON object"},
		{"depth bomb", []byte(deep), "payload.a.a", "exceeded max depth"},
		{"truncated", body[:len(body)/2], "message", "unexpected end of JSON input"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, e, tc.body, nil)
			var got struct {
				Error struct {
					Code    int
					Message string
					Data    struct {
						Status        int
						Field, Reason string
					}
				}
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("body %.300s: %v", b, err)
			}
			g, d := got.Error, got.Error.Data
			if resp.StatusCode != 400 || g.Code != int(snap.CodeInvalidMessage) || d.Status != 400 {
				t.Errorf("status %d, body %.300s; want 400 and code 1003", resp.StatusCode, b)
			}
			if !strings.HasPrefix(d.Field, tc.field) || !strings.Contains(d.Reason, tc.rule) || !strings.Contains(g.Message, tc.rule) {
				t.Errorf("body %.300s; want data.field %q… and a reason and message saying %q", b, tc.field, tc.rule)
			}
		})
	}
}

// What is JSON to the transport but not I-JSON — invalid UTF-8, a
// duplicate name, a number beyond a double — reaches the validator and
// gets its signed 1003 naming the field and the reason.
func TestPostNotIJSONNamesFieldAndReason(t *testing.T) {
	e := start(t, nil, nil)
	body := string(raw(t, request(t, "message/send", sendPayload)))
	for _, tc := range []struct {
		name, body, field, reason string
	}{
		{"invalid UTF-8", "{\"x\":\"\xff\xfe\"," + body[1:], "x", "invalid UTF-8"},
		{"duplicate name", `{"id":"x",` + body[1:], "id", "duplicate object member name"},
		{"huge number", `{"x":1e999999,` + body[1:], "x", "outside the range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := post(t, e, []byte(tc.body), nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %.300s", resp.StatusCode, b)
			}
			se := snap.ResponseError(verifyLoose(t, b))
			if se == nil || se.Code != snap.CodeInvalidMessage || se.Data["field"] != tc.field || !strings.Contains(fmt.Sprint(se.Data["reason"]), tc.reason) {
				t.Errorf("answer %.400s; want 1003 naming field %q and reason %q", b, tc.field, tc.reason)
			}
		})
	}
}

// A body over MaxBody is 413 Content Too Large, as the SNAP
// specification's security practices say, whether its length was
// declared or found while reading (chunked); the JSON body names the
// limit and, as the validator's refusal of a message over 10 MiB does,
// 1004 with field "message" and constraint "maxSize".
func TestPostTooLargeIs413(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxBody = 1024 })
	big := raw(t, request(t, "message/send", `{"message":{"messageId":"m","role":"user","parts":[{"text":"`+strings.Repeat("x", 2000)+`"}]}}`))
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked %v", chunked), func(t *testing.T) {
			var body io.Reader = bytes.NewReader(big)
			if chunked {
				body = io.MultiReader(body) // no length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, e.base+"/snap", body)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("status %d, want 413: %s", resp.StatusCode, b)
			}
			var got struct {
				Error struct {
					Code int
					Data struct {
						Status, Limit     int
						Field, Constraint string
					}
				}
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("body %s: %v", b, err)
			}
			g, d := got.Error, got.Error.Data
			if d.Status != 413 || g.Code != int(snap.CodeInvalidPayload) || d.Limit != 1024 || d.Field != "message" || d.Constraint != "maxSize" {
				t.Errorf("body %s, want status 413, code 1004, field message, constraint maxSize, limit 1024", b)
			}
			if resp.Header.Get("SNAP-Version") != "0.1" {
				t.Error("no SNAP-Version on an error")
			}
		})
	}
}

// verifyLoose returns the payload of a signed error response addressed to
// no one (the server could not tell who sent the message).
func verifyLoose(t *testing.T, b []byte) []byte {
	t.Helper()
	v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
	if err != nil || !v.Signed || v.From != addr(serverKey) {
		t.Fatalf("response %s: %v", b, err)
	}
	return v.Payload
}

// Responses and events posted to us are never answered: 202, no body.
func TestPostResponseGetsNoAnswer(t *testing.T) {
	e := start(t, nil, nil)
	m := request(t, "message/send", `{}`)
	m.Type = snap.TypeResponse
	m.Sign(clientKey)
	for _, accept := range []string{"", "text/event-stream"} {
		resp, b := post(t, e, raw(t, m), map[string]string{"Accept": accept})
		if resp.StatusCode != http.StatusAccepted || len(b) != 0 {
			t.Errorf("Accept %q: status %d body %q, want 202 and nothing", accept, resp.StatusCode, b)
		}
		m.ID = snap.NewID()
		m.Sign(clientKey)
	}
}

// Over its rate a peer gets 429 with Retry-After, and the server answers
// before reading the body: the request below announces a megabyte it never
// sends.
func TestRateLimit429BeforeBody(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.Rate = rate.Every(time.Hour); c.Burst = 1 })
	if resp, b := post(t, e, raw(t, request(t, "message/send", sendPayload)), nil); resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, b)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > 3600 {
		t.Errorf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	if !strings.Contains(string(b), `"code":5002`) || !strings.Contains(string(b), fmt.Sprintf(`"retryAfter":%d`, secs)) ||
		!strings.Contains(string(b), `"limit":1,`) || !strings.Contains(string(b), `"window":"1h"`) {
		t.Errorf("body %s", b)
	}
	// The client sees it as a StatusError with the delay.
	_, err = e.client.Send(context.Background(), e.base+"/snap", request(t, "message/send", sendPayload))
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != 429 || se.RetryAfter < time.Second ||
		se.Err == nil || se.Err.Code != snap.CodeRateLimitExceeded || se.Err.Data["retryAfter"] == nil {
		t.Errorf("client error %v", err)
	}
	// Monitoring has an allowance of its own.
	if resp, err := http.Get(e.base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("healthz under limit: %v %v", resp, err)
	}
}

// /healthz and /metrics are limited per peer apart from SNAP: past
// their burst they get 429 with Retry-After while /snap is still served;
// Monitor limits a handler on a listener of its own the same way.
func TestMonitorLimited(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") })
	e := start(t, nil, func(c *snaphttp.Config) {
		c.MonitorRate, c.MonitorBurst = rate.Every(time.Hour), 3
		c.Metrics = metrics
	})
	get := func(base, path string) *http.Response {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i, path := range []string{"/healthz", "/metrics", "/healthz"} {
		if resp := get(e.base, path); resp.StatusCode != 200 {
			t.Fatalf("request %d (%s) within the burst: %d", i+1, path, resp.StatusCode)
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		resp := get(e.base, path)
		if secs, _ := strconv.Atoi(resp.Header.Get("Retry-After")); resp.StatusCode != 429 || secs < 1 {
			t.Errorf("%s past the burst: %d, Retry-After %q; want 429 with a delay", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if resp, b := post(t, e, raw(t, request(t, "message/send", sendPayload)), nil); resp.StatusCode != 200 {
		t.Errorf("SNAP while monitoring is limited: %d %s", resp.StatusCode, b)
	}

	own := httptest.NewServer(snaphttp.Monitor(metrics, rate.Every(time.Hour), 1))
	defer own.Close()
	if resp := get(own.URL, "/metrics"); resp.StatusCode != 200 {
		t.Fatalf("Monitor, first request: %d", resp.StatusCode)
	}
	if resp := get(own.URL, "/metrics"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("Monitor past the burst: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// SetRate changes the allowance of a running server, for a peer already
// limited too: lifted, the next requests pass; set again, it limits.
func TestSetRate(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.Rate = rate.Every(time.Hour); c.Burst = 1 })
	send := func() int {
		resp, _ := post(t, e, raw(t, request(t, "message/send", sendPayload)), nil)
		return resp.StatusCode
	}
	if got := send(); got != 200 {
		t.Fatalf("first request: %d", got)
	}
	if got := send(); got != 429 {
		t.Fatalf("second request at a burst of 1: %d, want 429", got)
	}
	e.srv.SetRate(rate.Inf, 0)
	for i := range 3 {
		if got := send(); got != 200 {
			t.Fatalf("request %d with the limit lifted: %d", i+1, got)
		}
	}
	// Limited again, the peer's bucket is as the limit left it: empty.
	e.srv.SetRate(rate.Every(time.Hour), 2)
	if got := send(); got != 429 {
		t.Fatalf("request after the limit is set again: %d, want 429", got)
	}
}

var frameRE = regexp.MustCompile(`^data: [^\r\n]+\n\n`)

// readFrames splits an SSE body into its frames, requiring the exact
// framing SDK peers parse: "data: " + one line of JSON + "\n\n", nothing
// else, LF only.
func readFrames(t *testing.T, body []byte) [][]byte {
	t.Helper()
	var frames [][]byte
	for rest := body; len(rest) > 0; {
		loc := frameRE.FindIndex(rest)
		if loc == nil {
			t.Fatalf("not an SSE data frame at %q", rest[:min(len(rest), 80)])
		}
		frames = append(frames, rest[len("data: "):loc[1]-2])
		rest = rest[loc[1]:]
	}
	return frames
}

// message/stream over SSE: 200, text/event-stream, no-cache; each event a
// "data: <JSON>\n\n" frame that is byte for byte the message's JSON, then
// exactly one response, then the end of the body.
func TestSSEFraming(t *testing.T) {
	e := start(t, nil, nil)
	resp, body := post(t, e, raw(t, request(t, "message/stream", `{"steps":3}`)),
		map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "SNAP-Version": "0.1"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if bytes.Contains(body, []byte("\r")) {
		t.Error("CR in the stream")
	}
	frames := readFrames(t, body)
	if len(frames) != 4 {
		t.Fatalf("%d frames, want 3 events and the response:\n%s", len(frames), body)
	}
	var rebuilt []byte
	for i, f := range frames {
		v := verify(t, f)
		want := snap.TypeEvent
		if i == 3 {
			want = snap.TypeResponse
		}
		if v.Type != want || v.Method != "message/stream" {
			t.Errorf("frame %d: %s %s", i, v.Type, v.Method)
		}
		js, _ := v.Message.MarshalJSON()
		rebuilt = append(append(append(rebuilt, "data: "...), js...), "\n\n"...)
	}
	if !bytes.Equal(rebuilt, body) {
		t.Errorf("the body is not exactly the frames of its messages:\n%s\n%s", body, rebuilt)
	}
}

// A non-streaming method asked with SSE Accept gets one frame, its
// response; an SSE error is a final response with payload.error.
func TestSSESingleFrame(t *testing.T) {
	e := start(t, nil, nil)
	cases := []struct {
		name   string
		m      *snap.Message
		method string
		code   snap.Code
	}{
		{"message/send", request(t, "message/send", sendPayload), "message/send", 0},
		{"tasks/get error", request(t, "tasks/get", `{"taskId":"gone"}`), "tasks/get", snap.CodeTaskNotFound},
		{"unknown stream method", request(t, "tasks/nothing", `{}`), "tasks/nothing", snap.CodeMethodNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, e, raw(t, tc.m), map[string]string{"Accept": "application/json, text/event-stream;q=0.9"})
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			frames := readFrames(t, body)
			if len(frames) != 1 {
				t.Fatalf("%d frames: %s", len(frames), body)
			}
			v := verify(t, frames[0])
			if v.Type != snap.TypeResponse || v.Method != tc.method || errCode(v.Payload) != tc.code {
				t.Errorf("frame %s", frames[0])
			}
		})
	}
}

// A plain POST of a streaming method gets the final response alone.
func TestPlainPostOfStreamMethod(t *testing.T) {
	e := start(t, nil, nil)
	resp, body := post(t, e, raw(t, request(t, "message/stream", `{"steps":5}`)), nil)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if v := verify(t, body); v.Type != snap.TypeResponse || !strings.Contains(string(v.Payload), `"completed"`) {
		t.Errorf("response %s", body)
	}
}

func TestRoutes(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "snap_up 1\n") })
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console "+r.URL.Path) })
	withMetrics := start(t, nil, func(c *snaphttp.Config) { c.Metrics, c.Console = metrics, console })
	without := start(t, nil, func(c *snaphttp.Config) { c.Card = nil })
	cases := []struct {
		name, method, url string
		status            int
		body              string
	}{
		{"healthz", "GET", withMetrics.base + "/healthz", 200, `"status":"ok"`},
		{"healthz address", "GET", withMetrics.base + "/healthz", 200, addr(serverKey)},
		{"metrics mounted", "GET", withMetrics.base + "/metrics", 200, "snap_up 1"},
		{"no metrics", "GET", without.base + "/metrics", 404, "no metrics"},
		{"no card", "GET", without.base + snaphttp.WellKnownPath, 404, "no card"},
		{"console mounted", "GET", withMetrics.base + "/console", 200, "console /console"},
		{"console page", "POST", withMetrics.base + "/console/tasks/x/decide", 200, "console /console/tasks/x/decide"},
		{"no console", "GET", without.base + "/console/", 404, "not found"},
		{"unknown path", "GET", withMetrics.base + "/nothing", 404, "not found"},
		{"GET /snap without upgrade", "GET", withMetrics.base + "/snap", 426, "WebSocket"},
		{"PUT /snap", "PUT", withMetrics.base + "/snap", 405, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.body) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, b, tc.status, tc.body)
			}
		})
	}
}
