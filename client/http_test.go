package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// reply builds a message answering req, signed by k unless unsigned.
type reply struct {
	key      *identity.Key
	typ      snap.Type
	to       string // "" means req.From
	age      time.Duration
	unsigned bool
	method   string // "" means req.Method
	payload  string // "" means a task
}

func (r reply) build(t *testing.T, req *snap.Message) []byte {
	t.Helper()
	to := r.to
	if to == "" {
		to = req.From
	}
	k := r.key
	if k == nil {
		k = serverKey
	}
	typ := r.typ
	if typ == "" {
		typ = snap.TypeResponse
	}
	method := r.method
	if method == "" {
		method = req.Method
	}
	payload := r.payload
	if payload == "" {
		payload = `{"task":{"id":"t"}}`
	}
	m := &snap.Message{ID: snap.NewID(), Version: "0.1", From: addr(k), To: to, Type: typ, Method: method,
		Payload: []byte(payload), Timestamp: time.Now().Add(-r.age).Unix()}
	if !r.unsigned {
		if err := m.Sign(k); err != nil {
			t.Fatal(err)
		}
	}
	return raw(t, m)
}

// fake serves answers built from the request it receives: one that does
// not parse (a malformed method) is read for its from and method alone.
func fake(t *testing.T, answer func(w http.ResponseWriter, req *snap.Message)) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req, err := snap.Parse(b)
		if err != nil {
			var env struct{ From, Method string }
			if json.Unmarshal(b, &env) != nil || env.From == "" {
				t.Errorf("fake server: %v", err)
				return
			}
			req = &snap.Message{From: env.From, Method: env.Method}
		}
		answer(w, req)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// Send verifies the response as a requester must and refuses anything
// else.
func TestClientVerifiesResponses(t *testing.T) {
	cases := []struct {
		name   string
		method string // the request's; "" is tasks/get
		r      reply
		want   error
	}{
		{"valid", "", reply{}, nil},
		{"from another agent", "", reply{key: otherKey}, client.ErrInvalidResponse},
		{"to someone else", "", reply{to: addr(otherKey)}, client.ErrInvalidResponse},
		{"unsigned", "", reply{unsigned: true}, client.ErrInvalidResponse},
		{"an event", "", reply{typ: snap.TypeEvent}, client.ErrInvalidResponse},
		{"a request", "", reply{typ: snap.TypeRequest}, client.ErrInvalidResponse},
		{"stale", "", reply{age: time.Hour}, snap.CodeTimestampExpired},
		// The agent's answer to another of our requests (one an
		// intermediary held back, served to this one): a response
		// echoes its request's method.
		{"of another method", "", reply{method: "tasks/cancel"}, client.ErrInvalidResponse},
		{"an error of another method", "", reply{method: "tasks/cancel", payload: `{"error":{"code":1001,"message":"task not found"}}`}, client.ErrInvalidResponse},
		// A request of a malformed method cannot be echoed: its error
		// is of method snap/error. Only then, and only an error.
		{"the error of a malformed method", "no/such-method", reply{method: "snap/error", payload: `{"error":{"code":1004,"message":"invalid method"}}`}, nil},
		{"snap/error answering a well-formed method", "", reply{method: "snap/error", payload: `{"error":{"code":1004,"message":"invalid method"}}`}, client.ErrInvalidResponse},
		{"a result of snap/error to a malformed method", "no/such-method", reply{method: "snap/error"}, client.ErrInvalidResponse},
	}
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := fake(t, func(w http.ResponseWriter, req *snap.Message) { w.Write(tc.r.build(t, req)) })
			method := tc.method
			if method == "" {
				method = "tasks/get"
			}
			got, err := cl.Send(context.Background(), url, &snap.Message{To: addr(serverKey), Method: method, Payload: []byte(`{"taskId":"t"}`)})
			if tc.want == nil {
				if err != nil || got.From != addr(serverKey) || got.Type != snap.TypeResponse {
					t.Fatalf("%v %v", got, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// The same signed response served twice is a replay the second time.
func TestClientRefusesReplayedResponse(t *testing.T) {
	var first []byte
	url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		if first == nil {
			first = reply{}.build(t, req)
		}
		w.Write(first)
	})
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	req := func() *snap.Message {
		return &snap.Message{From: addr(clientKey), To: addr(serverKey), Method: "tasks/get", Payload: []byte(`{}`)}
	}
	if _, err := cl.Send(context.Background(), url, req()); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Send(context.Background(), url, req()); !errors.Is(err, snap.CodeDuplicateMessage) {
		t.Errorf("replayed response: %v", err)
	}
}

func TestClientHTTPStatuses(t *testing.T) {
	cases := []struct {
		status int
		want   error
	}{
		{http.StatusAccepted, client.ErrNoAnswer},
		{http.StatusNoContent, client.ErrNoAnswer},
		{http.StatusInternalServerError, &client.StatusError{}},
		{http.StatusBadRequest, &client.StatusError{}},
	}
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, `{"error":"Internal server error"}`)
			})
			_, err := cl.Send(context.Background(), url, request(t, "tasks/get", `{}`))
			var se *client.StatusError
			if _, ok := tc.want.(*client.StatusError); ok {
				if !errors.As(err, &se) || se.StatusCode != tc.status || !strings.Contains(se.Body, "Internal") {
					t.Errorf("error %v, want StatusError %d", err, tc.status)
				}
			} else if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// The SSE reader takes what servers send besides the exact SDK framing:
// CRLF, comments, other fields, a JSON message split over data lines; a
// plain JSON answer gives the response alone.
func TestClientStreamLenientFraming(t *testing.T) {
	var events []string
	url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		ev := string(reply{typ: snap.TypeEvent}.build(t, req))
		split := strings.Replace(string(reply{typ: snap.TypeEvent}.build(t, req)), `,"type"`, ",\ndata: \"type\"", 1)
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		fmt.Fprintf(w, ": hello\r\n\r\nevent: message\r\nid: 1\r\ndata:%s\r\n\r\n", ev)
		fmt.Fprintf(w, "data: %s\n\n", split)
		fmt.Fprintf(w, "retry: 10\n\ndata: %s\n\n", reply{}.build(t, req))
	})
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	final, err := cl.Stream(context.Background(), url, request(t, "message/stream", `{}`), func(m *snap.Message) error {
		events = append(events, string(m.Type))
		return nil
	})
	if err != nil || final.Type != snap.TypeResponse || strings.Join(events, ",") != "event,event" {
		t.Fatalf("final %v, events %v, err %v", final, events, err)
	}

	plain := fake(t, func(w http.ResponseWriter, req *snap.Message) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(reply{}.build(t, req))
	})
	if final, err := cl.Stream(context.Background(), plain, request(t, "message/stream", `{}`), nil); err != nil || final.Type != snap.TypeResponse {
		t.Errorf("plain JSON answer to a stream: %v %v", final, err)
	}
}

// A stream that ends without its response, goes quiet, carries a bad
// message, or whose callback fails ends with an error.
func TestClientStreamFailures(t *testing.T) {
	errStop := errors.New("stop")
	cases := []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request, req *snap.Message)
		fn     func(*snap.Message) error
		want   error
	}{
		{"ends early", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", reply{typ: snap.TypeEvent}.build(t, req))
		}, nil, client.ErrNoAnswer},
		{"goes quiet", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", reply{typ: snap.TypeEvent}.build(t, req))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, nil, client.ErrIdleTimeout},
		{"forged event", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", reply{typ: snap.TypeEvent, key: otherKey}.build(t, req))
		}, nil, client.ErrInvalidResponse},
		{"event of another method", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", reply{typ: snap.TypeEvent, method: "tasks/resubscribe"}.build(t, req))
		}, nil, client.ErrInvalidResponse},
		{"callback fails", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: %s\n\n", reply{typ: snap.TypeEvent}.build(t, req))
		}, func(*snap.Message) error { return errStop }, errStop},
		{"not an event stream", func(w http.ResponseWriter, r *http.Request, req *snap.Message) {
			w.Header().Set("Content-Type", "text/html")
		}, nil, client.ErrInvalidResponse},
	}
	// Only the stream that goes quiet waits out the short idle time: the
	// others' first event may come later than 100 ms on a loaded machine
	// (a reply is built and signed first), and must not be taken for it.
	quiet := client.NewHTTP(client.HTTPConfig{Key: clientKey, IdleTimeout: 100 * time.Millisecond})
	patient := client.NewHTTP(client.HTTPConfig{Key: clientKey, IdleTimeout: time.Minute})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl := patient
			if errors.Is(tc.want, client.ErrIdleTimeout) {
				cl = quiet
			}
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				req, _ := snap.Parse(b)
				tc.answer(w, r, req)
			}))
			defer ts.Close()
			fn := tc.fn
			if fn == nil {
				fn = func(*snap.Message) error { return nil }
			}
			_, err := cl.Stream(context.Background(), ts.URL, request(t, "message/stream", `{}`), fn)
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// Over WebSocket SendWS takes exactly one frame, which must be the
// response; a connection closed without an answer is ErrNoAnswer.
func TestClientWebSocket(t *testing.T) {
	cases := []struct {
		name string
		send func(t *testing.T, c *websocket.Conn, req *snap.Message)
		want error
	}{
		{"response", func(t *testing.T, c *websocket.Conn, req *snap.Message) {
			c.WriteMessage(websocket.TextMessage, reply{}.build(t, req))
		}, nil},
		{"event first", func(t *testing.T, c *websocket.Conn, req *snap.Message) {
			c.WriteMessage(websocket.TextMessage, reply{typ: snap.TypeEvent}.build(t, req))
		}, client.ErrInvalidResponse},
		{"closed", func(t *testing.T, c *websocket.Conn, req *snap.Message) {
			c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "bye"))
		}, client.ErrNoAnswer},
	}
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer c.Close()
				_, b, err := c.ReadMessage()
				if err != nil {
					return
				}
				req, _ := snap.Parse(b)
				tc.send(t, c, req)
				c.ReadMessage() // until the client closes
			}))
			defer ts.Close()
			got, err := cl.SendWS(context.Background(), ts.URL, request(t, "tasks/get", `{}`))
			if tc.want == nil {
				if err != nil || got.Type != snap.TypeResponse {
					t.Errorf("%v %v", got, err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
}

// A WebSocket agent's handshake is bounded: an agent that answers the
// upgrade with 101 and then headers without end is refused once the
// client has read its bound (gorilla reads the answer's headers with
// http.ReadResponse, which has none), and the client closes the
// connection instead of holding every header line it is sent until its
// time-out.
func TestClientWebSocketHandshakeIsBounded(t *testing.T) {
	url, served := testutil.EndlessUpgrade(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c := client.NewHTTP(client.HTTPConfig{})
	_, err := c.SendWS(ctx, url+"/snap", request(t, "tasks/get", `{"taskId":"t-1"}`))
	if err == nil {
		t.Fatal("an endless handshake was taken")
	}
	if ctx.Err() != nil {
		t.Fatalf("the client waited for its time-out (%v) instead of refusing the handshake", err)
	}
	if r := <-served; r.Err == nil {
		t.Fatalf("the client read all %d bytes of headers the agent sent; want it to stop at its bound (err %v)", r.Bytes, err)
	}
}

// A request goes only where it was sent: a redirect to another agent (or
// another port, or from https down to http) fails the exchange and the
// other end receives nothing; before, the client's default http.Client
// followed a 307 there with the signed request.
func TestClientFollowsNoRedirectElsewhere(t *testing.T) {
	var reached atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		http.Error(w, "not here", http.StatusNotFound)
	}))
	defer other.Close()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/snap", http.StatusTemporaryRedirect)
	}))
	defer agent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.NewHTTP(client.HTTPConfig{}).Send(ctx, agent.URL+"/snap", request(t, "tasks/get", `{"taskId":"t-1"}`))
	if err == nil || !strings.Contains(err.Error(), "redirected") {
		t.Fatalf("send: %v; want the redirect refused", err)
	}
	if n := reached.Load(); n != 0 {
		t.Fatalf("the other server got %d requests", n)
	}
}

// The move from http to https that is followed stays on the host's port:
// the default one (80 to 443) or the same; a redirect to another port of
// the same host, over https, fails the exchange and that port sees no
// connection. Before, the host's name alone was compared.
func TestClientFollowsNoRedirectToAnotherPort(t *testing.T) {
	var conns atomic.Int64
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not here", http.StatusNotFound)
	}))
	other.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	other.StartTLS()
	defer other.Close()
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/snap", http.StatusTemporaryRedirect)
	}))
	defer agent.Close()
	if !strings.HasPrefix(other.URL, "https://127.0.0.1:") || !strings.HasPrefix(agent.URL, "http://127.0.0.1:") {
		t.Fatalf("servers at %s and %s; want one host", agent.URL, other.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := client.NewHTTP(client.HTTPConfig{}).Send(ctx, agent.URL+"/snap", request(t, "tasks/get", `{"taskId":"t-1"}`))
	if err == nil || !strings.Contains(err.Error(), "redirected") {
		t.Fatalf("send: %v; want the redirect refused", err)
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("the other port got %d connections", n)
	}
}

// Retry-After is taken in both of its forms (RFC 9110, section 10.2.3):
// seconds, or an HTTP-date, read against the client's clock; a date
// already past asks for no wait.
func TestClientRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		header string
		want   time.Duration
	}{
		{"120", 2 * time.Minute},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(time.Hour).Format(time.RFC850), time.Hour}, // an obsolete form RFC 9110 still accepts
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"soon", 0},
		{"-5", 0},
		{"99999999999999999999", 0}, // does not parse as an int
		{"9223372036854775807", 1 << 30 * time.Second}, // would overflow a Duration
	}
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey, Now: func() time.Time { return now }})
	for _, tc := range cases {
		t.Run(tc.header, func(t *testing.T) {
			url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
				w.Header().Set("Retry-After", tc.header)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			_, err := cl.Send(t.Context(), url, request(t, "tasks/get", `{}`))
			se, ok := errors.AsType[*client.StatusError](err)
			if !ok {
				t.Fatalf("error %v, want a StatusError", err)
			}
			if se.RetryAfter != tc.want {
				t.Errorf("RetryAfter %v, want %v", se.RetryAfter, tc.want)
			}
		})
	}
}

// A refusal without a Retry-After header is read for the wait its error
// object gives (data.retryAfter, in seconds, as SNAP's error shape puts
// it); the header, when there is one, wins.
func TestClientRetryAfterFromErrorData(t *testing.T) {
	cases := []struct {
		name, header, body string
		want               time.Duration
	}{
		{"data only", "", `{"error":{"code":5002,"message":"slow down","data":{"status":429,"retryAfter":7}}}`, 7 * time.Second},
		{"header wins", "2", `{"error":{"code":5002,"message":"slow down","data":{"retryAfter":7}}}`, 2 * time.Second},
		{"no wait", "", `{"error":{"code":5002,"message":"slow down","data":{"retryAfter":-1}}}`, 0},
		{"not a number", "", `{"error":{"code":5002,"message":"slow down","data":{"retryAfter":"soon"}}}`, 0},
	}
	cl := client.NewHTTP(client.HTTPConfig{Key: clientKey})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := fake(t, func(w http.ResponseWriter, req *snap.Message) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, tc.body)
			})
			_, err := cl.Send(t.Context(), url, request(t, "tasks/get", `{}`))
			se, ok := errors.AsType[*client.StatusError](err)
			if !ok || se.Err == nil || se.Err.Code != snap.CodeRateLimitExceeded {
				t.Fatalf("error %v, want a StatusError carrying 5002", err)
			}
			if se.RetryAfter != tc.want {
				t.Errorf("RetryAfter %v, want %v", se.RetryAfter, tc.want)
			}
		})
	}
}
