package admin_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
)

// serve serves srv until the test ends; the returned channel has Serve's
// error once the returned cancel was called.
func serve(t *testing.T, srv *admin.Server) (context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(cancel)
	return ctx, cancel, done
}

// response reads the one response of c.
func response(t *testing.T, c net.Conn) admin.Response {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	var resp admin.Response
	if err != nil || json.Unmarshal(line, &resp) != nil {
		t.Fatalf("response: %q %v", line, err)
	}
	return resp
}

// A client that connects and sends nothing does not hold the node's stop:
// the wait for its request ends with the socket, and it is told why.
// Before, Serve waited for it the whole I/O time-out (a minute), and the
// node's stop with it.
func TestAdminStopDoesNotWaitForAnIdleClient(t *testing.T) {
	path := admin.Path(private(t))
	srv, err := admin.Listen(path, &handler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel, done := serve(t, srv)
	idle, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	// Connections are accepted in turn: once this one is answered, the
	// idle one was accepted and waits for its request.
	if _, err := admin.Call(ctx, path, admin.Request{Op: "held"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve still waits for a client that sent nothing, 10 s after its context ended")
	}
	if resp := response(t, idle); !strings.Contains(resp.Error, "the node is stopping") {
		t.Errorf("the idle client was told %q", resp.Error)
	}
}

// The connections served at once are bounded: one past the bound is told
// the socket is busy, at once and in words, and nothing is carried out;
// once a connection ends, the next command is served. Before, every
// connection had a goroutine, a descriptor and up to MaxMessage of memory
// for a minute, however many a client opened.
func TestAdminConnectionsBounded(t *testing.T) {
	path := admin.Path(private(t))
	h := &handler{}
	srv, err := admin.Listen(path, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, _, _ := serve(t, srv)
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range admin.MaxConns {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	_, err = admin.Call(ctx, path, admin.Request{Op: "approve", Task: "t1"})
	if err == nil || !strings.Contains(err.Error(), "busy") || !strings.Contains(err.Error(), "nothing was carried out") {
		t.Fatalf("a command past the bound: %v; want it refused as busy", err)
	}
	if len(h.calls) != 0 {
		t.Fatalf("carried out: %q", h.calls)
	}
	idle[0].Close()
	// The slot frees once the server sees the close.
	for {
		_, err = admin.Call(ctx, path, admin.Request{Op: "held"})
		if err == nil || !strings.Contains(err.Error(), "busy") {
			break
		}
	}
	if err != nil {
		t.Fatalf("a command once a connection ended: %v", err)
	}
}

// A request with a member the socket does not know is refused naming it,
// and nothing is carried out: a hand-written client's approval with its
// diff's sum under another name ("diff_sha256") was carried out without
// the check of the diff it asked for.
func TestAdminUnknownMemberRefused(t *testing.T) {
	path := admin.Path(private(t))
	h := &handler{}
	srv, err := admin.Listen(path, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, srv)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(`{"op":"approve","task":"t1","diff_sha256":"` + strings.Repeat("a", 64) + `"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if resp := response(t, c); !strings.Contains(resp.Error, `"diff_sha256"`) {
		t.Errorf("a request with an unknown member was answered %+v; want it refused naming the member", resp)
	}
	if len(h.calls) != 0 {
		t.Errorf("carried out: %q", h.calls)
	}
}
