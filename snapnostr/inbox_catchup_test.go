package snapnostr_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// keeper is a client's Transport that keeps the request events instead of
// publishing them (the node is down), so that they are stored on a relay
// all at once afterwards; the request then ends with its context.
type keeper struct {
	*relay.Pool
	mu   sync.Mutex
	evs  []nostr.Event
	kept func()
}

func (k *keeper) Publish(_ context.Context, ev nostr.Event) (relay.PublishResult, error) {
	k.mu.Lock()
	k.evs = append(k.evs, ev)
	k.mu.Unlock()
	k.kept()
	return relay.PublishResult{}, nil
}

// reqCounter counts the REQs a pool sends on a connection.
type reqCounter struct {
	relay.Conn
	reqs *atomic.Int64
}

func (c reqCounter) Req(id string, f nostr.Filter) error {
	c.reqs.Add(1)
	return c.Conn.Req(id, f)
}

// A node restarted after an outage during which more requests were stored
// on its relay than the relay returns for one REQ (the embedded relay's
// DefaultLimit, 500) processes every one of them, each once. Before the
// pool paged a relay's stored events back, the restarted inbox got the
// newest 500, and the relay's point moved past the rest, never processed.
// SNAPNODE_CATCHUP_REQUESTS sets how many (default 700).
func TestInboxProcessesAStoredBacklogLongerThanTheRelaysCap(t *testing.T) {
	n := 700
	if s := os.Getenv("SNAPNODE_CATCHUP_REQUESTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	url := startRelayWith(t, embedded.Config{})
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	var counter taskCounter
	server := counter.server(agent, snap.Config{Replay: snap.NewMemoryReplayStore(0), MaxDrift: 2 * time.Hour})
	mu, handled := &counter.mu, counter.handled

	// The node's point on its relay before the outage: an hour ago. The
	// requests of the outage come a second apart after it.
	now := time.Now()
	point := now.Add(-time.Hour).Truncate(time.Second)
	cp := snapnostr.NewMemoryCheckpoint()
	ctx := t.Context()
	if err := cp.Done(ctx, "before", nostr.Timestamp(point.Unix())); err != nil {
		t.Fatal(err)
	}
	if err := cp.Reached(ctx, map[string]nostr.Timestamp{url: nostr.Timestamp(point.Unix())}); err != nil {
		t.Fatal(err)
	}
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tr := &keeper{Pool: newPool(t, url)}
	var at atomic.Int64
	c := client.NewNostr(client.NostrConfig{Key: k, Relays: tr, Logger: quiet(),
		Now: func() time.Time { return time.Unix(at.Load(), 0) }})
	target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
	for i := range n {
		at.Store(point.Unix() + 1 + int64(i)*3600/int64(n+1))
		rctx, cancel := context.WithCancel(ctx)
		tr.kept = cancel
		_, err := c.Request(rctx, target, client.NostrRequest{Method: "tasks/get",
			Payload: fmt.Appendf(nil, `{"taskId":"t%d"}`, i), Persist: true})
		cancel()
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("request %d: %v, want it kept", i, err)
		}
	}
	publishAll(t, url, tr.evs)

	// The restart.
	var reqs atomic.Int64
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet(),
		Dial: func(ctx context.Context, u string) (relay.Conn, error) {
			c, err := relay.DialWebsocket(ctx, u)
			if err != nil {
				return nil, err
			}
			return reqCounter{Conn: c, reqs: &reqs}, nil
		}})
	pctx, stopPool := context.WithCancel(context.Background())
	pool.Start(pctx)
	defer func() { stopPool(); pool.Close() }()
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: pool, Handler: server,
		Checkpoint: cp, Logger: quiet(), Queue: 2 * n})
	ictx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	started := time.Now()
	go func() { done <- inbox.Run(ictx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("inbox: %v", err)
		}
	}()
	select {
	case <-inbox.Ready():
	case err := <-done:
		t.Fatalf("inbox: %v", err)
	}
	t.Logf("%d stored requests: Ready after %v, %d REQs", n, time.Since(started).Round(time.Millisecond), reqs.Load())
	count := func() (distinct, twice int) {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range handled {
			if c > 1 {
				twice++
			}
		}
		return len(handled), twice
	}
	// The requests must keep being processed: the test fails when none
	// is for 30 s (a stall), not when all take longer than some figure
	// (under -race on a loaded machine 700 take over 30 s).
	last, progress := 0, time.Now()
	for ; ; time.Sleep(10 * time.Millisecond) {
		got, _ := count()
		if got == n {
			break
		}
		if got > last {
			last, progress = got, time.Now()
		}
		if time.Since(progress) > 30*time.Second {
			t.Fatalf("%d of the %d stored requests processed after the restart, none for 30 s", got, n)
		}
	}
	t.Logf("all processed after %v", time.Since(started).Round(time.Millisecond))
	if _, twice := count(); twice > 0 {
		t.Fatalf("%d requests processed more than once", twice)
	}
}
