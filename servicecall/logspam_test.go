package servicecall_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

// notLogged is the count of lines r says were not logged before it.
func notLogged(r slog.Record) int64 { return testutil.AttrInt64(r, logcap.NotLoggedKey) }

// A caller decides how often a service fails or runs out of time: it
// calls it with the arguments it fails on, or while it is slow. Each such
// call was logged, one line each; they are logged logcap.PerMinute a
// minute, the next line counting those that were not.
func TestServiceFailuresLoggedBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 100
		caller := newKey(t)
		logs := &testutil.Records{}
		reg, err := servicecall.New(servicecall.Config{Allow: []string{caller.Address(identity.Mainnet)}, Logger: slog.New(logs)})
		if err != nil {
			t.Fatal(err)
		}
		reg.Handle("fails", func(context.Context, *servicecall.Call) (any, error) { return nil, errors.New("no") })
		reg.HandleTimeout("slow", time.Second, func(ctx context.Context, c *servicecall.Call) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		from, err := identity.ParseAddress(caller.Address(identity.Mainnet))
		if err != nil {
			t.Fatal(err)
		}
		call := func(name string) {
			v := &snap.Verified{Message: &snap.Message{From: from.String(), Payload: []byte(`{"name":"` + name + `"}`)}, Sender: from}
			if _, err := reg.Serve(context.Background(), v); err == nil {
				t.Errorf("%s: no error", name)
			}
		}
		var wg sync.WaitGroup
		for range n {
			call("fails")
			wg.Go(func() { call("slow") })
		}
		wg.Wait()
		for _, msg := range []string{"service failed", "service did not finish within its time-out"} {
			if got := logs.Logged(msg); len(got) != logcap.PerMinute {
				t.Errorf("%q: %d lines for %d calls, want %d", msg, len(got), n, logcap.PerMinute)
			}
		}
		time.Sleep(time.Minute) // the bubble's clock
		call("fails")
		got := logs.Logged("service failed")
		if n := notLogged(got[len(got)-1]); n != 100-logcap.PerMinute {
			t.Errorf("the next minute's line says %d not logged before it, want %d", n, 100-logcap.PerMinute)
		}
	})
}
