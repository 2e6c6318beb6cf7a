package node_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

// TestCommitsPerMessageSend counts the commits of the node's database
// (SQLite's group commits, one transaction each here: the requests go one
// at a time) that one free-text message/send costs a node without an
// agent: one, which waits for the disk — the request's replay record, and
// the task it claims (created failed at once, with its creation event and
// the request's result kept for a retry) — in one transaction; the answer
// is that result, and is not written again. A retry of the request gets
// the task, deduplicated. A node offering a service of its embedder
// (which may act outside the database) writes a message/send's record
// the same way: the task's commit waits for the disk.
func TestCommitsPerMessageSend(t *testing.T) {
	echo := node.WithService("echo", func(context.Context, *servicecall.Call) (any, error) { return "echo", nil })
	for _, c := range []struct {
		name   string
		opts   []node.Option
		synced int64
	}{
		{"node", nil, 1},
		{"node with a service", []node.Option{echo}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := startNodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" }, c.opts...)
			commitsPerMessageSend(t, n, c.synced)
		})
	}
}

// commitsPerMessageSend sends message/sends to n one at a time and checks
// that each costs 1 commit, synced of which wait for the disk.
func commitsPerMessageSend(t *testing.T, n *node.Node, synced int64) {
	c := newHTTPClient(t)
	send := func(m *snap.Message) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		resp, err := c.Send(ctx, n.HTTPURL()+"/snap", m)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(resp.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	message := func(i int) *snap.Message {
		b, _ := json.Marshal(text("hello-" + string(rune('a'+i))))
		return &snap.Message{To: n.Address(), Method: "message/send", Payload: b}
	}
	send(message(0)) // the first request of a fresh node may write more
	const requests = 5
	for i := 1; i <= requests; i++ {
		m := message(i)
		before, _ := n.DB.GroupCommits()
		unsynced := n.DB.UnsyncedCommits()
		p := send(m)
		after, _ := n.DB.GroupCommits()
		noAgent(t, "answer", taskOf(t, p))
		if got := after - before; got != 1 {
			t.Errorf("request %d: %d commits; want 1 (the replay record, the task and its result together)", i, got)
		}
		if got := after - before - (n.DB.UnsyncedCommits() - unsynced); got != synced {
			t.Errorf("request %d: %d commits waited for the disk; want %d", i, got, synced)
		}
		again := send(m)
		if again["deduplicated"] != true || taskOf(t, again).ID != taskOf(t, p).ID {
			t.Fatalf("retry of request %d: %v; want its task %s, deduplicated", i, again, taskOf(t, p).ID)
		}
		noAgent(t, "retry", taskOf(t, again))
	}
}

// TestStatementsPerMessageSend counts every statement the node's database
// is sent for one free-text message/send (a node without an agent, as in
// TestCommitsPerMessageSend): on SQLite one transaction (BEGIN, the
// replay record's INSERT, the task's, its event's, COMMIT), 5 in all and
// no read, whether or not the node offers a service of its embedder; on
// PostgreSQL one statement, the replay record and the task it claims, one
// round trip to the server. The WAL checkpoints the SQLite committer runs
// beside the writes, and the replicas' beats on PostgreSQL, come on their
// own clocks: the fewest a request cost is checked.
func TestStatementsPerMessageSend(t *testing.T) {
	echo := node.WithService("echo", func(context.Context, *servicecall.Call) (any, error) { return "echo", nil })
	for _, c := range []struct {
		name string
		dsn  func(testing.TB) string
		opts []node.Option
		want int64
	}{
		{"sqlite", testdb.SQLite, nil, 5},
		{"sqlite, a node with a service", testdb.SQLite, []node.Option{echo}, 5},
		{"postgres", testdb.Postgres, nil, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.dsn(t)
			n := startNodeWith(t, func(cfg *config.Config) { cfg.HTTPListen = "127.0.0.1:0"; cfg.Database = dsn }, c.opts...)
			hc := newHTTPClient(t)
			send := func(i int) {
				t.Helper()
				b, _ := json.Marshal(text("statements-" + string(rune('a'+i))))
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				if _, err := hc.Send(ctx, n.HTTPURL()+"/snap", &snap.Message{To: n.Address(), Method: "message/send", Payload: b}); err != nil {
					t.Fatal(err)
				}
			}
			send(0) // the first request of a fresh node may prepare more
			var costs []int64
			for i := 1; i <= 6; i++ {
				before, cps := n.DB.Statements(), checkpoints(n)
				send(i)
				costs = append(costs, n.DB.Statements()-before-(checkpoints(n)-cps))
			}
			if got := slices.Min(costs); got != c.want {
				t.Errorf("a message/send sent %d statements to the database; want %d (each request's: %v)", got, c.want, costs)
			}
		})
	}
}

// checkpoints is how many WAL checkpoints n's SQLite committer has run,
// each one statement.
func checkpoints(n *node.Node) int64 {
	done, failed := n.DB.Checkpoints()
	return done + failed
}
