package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/node"
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

// With PostgreSQL hung behind the proxy, no periodic loop of the node
// waits on it past background_timeout: each pass is abandoned at its
// bound (a goroutine profile taken while hung shows no pass past its
// deadline, and no loop's pass without one), and once the database is
// back every loop makes progress again.
func TestHungPostgresLoopsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out background time-outs")
	}
	dsn, proxy := testdb.ProxiedDSN(t, testdb.Postgres(t))
	const bound = time.Second
	srv := llmtest.New(t)
	n, stop := startNodeOpts(t, func(c *config.Config) {
		c.Database = dsn
		c.RequestTimeout = config.Duration{Duration: bound}
		c.BackgroundTimeout = config.Duration{Duration: bound}
		c.Agent.LLMURL = srv.URL()
		c.Agent.LLMModel = llmtest.DefaultModel
	}, node.WithLoopInterval(100*time.Millisecond))
	// The loops that read or write the database at every pass.
	loops := []string{"live tasks recount", "replay sweep", "task retention", "audit seal",
		"forgetting of ended actions", "reconcile", "agent queue recount", "agent dispatch", "agent reconcile", "agent forget"}
	waitLoops := func(what string, loops []string, ok func(was, now node.LoopCount) bool) map[string]node.LoopCount {
		t.Helper()
		was := n.LoopPasses()
		deadline := time.Now().Add(20 * time.Second)
		for {
			now := n.LoopPasses()
			var late []string
			for _, l := range loops {
				if !ok(was[l], now[l]) {
					late = append(late, fmt.Sprintf("%s %+v", l, now[l]))
				}
			}
			if len(late) == 0 {
				return now
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: after 20 s, not yet: %s", what, strings.Join(late, "; "))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitLoops("before the hang, a pass of each loop", loops, func(_, now node.LoopCount) bool { return now.OK > 0 })

	proxy.SetMode(testdb.Hang)
	// The agent's reconcile comes every 30 of its looks for jobs,
	// which the hang slows to one a bound: not awaited here.
	waitLoops("with the database hung, a pass of each loop abandoned", slices.DeleteFunc(slices.Clone(loops), func(l string) bool { return l == "agent reconcile" }), func(was, now node.LoopCount) bool { return now.Abandoned > was.Abandoned })
	// Every loop went at least once through a pass the hang held: no
	// goroutine is in a pass past its deadline (with a margin for the
	// connection's close), nor in a pass without one.
	var prof strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&prof, 1); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	inPass := 0
	for rec := range strings.SplitSeq(prof.String(), "\n\n") {
		_, labels, ok := strings.Cut(rec, "# labels: ")
		if !ok {
			continue
		}
		labels, _, _ = strings.Cut(labels, "\n")
		var l map[string]string
		// The goroutines running a pass: those it started (pgx's close
		// of the connection it abandoned) carry its labels too.
		if err := json.Unmarshal([]byte(labels), &l); err != nil || l["loop"] == "" || !strings.Contains(rec, "internal/periodic.Pass") {
			continue
		}
		inPass++
		d, err := time.Parse(time.RFC3339Nano, l["pass_deadline"])
		if err != nil {
			t.Errorf("a pass of %q without a deadline:\n%s", l["loop"], rec)
		} else if taken.After(d.Add(time.Second)) {
			t.Errorf("a pass of %q still running %v past its deadline:\n%s", l["loop"], taken.Sub(d).Round(time.Millisecond), rec)
		}
	}
	t.Logf("with the database hung: %d goroutine groups in a pass, none past its deadline", inPass)

	proxy.SetMode(testdb.Forward)
	waitLoops("the database back, a pass of each loop that succeeded", loops, func(was, now node.LoopCount) bool { return now.OK > was.OK })
	stop()
}
