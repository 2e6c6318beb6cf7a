package snap_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// allowN is a Limiter that allows the first n requests of each key.
type allowN struct {
	mu   sync.Mutex
	n    int
	seen map[string]int
	keys []string
}

func (a *allowN) Allow(key string) (bool, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = append(a.keys, key)
	a.seen[key]++
	return a.seen[key] <= a.n, 1500 * time.Millisecond
}

// observed records what the Server tells its Observer.
type observed struct {
	mu  sync.Mutex
	obs []observation
}

type observation struct {
	method         string
	code           int
	verify, handle time.Duration
}

func (o *observed) Observe(method string, code int, verify, handle time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs = append(o.obs, observation{method, code, verify, handle})
}

func limitedServer(t *testing.T, lim snap.Limiter, obs snap.Observer) (*snap.Server, *snap.Validator) {
	t.Helper()
	r := snap.NewRouter()
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "t-" + req.ID}}, nil
	})
	s := snap.NewServer(snap.ServerConfig{
		Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Observer: obs,
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0),
			Replay: snap.NewMemoryReplayStore(0), Limiter: lim}),
	})
	return s, snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
}

// The limit applies to authenticated senders only, after the signature,
// and a refused request keeps its id: sent again later it is served.
func TestServerRateLimit(t *testing.T) {
	lim := &allowN{n: 2, seen: map[string]int{}}
	s, client := limitedServer(t, lim, nil)
	ctx := context.Background()
	send := func(raw []byte) map[string]any {
		return check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw}), "message/send")
	}
	for _, id := range []string{"r1", "r2"} {
		if code, _ := errorCode(send(request(t, id, "message/send", sendText))); code != 0 {
			t.Fatalf("request %s refused: %d", id, code)
		}
	}
	// A forgery in A's name: refused for its signature, and it does not
	// reach the limiter.
	forged := request(t, "f1", "message/send", sendText)
	forged = []byte(string(forged[:len(forged)-10]) + "00000000\"}")
	if code, _ := errorCode(send(forged)); code != int(snap.CodeSignatureInvalid) {
		t.Fatalf("forgery: %d", code)
	}
	if len(lim.keys) != 2 {
		t.Fatalf("the limiter was asked %d times, want 2 (not for the forgery)", len(lim.keys))
	}
	third := request(t, "r3", "message/send", sendText)
	code, data := errorCode(send(third))
	if code != int(snap.CodeRateLimitExceeded) || data["retryAfter"] != float64(2) || data["scope"] != "identity" {
		t.Fatalf("over the limit: %d %v", code, data)
	}
	if lim.keys[2] != keyA.Address(identity.Mainnet) {
		t.Fatalf("limited by %q, want from", lim.keys[2])
	}
	// Allowed again, the very same message is served, not a duplicate.
	lim.mu.Lock()
	lim.n = 10
	lim.mu.Unlock()
	if code, _ := errorCode(send(third)); code != 0 {
		t.Fatalf("the refused message sent again: %d, want served", code)
	}
}

func TestServerObserver(t *testing.T) {
	obs := &observed{}
	s, _ := limitedServer(t, nil, obs)
	ctx := context.Background()
	s.Respond(ctx, snap.Inbound{Raw: request(t, "o1", "message/send", sendText)})
	s.Respond(ctx, snap.Inbound{Raw: request(t, "o1", "message/send", sendText)}) // a duplicate: deduplicated result
	s.Respond(ctx, snap.Inbound{Raw: request(t, "o2", "no/such", `{}`)})
	s.Respond(ctx, snap.Inbound{Raw: []byte(`{"garbage"`)})
	want := []struct {
		method  string
		code    int
		handled bool
	}{
		{"message/send", 0, true},
		{"message/send", 0, false},
		{"no/such", int(snap.CodeMethodNotFound), true},
		{"snap/error", int(snap.CodeInvalidMessage), false},
	}
	if len(obs.obs) != len(want) {
		t.Fatalf("observations: %+v", obs.obs)
	}
	for i, w := range want {
		o := obs.obs[i]
		if o.method != w.method || o.code != w.code || (o.handle > 0) != w.handled || o.verify <= 0 {
			t.Errorf("observation %d: %+v, want %+v", i, o, w)
		}
	}
}

// sendText is a message/send payload.
const sendText = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`
