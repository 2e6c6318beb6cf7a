package snaphttp_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// A message of exactly MaxBody bytes is handled as any other; one byte
// more gets the signed 1004 naming the limit, then close 1009.
func TestWebSocketMessageAtTheLimit(t *testing.T) {
	const limit = 16 << 10
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxBody = limit })
	body := raw(t, request(t, "message/send", sendPayload))
	for _, tc := range []struct {
		name    string
		size    int
		refused bool
	}{
		{"MaxBody", limit, false},
		{"MaxBody+1", limit + 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// JSON may end in white space: the request padded to size.
			msg := append(bytes.Clone(body), bytes.Repeat([]byte(" "), tc.size-len(body))...)
			c := dial(t, e)
			if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
				t.Fatal(err)
			}
			b := readFrame(t, c)
			v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
			if err != nil || !v.Signed || v.Type != snap.TypeResponse {
				t.Fatalf("answer: %s (%v), want a signed response", b, err)
			}
			se := snap.ResponseError(v.Payload)
			switch {
			case !tc.refused && se != nil:
				t.Fatalf("a message of MaxBody bytes: %s, want it handled", v.Payload)
			case tc.refused && (se == nil || se.Code != snap.CodeInvalidPayload || se.Data["limit"] != float64(limit)):
				t.Fatalf("a message of MaxBody+1 bytes: %s, want 1004 with limit %d", v.Payload, limit)
			}
			if !tc.refused {
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
				t.Fatalf("after the refusal: %v, want close 1009", err)
			}
		})
	}
}

// A message over MaxBody that is the peer's last, followed by its close
// (and nothing more written), still gets the 1004 and the close 1009.
func TestWebSocketOversizedMessageThenClose(t *testing.T) {
	const limit = 16 << 10
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxBody = limit })
	c := dial(t, e)
	if err := c.WriteMessage(websocket.TextMessage, bytes.Repeat([]byte("x"), limit+100)); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")); err != nil {
		t.Fatal(err)
	}
	b := readFrame(t, c)
	v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	if se := snap.ResponseError(v.Payload); se == nil || se.Code != snap.CodeInvalidPayload {
		t.Fatalf("answer: %s, want 1004", v.Payload)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("after the refusal: %v, want close 1009", err)
	}
}
