package snapnostr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// A node that starts with more stored requests on its relay than its
// queue holds, all within the SNAP window, processes every one of them,
// each once: the stored requests wait for room in the queue. Before, the
// relay's reader refused every one past the queue's room at once with
// 5003 "busy", as it refuses live traffic, although they were requests
// the node could process in turn.
func TestInboxProcessesMoreStoredRequestsThanItsQueueHolds(t *testing.T) {
	const n, queue = 400, 16
	url := startRelay(t)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	// The handler holds the workers until every stored request has been
	// delivered (Ready), so that the queue is full meanwhile.
	all := make(chan struct{}) // closed once n distinct requests are handled
	var inbox *snapnostr.Inbox
	counter := taskCounter{
		wait: func(ctx context.Context) error {
			select {
			case <-inbox.Ready():
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	}
	counter.counted = func(id string) {
		if counter.handled[id] == 1 && len(counter.handled) == n {
			close(all)
		}
	}
	server := counter.server(agent, snap.Config{Replay: snap.NewMemoryReplayStore(0)})
	mu, handled := &counter.mu, counter.handled

	// The requests, stored while the node is down, dated now.
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	tr := &keeper{Pool: newPool(t, url)}
	c := client.NewNostr(client.NostrConfig{Key: k, Relays: tr, Logger: quiet()})
	target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
	for i := range n {
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

	// The start, with a queue of 16 and four workers.
	inbox = snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: newPool(t, url), Handler: server,
		Logger: quiet(), Workers: 4, Queue: queue})
	ictx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ictx) }()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	select {
	case <-all:
	case <-timeout.C:
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("inbox: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, c := range handled {
		if c > 1 {
			twice++
		}
	}
	if len(handled) != n || twice > 0 {
		t.Fatalf("%d of the %d stored requests processed (%d more than once), with a queue of %d", len(handled), n, twice, queue)
	}
}
