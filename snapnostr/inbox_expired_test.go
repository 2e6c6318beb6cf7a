package snapnostr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
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

// expiringRequests returns the tasks/get requests, one per task id, that
// k sends agent through the relay at url (kind 4339 when persist, else
// 21339), unpublished, each tagged with the NIP-40 expiration exp.
func expiringRequests(t *testing.T, url string, k, agent *identity.Key, persist bool, exp time.Time, ids ...string) []nostr.Event {
	t.Helper()
	tr := &keeper{Pool: newPool(t, url)}
	c := client.NewNostr(client.NostrConfig{Key: k, Relays: tr, Logger: quiet()})
	target := client.Target{Address: agent.Address(identity.Mainnet), PubKey: agent.NostrPublicKey()}
	for _, id := range ids {
		rctx, cancel := context.WithCancel(t.Context())
		tr.kept = cancel
		_, err := c.Request(rctx, target, client.NostrRequest{Method: "tasks/get",
			Payload: fmt.Appendf(nil, `{"taskId":%q}`, id), Persist: persist})
		cancel()
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("request %s: %v, want it kept", id, err)
		}
	}
	evs := tr.evs
	for i := range evs {
		evs[i].Tags = append(evs[i].Tags, nostr.Tag{"expiration", strconv.FormatInt(exp.Unix(), 10)})
		if err := relay.SignEvent(k, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// lineWatch is a slog.Handler that passes on the records whose message
// holds match.
type lineWatch struct {
	match string
	ch    chan slog.Record
}

func (l lineWatch) Enabled(context.Context, slog.Level) bool { return true }
func (l lineWatch) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l lineWatch) WithGroup(string) slog.Handler            { return l }

func (l lineWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, l.match) {
		l.ch <- r
	}
	return nil
}

// watchExpired returns a logger whose lines about expired requests come
// on the channel returned.
func watchExpired() (*slog.Logger, <-chan slog.Record) {
	ch := make(chan slog.Record, 64)
	return slog.New(lineWatch{match: "expired", ch: ch}), ch
}

// awaitLines waits for n lines on ch; past 10 s it fails the test and
// returns.
func awaitLines(t *testing.T, ch <-chan slog.Record, n int) {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for i := range n {
		select {
		case <-ch:
		case <-timeout.C:
			t.Errorf("%d of %d lines about expired requests logged", i, n)
			return
		}
	}
}

// newestAt returns the newest created_at of evs.
func newestAt(evs ...[]nostr.Event) nostr.Timestamp {
	var at nostr.Timestamp
	for _, e := range evs {
		for _, ev := range e {
			at = max(at, ev.CreatedAt)
		}
	}
	return at
}

// A relay that does not drop expired events (here one whose clock trails
// an hour) may deliver a request whose NIP-40 expiration has passed; the
// inbox ignores it, stored or live, as NIP-40 asks of clients: it is not
// handled nor answered, it is counted and logged, and it holds back no
// relay's point. A request whose expiration is still ahead is answered.
// Before, the inbox handled every expired request it was given.
func TestInboxIgnoresExpiredRequests(t *testing.T) {
	url := startRelayWith(t, embedded.Config{Now: func() time.Time { return time.Now().Add(-time.Hour) }, CreatedAtUpperLimit: -1})
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	requester, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var counter taskCounter
	server := counter.server(agent, snap.Config{Replay: snap.NewMemoryReplayStore(0)})

	now := time.Now()
	expired := expiringRequests(t, url, requester, agent, true, now.Add(-time.Minute), "stored-expired")
	fresh := expiringRequests(t, url, requester, agent, true, now.Add(time.Hour), "stored-fresh")
	publishAll(t, url, append(expired, fresh...))

	logger, lines := watchExpired()
	cp := snapnostr.NewMemoryCheckpoint()
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: newPool(t, url), Handler: server,
		Checkpoint: cp, Logger: logger})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ctx) }()
	select {
	case <-inbox.Ready():
	case err := <-done:
		t.Fatalf("inbox: %v", err)
	}

	live := expiringRequests(t, url, requester, agent, false, now.Add(-time.Minute), "live-expired")
	publishAll(t, url, live)
	c := client.NewNostr(client.NostrConfig{Key: requester, Relays: newPool(t, url), Logger: quiet()})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := c.Request(rctx, client.Target{Address: agent.Address(identity.Mainnet), PubKey: agent.NostrPublicKey()},
		client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"live-fresh"}`)}); err != nil {
		t.Fatalf("a live request: %v", err)
	}
	awaitLines(t, lines, 2)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("inbox: %v", err)
	}

	counter.mu.Lock()
	handled := maps.Clone(counter.handled)
	counter.mu.Unlock()
	if want := map[string]int{"stored-fresh": 1, "live-fresh": 1}; !maps.Equal(handled, want) {
		t.Errorf("handled %v, want %v", handled, want)
	}
	if got := inbox.Expired(); got != 2 {
		t.Errorf("Expired() = %d, want 2", got)
	}
	points, err := cp.Relays(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if at := newestAt(expired, fresh, live); points[url] < at {
		t.Errorf("the relay's point is %d, behind the requests received (%d)", points[url], at)
	}
}

// Stored requests that expire, by the node's clock, while they wait for
// a worker (in the backlog, or in the queue) are dropped when their turn
// comes: not handled, counted and logged, finished for the relays'
// points. Before, a catch-up handled each of them however late.
func TestInboxDropsRequestsThatExpireWhileWaiting(t *testing.T) {
	const n = 6
	url := startRelay(t)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	requester, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// The first request handled holds the one worker until released.
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	counter := taskCounter{wait: func(ctx context.Context) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		close(entered)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	server := counter.server(agent, snap.Config{Replay: snap.NewMemoryReplayStore(0)})

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprint("t", i)
	}
	stored := expiringRequests(t, url, requester, agent, true, time.Now().Add(30*time.Second), ids...)
	publishAll(t, url, stored)

	// The node's clock, moved past the requests' expiration while they
	// wait.
	var ahead atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	logger, lines := watchExpired()
	cp := snapnostr.NewMemoryCheckpoint()
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: newPool(t, url), Handler: server,
		Checkpoint: cp, Logger: logger, Now: now, Workers: 1, Queue: 1})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ctx) }()
	for _, ch := range []<-chan struct{}{inbox.Ready(), entered} {
		select {
		case <-ch:
		case err := <-done:
			t.Fatalf("inbox: %v", err)
		}
	}
	ahead.Store(int64(time.Minute))
	close(release)
	awaitLines(t, lines, n-1)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("inbox: %v", err)
	}

	counter.mu.Lock()
	handled := len(counter.handled)
	counter.mu.Unlock()
	if handled != 1 {
		t.Errorf("%d requests handled, want the one handled before they expired", handled)
	}
	if got := inbox.Expired(); got != n-1 {
		t.Errorf("Expired() = %d, want %d", got, n-1)
	}
	points, err := cp.Relays(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if at := newestAt(stored); points[url] < at {
		t.Errorf("the relay's point is %d, behind the requests received (%d): the expired ones hold it back", points[url], at)
	}
}
