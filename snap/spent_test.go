package snap_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// A request whose id validation spent (a method that is not a claim
// method: service/call, whose services may act outside the database) and
// whose handler then fails with an error SNAP tells a requester to retry
// (5001, 5002, 5003, a plain error, the request time-out's 5003) is never
// answered so: its retry would be refused as a duplicate. On every
// transport it gets a 2006 saying that its id is spent, that the call may
// have acted and that a new request needs a new id; its retry gets 2006
// too, and the handler runs once. A refusal that is not retryable (1004)
// is answered as it is.
func TestValidationSpentThenFailedIsNotToldToRetry(t *testing.T) {
	fails := map[string]error{
		"5001":  snap.NewError(snap.CodeInternal, "the service failed", nil),
		"5002":  snap.NewError(snap.CodeRateLimitExceeded, "slow down", map[string]any{"retryAfter": 3}),
		"5003":  snap.NewError(snap.CodeServiceUnavailable, "busy", map[string]any{"retryAfter": 7}),
		"plain": errors.New("connection refused"),
	}
	deliveries := map[string][2]snap.Inbound{
		"http":       {{Transport: "http"}, {Transport: "http"}},
		"ws":         {{Transport: "ws"}, {Transport: "ws"}},
		"nostr":      {{Transport: "nostr", Via: "ev-1"}, {Transport: "nostr", Via: "ev-2"}},
		"nostr late": {{Transport: "nostr", Via: "ev-1", Late: true}, {Transport: "nostr", Via: "ev-2"}},
	}
	for fname, failed := range fails {
		for dname, d := range deliveries {
			t.Run(fname+"_"+strings.ReplaceAll(dname, " ", "_"), func(t *testing.T) {
				r := snap.NewRouter()
				calls := 0
				r.Handle(snap.MethodServiceCall, func(ctx context.Context, req *snap.Verified) (any, error) {
					if req.Claim != nil {
						t.Fatal("a claim for a method validation records")
					}
					calls++
					return nil, failed
				})
				s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
					Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: snap.NewMemoryReplayStore(0),
						ClaimMethods: []string{"message/send"}})})
				raw := request(t, "c-1", snap.MethodServiceCall, `{"name":"x"}`)
				for i, what := range []string{"the request", "its retry"} {
					in := d[i]
					in.Raw = raw
					p := shown(s.Respond(context.Background(), in))
					if !strings.Contains(p, `"code":2006`) {
						t.Fatalf("%s answered %s; want 2006, the id spent", what, p)
					}
					if i == 0 && (!strings.Contains(p, "may have acted") || !strings.Contains(p, "new id")) {
						t.Fatalf("%s answered %s; want a message saying the call may have acted and a new id is needed", what, p)
					}
				}
				if calls != 1 {
					t.Fatalf("%d calls; want 1", calls)
				}
			})
		}
	}

	// A refusal SNAP does not tell to retry is the handler's own answer.
	r := snap.NewRouter()
	r.Handle(snap.MethodServiceCall, func(context.Context, *snap.Verified) (any, error) {
		return nil, snap.FieldError("payload.arguments.n", "type", "integer", "x")
	})
	s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: snap.NewMemoryReplayStore(0)})})
	if p := shown(s.Respond(context.Background(), snap.Inbound{Raw: request(t, "c-2", snap.MethodServiceCall, `{"name":"x"}`)})); !strings.Contains(p, `"code":1004`) {
		t.Fatalf("a refusal answered %s; want its 1004", p)
	}

	// With no replay store validation spends nothing: a retryable failure
	// is answered as it is, and its retry is processed.
	r = snap.NewRouter()
	calls := 0
	r.Handle(snap.MethodServiceCall, func(context.Context, *snap.Verified) (any, error) {
		calls++
		return nil, snap.NewError(snap.CodeServiceUnavailable, "busy", nil)
	})
	s = snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0)})})
	raw := request(t, "c-3", snap.MethodServiceCall, `{"name":"x"}`)
	for _, what := range []string{"the request", "its retry"} {
		if p := shown(s.Respond(context.Background(), snap.Inbound{Raw: raw})); !strings.Contains(p, `"code":5003`) {
			t.Fatalf("no replay store: %s answered %s; want its 5003", what, p)
		}
	}
	if calls != 2 {
		t.Fatalf("no replay store: %d calls; want 2", calls)
	}
}

// A service/call that outlives the request time-out, validation having
// spent its id, is not answered 5003 telling the requester to send it
// again (its retry would be refused 2006): the handler of a method the
// Server is told bounds its own time (ServerConfig.SelfBounded) runs
// past RequestTimeout and answers. Another method is still cut at
// RequestTimeout, and so is a service/call not SelfBounded: answered
// 2006 naming the time-out.
func TestSelfBoundedOutlivesRequestTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := snap.NewRouter()
		r.Handle(snap.MethodServiceCall, func(ctx context.Context, req *snap.Verified) (any, error) {
			select {
			case <-ctx.Done():
				return nil, snap.NewError(snap.CodeServiceUnavailable, "cut", nil)
			case <-time.After(time.Minute):
				return map[string]any{"done": true}, nil
			}
		})
		r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
			RequestTimeout: 20 * time.Second, SelfBounded: []string{snap.MethodServiceCall},
			Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: snap.NewMemoryReplayStore(0),
				ClaimMethods: []string{"tasks/get"}})})
		start := time.Now()
		if p := shown(s.Respond(context.Background(), snap.Inbound{Raw: request(t, "c-1", snap.MethodServiceCall, `{"name":"x"}`)})); p != `{"done":true}` {
			t.Fatalf("a long service/call answered %s after %v; want its reply", p, time.Since(start))
		}
		if p := shown(s.Respond(context.Background(), snap.Inbound{Raw: request(t, "c-2", "tasks/get", `{}`)})); !strings.Contains(p, `"code":5003`) {
			t.Fatalf("a slow tasks/get answered %s; want the request time-out's 5003", p)
		}

		// Not SelfBounded, a service/call is cut at RequestTimeout, and
		// answered 2006 saying so: validation spent its id.
		s = snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
			RequestTimeout: 20 * time.Second,
			Validator:      snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: snap.NewMemoryReplayStore(0)})})
		raw := request(t, "c-3", snap.MethodServiceCall, `{"name":"x"}`)
		if p := shown(s.Respond(context.Background(), snap.Inbound{Raw: raw})); !strings.Contains(p, `"code":2006`) || !strings.Contains(p, "request time-out (20s)") {
			t.Fatalf("a service/call cut at the request time-out answered %s; want 2006 naming the time-out", p)
		}
	})
}
