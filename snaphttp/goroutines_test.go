package snaphttp_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/gorilla/websocket"
)

// No goroutine of a WebSocket outlives Serve: once it returns, the
// connections it closed for shutdown have no reader, writer or server
// loop left (they run apart from net/http's goroutines, which
// http.Server.Shutdown does not wait for once hijacked).
func TestNoWebSocketGoroutineOutlivesServe(t *testing.T) {
	e := start(t, nil, nil)
	for range 3 {
		c := dial(t, e)
		if err := c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
			t.Fatal(err)
		}
		readFrame(t, c)
	}
	dial(t, e) // one that never asked anything
	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	stacks := buf[:runtime.Stack(buf, true)]
	for _, f := range []string{"snaphttp.(*wsConn).serve(", "snaphttp.(*wsConn).read(", "snaphttp.(*wsConn).write("} {
		if bytes.Contains(stacks, []byte(f)) {
			t.Errorf("%s outlives Serve:\n%s", f, stacks)
		}
	}
}
