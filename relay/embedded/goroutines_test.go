package embedded

import (
	"bytes"
	"runtime"
	"testing"
)

// No reader or writer of a client outlives Serve, nor Close: they run
// apart from net/http's goroutines, which http.Server.Shutdown does not
// wait for once hijacked.
func TestNoClientGoroutineOutlivesServe(t *testing.T) {
	r := startRelay(t, Config{})
	for range 3 {
		c := dial(t, r.url)
		c.send("REQ", "s", map[string]any{"kinds": []int{1}, "limit": 1})
		c.expect("EOSE")
	}
	dial(t, r.url) // one that never asked anything
	check := func(when string) {
		t.Helper()
		buf := make([]byte, 1<<20)
		stacks := buf[:runtime.Stack(buf, true)]
		for _, f := range []string{"embedded.(*wsTransport).readLoop(", "embedded.(*conn).writeLoop("} {
			if bytes.Contains(stacks, []byte(f)) {
				t.Errorf("%s outlives %s:\n%s", f, when, stacks)
			}
		}
	}
	r.stop()
	check("Serve")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	check("Close")
}
