package nettest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// Footprint is what the process holds, as the Go runtime and the kernel
// count it.
type Footprint struct {
	// Live is the heap's live objects (runtime.MemStats.HeapAlloc after
	// the collections), what a connection keeps whatever the number of
	// Ps; Heap counts the spans holding them, whose free slots grow with
	// GOMAXPROCS (each P fills spans of its own), with the machine.
	Live       uint64
	Heap       uint64 // runtime.MemStats.HeapInuse
	Stack      uint64 // runtime.MemStats.StackInuse
	Sys        uint64 // runtime.MemStats.Sys: all the runtime took from the OS
	Goroutines int
	RSS        uint64 // resident set size (Linux; 0 elsewhere)
}

// Measure collects the garbage (a few times: each collection may halve
// the stacks of goroutines using little of theirs), returns freed memory
// to the OS, and reads the footprint.
func Measure() Footprint {
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return Footprint{Live: m.HeapAlloc, Heap: m.HeapInuse, Stack: m.StackInuse, Sys: m.Sys,
		Goroutines: runtime.NumGoroutine(), RSS: rss()}
}

// PerConn is the footprint grown from before to after, divided among n
// connections.
type PerConn struct {
	Live, Heap, Stack, Sys, RSS float64 // bytes
	Goroutines                  float64
}

// Per returns (after - before) / n.
func Per(before, after Footprint, n int) PerConn {
	d := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
	return PerConn{Live: d(after.Live, before.Live), Heap: d(after.Heap, before.Heap), Stack: d(after.Stack, before.Stack),
		Sys: d(after.Sys, before.Sys), RSS: d(after.RSS, before.RSS),
		Goroutines: float64(after.Goroutines-before.Goroutines) / float64(n)}
}

func (p PerConn) String() string {
	return fmt.Sprintf("live heap %.0f B, heap %.0f B, stacks %.0f B (heap+stacks %.1f KiB), goroutines %.2f, runtime Sys %.1f KiB, RSS %.1f KiB per connection",
		p.Live, p.Heap, p.Stack, (p.Heap+p.Stack)/1024, p.Goroutines, p.Sys/1024, p.RSS/1024)
}

// rss reads the resident set size from /proc/self/statm.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, resident uint64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}

// DialWebSocket opens a WebSocket to addr (host:port) at path by hand,
// holding nothing but the socket on the client's side (no buffers, no
// goroutine), so that what n of them cost the process is the server's.
// It returns once the server answered a ping: it is past the upgrade and
// reading.
func DialWebSocket(addr, path string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	var head []byte
	buf := make([]byte, 512)
	for !bytes.Contains(head, []byte("\r\n\r\n")) {
		n, err := c.Read(buf)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("read the upgrade: %w", err)
		}
		head = append(head, buf[:n]...)
	}
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 101 ")) {
		c.Close()
		return nil, fmt.Errorf("upgrade refused: %q", head)
	}
	if err := WriteFrame(c, 0x9, []byte("hi")); err != nil {
		c.Close()
		return nil, err
	}
	op, p, err := ReadAnswer(c)
	if err != nil || op != 0xA || string(p) != "hi" {
		c.Close()
		return nil, fmt.Errorf("no pong: op %#x %q %v", op, p, err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// DialIdle opens n WebSockets to addr at path with DialWebSocket, failing
// t if one cannot be opened, and closes them when t ends.
func DialIdle(t testing.TB, addr, path string, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := DialWebSocket(addr, path)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	return conns
}

// WriteFrame writes one final client frame (masked, with a zero mask) of
// opcode op.
func WriteFrame(c net.Conn, op byte, p []byte) error {
	_, err := c.Write(ClientFrame(true, op, [4]byte{}, p))
	return err
}

// ClientFrame is one client frame of opcode op (0 continues a message),
// final or not, its payload p masked with mask.
func ClientFrame(fin bool, op byte, mask [4]byte, p []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	h := []byte{b0}
	switch n := len(p); {
	case n < 126:
		h = append(h, 0x80|byte(n))
	case n < 1<<16:
		h = append(h, 0x80|126)
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h = append(h, 0x80|127)
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	h = append(h, mask[:]...)
	for i, c := range p {
		h = append(h, c^mask[i%4])
	}
	return h
}

// ReadAnswer reads the server's next frame that is not a ping, answering
// each ping it reads first with a pong (as a client must, or be cut off):
// a server pings its idle clients on its own schedule, so on a loaded
// machine, or in a test that runs long, a ping may come before the answer
// a test waits for.
func ReadAnswer(c net.Conn) (byte, []byte, error) {
	for {
		op, p, err := ReadFrame(c)
		if err != nil || op != 0x9 {
			return op, p, err
		}
		if err := WriteFrame(c, 0xA, p); err != nil {
			return 0, nil, fmt.Errorf("answer a ping: %w", err)
		}
	}
}

// ReadFrame reads one unmasked server frame: its opcode and payload.
func ReadFrame(c net.Conn) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return 0, nil, err
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<24 {
		return 0, nil, errors.New("frame too large")
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(c, p); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, p, nil
}
