package nettest

import (
	"net"
	"testing"
)

// serverFrame is one unmasked server frame of opcode op (payload < 126
// bytes).
func serverFrame(op byte, p []byte) []byte {
	return append([]byte{0x80 | op, byte(len(p))}, p...)
}

// A server's ping that comes before the answer is answered with a pong
// carrying its payload, and the answer is what ReadAnswer returns.
func TestReadAnswerSkipsPings(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	served := make(chan error, 1)
	go func() {
		defer server.Close()
		if _, err := server.Write(serverFrame(0x9, []byte("k"))); err != nil {
			served <- err
			return
		}
		// The pong: masked with the zero mask, so its payload is as is.
		pong := make([]byte, 2+4+1)
		if _, err := server.Read(pong); err != nil {
			served <- err
			return
		}
		if pong[0] != 0x8A || pong[1] != 0x81 || pong[6] != 'k' {
			t.Errorf("answer to the ping: % x, want a pong of \"k\"", pong)
		}
		_, err := server.Write(serverFrame(0xA, []byte("hi")))
		served <- err
	}()
	op, p, err := ReadAnswer(client)
	if err != nil || op != 0xA || string(p) != "hi" {
		t.Fatalf("got op %#x %q %v, want the pong \"hi\"", op, p, err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
