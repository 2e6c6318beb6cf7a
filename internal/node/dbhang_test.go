package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
)

// A PostgreSQL server that keeps the node's connections open and takes
// what it is sent but never answers (a hung server, a proxy holding
// connections: no keepalive nor TCP_USER_TIMEOUT finds it) does not hold
// the node's requests: each, over Nostr (more at once than the inbox has
// workers, stored kinds included) and over HTTP, is answered 5003 with
// retryAfter once the request time-out passes; the database back, the
// node answers again; and hung again, the node stops within its grace.
func TestHungPostgresRequestsAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out request time-outs")
	}
	dsn, proxy := testdb.ProxiedDSN(t, testdb.Postgres(t))
	const timeout = 2 * time.Second
	n, stop := startNode(t, func(c *config.Config) {
		c.Database = dsn
		c.HTTPListen = "127.0.0.1:0"
		c.RequestTimeout = config.Duration{Duration: timeout}
		c.BackgroundTimeout = config.Duration{Duration: timeout}
	})
	alice := newRequester(t, n.RelayURLs())
	id := taskOf(t, alice.call(t, n, "message/send", text("before"), false)).ID
	get := map[string]any{"taskId": id}
	body, _ := json.Marshal(get)
	web := newHTTPClient(t)

	proxy.SetMode(testdb.Hang)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 13)
	for i := range 12 { // the inbox has 8 workers
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := alice.client.Request(ctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
				client.NostrRequest{Method: "tasks/get", Payload: body, Persist: i%2 == 0})
			var p []byte
			if err == nil {
				p = resp.Payload
			}
			errs <- answered503(fmt.Sprintf("nostr request %d", i), p, err)
		})
	}
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := web.Send(ctx, n.HTTPURL()+"/snap", &snap.Message{To: n.Address(), Method: "tasks/get", Payload: body})
		var p []byte
		if resp != nil {
			p = resp.Payload
		}
		errs <- answered503("http request", p, err)
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	t.Logf("13 requests answered in %v with the database hung", time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}

	proxy.SetMode(testdb.Forward)
	if v := taskOf(t, alice.call(t, n, "tasks/get", get, false)); v.ID != id {
		t.Fatalf("the database back, tasks/get: %+v", v)
	}

	proxy.SetMode(testdb.Hang)
	// A request under way when the stop comes, and the background loops.
	go alice.client.Request(context.Background(), client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
		client.NostrRequest{Method: "tasks/get", Payload: body})
	time.Sleep(500 * time.Millisecond)
	stopped := make(chan struct{})
	start = time.Now()
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Logf("stopped in %v with the database hung", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("the node did not stop within 20 s with its database hung")
	}
}

// answered503 checks that a request was answered 5003 with retryAfter.
func answered503(what string, payload []byte, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var p struct {
		Error *snap.Error `json:"error"`
	}
	if err := json.Unmarshal(payload, &p); err != nil || p.Error == nil {
		return fmt.Errorf("%s: answered %s, want 5003", what, payload)
	}
	if p.Error.Code != snap.CodeServiceUnavailable || p.Error.Data["retryAfter"] == nil || !strings.Contains(p.Error.Message, "time-out") {
		return fmt.Errorf("%s: answered %d %q %v, want 5003 with retryAfter, naming the time-out", what, p.Error.Code, p.Error.Message, p.Error.Data)
	}
	return nil
}
