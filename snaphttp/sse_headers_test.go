package snaphttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// A stream whose handler takes long before its first event (a
// message/stream whose proposals run within the request) has its SSE
// headers written and flushed when it starts, so that a proxy in between
// does not take it for dead; the body is then the usual SSE stream:
// "data: <JSON>\n\n" frames, the events, then the response, then the end.
func TestSSEHeadersBeforeFirstEvent(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err := emit(map[string]any{"taskId": "t-h", "progress": 0.5, "message": "working"}); err != nil {
			return nil, err
		}
		return map[string]any{"task": map[string]any{"id": "t-h", "status": map[string]any{"state": "completed", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	e := start(t, h, nil)
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := raw(t, request(t, "message/stream", `{}`))
	fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(req), req)
	<-entered

	// The handler has emitted nothing yet; the headers must come anyway.
	// (The deadline only keeps a failure from hanging the test.)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	close(release)
	if err != nil {
		t.Fatalf("no response headers while the handler had emitted nothing: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" ||
		resp.Header.Get("Cache-Control") != "no-cache" || resp.Header.Get("SNAP-Version") != snap.ProtocolVersion {
		t.Fatalf("headers: %d %v", resp.StatusCode, resp.Header)
	}

	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("body: %v", err)
	}
	frames := strings.SplitAfter(string(body), "\n\n")
	if last := frames[len(frames)-1]; last != "" {
		t.Fatalf("the body does not end with a whole frame: %q", last)
	}
	frames = frames[:len(frames)-1]
	if len(frames) != 2 {
		t.Fatalf("%d frames, want the event then the response:\n%s", len(frames), body)
	}
	for i, want := range []snap.Type{snap.TypeEvent, snap.TypeResponse} {
		f := frames[i]
		if !strings.HasPrefix(f, "data: ") || strings.Count(f, "\n") != 2 {
			t.Fatalf("frame %d is not one data line: %q", i, f)
		}
		if v := verify(t, []byte(strings.TrimSuffix(strings.TrimPrefix(f, "data: "), "\n\n"))); v.Type != want {
			t.Errorf("frame %d is a %s, want %s", i, v.Type, want)
		}
	}
}
