package servicecall_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

// Each service is bounded by its own time-out: the one it was registered
// with (HandleTimeout), else the Registry's (Config.Timeout). A call
// still running when it passes has its context ended and is answered
// 5003 naming the service and its time-out in seconds (the server then
// answers 2006, the id spent: see snap.Server), whatever the handler
// returned for it; a SNAP error of the handler's own stands.
func TestServiceTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caller := newKey(t)
		reg, err := servicecall.New(servicecall.Config{Allow: []string{caller.Address(identity.Mainnet)},
			Logger: slog.New(slog.DiscardHandler), Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wait := func(ctx context.Context, c *servicecall.Call) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		reg.Handle("slow", wait)
		reg.HandleTimeout("long", 10*time.Minute, wait)
		reg.HandleTimeout("refuses", time.Second, func(ctx context.Context, c *servicecall.Call) (any, error) {
			<-ctx.Done()
			return nil, snap.NewError(snap.CodeInvalidPayload, "no", nil)
		})
		reg.HandleTimeout("deadline", 10*time.Minute, func(ctx context.Context, c *servicecall.Call) (any, error) {
			d, ok := ctx.Deadline()
			return map[string]any{"left": time.Until(d).String(), "ok": ok}, nil
		})
		call := func(name string) (any, error, time.Duration) {
			start := time.Now()
			from, err := identity.ParseAddress(caller.Address(identity.Mainnet))
			if err != nil {
				t.Fatal(err)
			}
			v := &snap.Verified{Message: &snap.Message{From: from.String(), Payload: []byte(`{"name":"` + name + `"}`)}, Sender: from}
			reply, err := reg.Serve(context.Background(), v)
			return reply, err, time.Since(start)
		}
		for _, tc := range []struct {
			name string
			took time.Duration
		}{{"slow", time.Minute}, {"long", 10 * time.Minute}} {
			_, err, took := call(tc.name)
			se, _ := err.(*snap.Error)
			if se == nil || se.Code != snap.CodeServiceUnavailable || se.Data["service"] != tc.name || se.Data["timeout"] != tc.took.Seconds() || took != tc.took {
				t.Errorf("%s: %v (data %v) after %v; want 5003 naming it and its time-out after %v", tc.name, err, se, took, tc.took)
			}
		}
		if _, err, _ := call("refuses"); snap.CodeOf(err) != snap.CodeInvalidPayload {
			t.Errorf("refuses: %v; want its own 1004", err)
		}
		if reply, err, _ := call("deadline"); err != nil || fmt.Sprintf("%s", reply) != `{"left":"10m0s","ok":true}` {
			t.Errorf("deadline: %s, %v; want 10 minutes left", reply, err)
		}
	})
}
