package jsinterop

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// recorder is a testing.TB whose Skip and Fatal record the message and end
// the goroutine, as the real ones do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	runtime.Goexit()
}

func callUnavailable(t *testing.T) *recorder {
	r := &recorder{TB: t}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		unavailable(r, "jsinterop: node_modules is missing: %s", installHint)
	}()
	wg.Wait()
	return r
}

func TestUnavailableSkipsOutsideCI(t *testing.T) {
	t.Setenv("CI", "")
	r := callUnavailable(t)
	if r.failed != "" || !strings.Contains(r.skipped, "run npm ci in interop/js") {
		t.Errorf("skipped %q failed %q", r.skipped, r.failed)
	}
}

func TestUnavailableFailsInCI(t *testing.T) {
	t.Setenv("CI", "true")
	r := callUnavailable(t)
	if r.skipped != "" || !strings.Contains(r.failed, "run npm ci in interop/js") {
		t.Errorf("skipped %q failed %q", r.skipped, r.failed)
	}
}

func TestDir(t *testing.T) {
	dir := Dir(t)
	if filepath.Base(dir) != "js" || filepath.Base(filepath.Dir(dir)) != "interop" {
		t.Errorf("Dir = %s", dir)
	}
	for _, f := range []string{"package.json", "package-lock.json", "client.mjs", "relay.mjs", "snap.mjs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	ctx := context.Background()
	out, code := Run(t, ctx, "keys", "--secret", strings.Repeat("0a", 32))
	var k struct{ Address string }
	if code != ExitOK || json.Unmarshal(out, &k) != nil || k.Address != "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397" {
		t.Errorf("keys: exit %d, %s", code, out)
	}
	if _, code := Run(t, ctx, "no-such-command"); code != ExitUsage {
		t.Errorf("unknown command: exit %d, want %d", code, ExitUsage)
	}
	msg := `{"id":"x","version":"0.1","from":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397","type":"request","method":"a/b","payload":{},"timestamp":1}`
	if out, code := RunInput(t, ctx, []byte(msg), "verify", "--message", "-"); code != ExitFail || !strings.Contains(string(out), "sig: missing") {
		t.Errorf("verify unsigned request from stdin: exit %d, %s", code, out)
	}
}

// publishAndFind publishes ev (when it is not signed yet) over a bare
// WebSocket and reports whether a REQ by its id finds it. It avoids
// go-nostr's Relay, whose teardown is a data race in v0.38.2.
func publishAndFind(t *testing.T, url string, ev *nostr.Event) bool {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if ev.Sig == "" {
		if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteJSON([]any{"EVENT", ev}); err != nil {
			t.Fatal(err)
		}
		var ok []any
		if err := c.ReadJSON(&ok); err != nil || len(ok) < 3 || ok[0] != "OK" || ok[2] != true {
			t.Fatalf("publish: %v %v", ok, err)
		}
	}
	if err := c.WriteJSON([]any{"REQ", "q", map[string]any{"ids": []string{ev.ID}}}); err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		var msg []json.RawMessage
		if err := c.ReadJSON(&msg); err != nil {
			t.Fatalf("no EOSE: %v", err)
		}
		switch string(msg[0]) {
		case `"EVENT"`:
			found = true
		case `"EOSE"`:
			return found
		}
	}
}

// TestRelayRestart: a restarted relay listens on the same port and still
// serves the events stored before.
func TestRelayRestart(t *testing.T) {
	r := NewRelay(t)
	url := r.URL()
	ev := &nostr.Event{Kind: 4339, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"p", strings.Repeat("ab", 32)}}, Content: "kept"}
	if !publishAndFind(t, url, ev) {
		t.Fatal("stored event not found")
	}
	r.Stop()
	if r.Running() {
		t.Error("Running after Stop")
	}
	if c, _, err := websocket.DefaultDialer.Dial(url, nil); err == nil {
		c.Close()
		t.Error("connected to a stopped relay")
	}
	r.Restart()
	if r.URL() != url || !r.Running() {
		t.Errorf("after restart: %s (running %v), want %s", r.URL(), r.Running(), url)
	}
	if !publishAndFind(t, url, ev) {
		t.Error("the stored event did not survive the restart")
	}
	r.Restart() // restarting a running relay works too
	if !publishAndFind(t, url, ev) {
		t.Error("the stored event did not survive the second restart")
	}
}
