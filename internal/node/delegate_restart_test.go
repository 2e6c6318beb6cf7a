package node_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A node delegating to another real node over HTTP is stopped after the
// first step's message/send reached the delegate, which made a task, and
// before the answer came back (a proxy in front of the delegate keeps it).
// Restarted on the same database, the node resumes the job and sends the
// step again with the idempotency key and message id recorded in the
// job's row before the first send: the delegate answers with the task it
// made, and holds exactly one task of the node. Before, the key lived in
// memory only, and the restarted node's step made a second task.
func TestDelegateStepSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(tc.name, func(t *testing.T) {
			// The delegate's endpoint, as its card says: a proxy that
			// hands the first POST to the delegate and keeps its answer
			// until the asking node goes.
			var (
				target atomic.Pointer[url.URL]
				posts  atomic.Int64
			)
			reached := make(chan struct{})
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				rp := httputil.NewSingleHostReverseProxy(target.Load())
				if r.Method == http.MethodPost && posts.Add(1) == 1 {
					rp.ServeHTTP(httptest.NewRecorder(), r)
					close(reached)
					<-r.Context().Done() // the node stopped: its answer is lost
					return
				}
				rp.ServeHTTP(w, r)
			}))
			t.Cleanup(proxy.Close)

			// The delegate: a real node, without an agent (its tasks fail
			// at once), reached at the proxy.
			remote, stopRemote := startNode(t, func(c *config.Config) {
				c.Database = testdb.SQLite(t)
				c.HTTPListen = "127.0.0.1:0"
				c.HTTPPublicURL = proxy.URL
			})
			u, err := url.Parse(remote.HTTPURL())
			if err != nil {
				t.Fatal(err)
			}
			target.Store(u)

			cfg := config.Default()
			cfg.DataDir = filepath.Join(t.TempDir(), "data")
			cfg.Database = tc.dsn(t)
			cfg.RelayListen = "127.0.0.1:0"
			cfg.HTTPListen = ""
			cfg.Relays = remote.RelayURLs()
			cfg.Agent.Delegate = remote.Address()
			cfg.Agent.DelegatePrivateEndpoints = true
			cfg.Agent.StepTimeout = config.Duration{Duration: 20 * time.Second}
			cfg.Agent.Lease = config.Duration{Duration: 2 * time.Second}
			if err := os.MkdirAll(filepath.Join(cfg.DataDir, "sandbox"), 0o700); err != nil {
				t.Fatal(err)
			}
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			n, stop := startConfigured(t, cfg, logger)
			a := &agentNode{Node: n, alice: newRequester(t, n.RelayURLs()), dataDir: cfg.DataDir}
			id := a.send(t, "", "summarise the week")
			select {
			case <-reached:
			case <-time.After(30 * time.Second):
				t.Fatal("the step never reached the delegate")
			}
			stop()

			n, _ = startConfigured(t, cfg, logger)
			a = &agentNode{Node: n, alice: a.alice}
			// The delegate's task failed (it has no agent): the job
			// waits for a human, told that the task holds no answer.
			a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
			if p := posts.Load(); p != 2 {
				t.Errorf("%d POSTs to the delegate; want 2: the step, and the step sent again after the restart", p)
			}
			made, err := remote.Tasks.List(context.Background(), tasks.Filter{Owner: n.Address(), Brief: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(made) != 1 {
				t.Errorf("the delegate holds %d tasks of the node; want 1: the step sent again after the restart is the same step", len(made))
			}
			stopRemote()
		})
	}
}
