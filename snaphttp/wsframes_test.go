package snaphttp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/nettest"
)

// clientFrame is one client frame of opcode op (0 continues a message),
// final or not, masked with a mask that changes every byte.
func clientFrame(fin bool, op byte, p []byte) []byte {
	return nettest.ClientFrame(fin, op, [4]byte{0x5a, 0xa5, 0x3c, 0xc3}, p)
}

// A message larger than the WebSocket's 512-byte read buffer, in
// fragments of every size around it, reaching the server a few bytes at
// a time, a ping between two of them, is read whole and exactly: its signature verifies, and it is
// answered.
func TestWebSocketMessageAcrossReads(t *testing.T) {
	e := start(t, nil, nil)
	c, err := nettest.DialWebSocket(strings.TrimPrefix(e.base, "http://"), "/snap")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	payload := `{"message":{"messageId":"m-1","role":"user","parts":[{"text":"` + strings.Repeat("0123456789abcdef", 10<<10) + `"}]}}`
	msg := raw(t, request(t, "message/send", payload))
	var wire []byte
	op := byte(0x1)
	for i, n := range []int{1, 511, 512, 513, 125, 126, 4096, 65535, 65536} {
		wire = append(wire, clientFrame(false, op, msg[:n])...)
		msg, op = msg[n:], 0
		if i == 2 {
			// A ping between fragments is answered at once and cuts
			// nothing of the message.
			wire = append(wire, clientFrame(true, 0x9, []byte("between"))...)
		}
	}
	wire = append(wire, clientFrame(true, op, msg)...)
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	for len(wire) > 0 {
		n := min(7, len(wire))
		if len(wire) > 64<<10 {
			n = 4093 // fewer writes, still cut across every buffer
		}
		if _, err := c.Write(wire[:n]); err != nil {
			t.Fatal(err)
		}
		wire = wire[n:]
	}
	if op, p, err := nettest.ReadFrame(c); err != nil || op != 0xA || string(p) != "between" {
		t.Fatalf("pong: op %#x %q %v", op, p, err)
	}
	op, p, err := nettest.ReadFrame(c)
	if err != nil || op != 0x1 {
		t.Fatalf("answer: op %#x %v", op, err)
	}
	if v := verify(t, p); errCode(v.Payload) != 0 {
		t.Fatalf("answered with an error: %s", v.Payload)
	}
}
