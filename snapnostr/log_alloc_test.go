package snapnostr

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/snap"
)

// The debug line of every answer costs nothing when debug is off (its
// arguments were boxed for a call that logged nothing: 4 allocations per
// round trip), and is written when it is on.
func TestAnsweredLogFreeWhenDebugOff(t *testing.T) {
	req := &nostr.Event{ID: strings.Repeat("ab", 32)}
	resp := &snap.Message{Method: "message/send", Type: snap.TypeResponse, To: "npub1x"}
	ctx := context.Background()
	var buf bytes.Buffer
	in := &Inbox{cfg: InboxConfig{Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}}
	if n := testing.AllocsPerRun(100, func() { in.logAnswered(ctx, req, resp) }); n != 0 {
		t.Errorf("the debug line, debug off, made %v allocations", n)
	}
	if buf.Len() != 0 {
		t.Fatalf("logged with debug off: %s", buf.String())
	}
	in.cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	in.logAnswered(ctx, req, resp)
	if !strings.Contains(buf.String(), "inbox: answered") || !strings.Contains(buf.String(), req.ID) {
		t.Fatalf("debug on: logged %q", buf.String())
	}
}
