package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/tasks"
)

// Two nodes whose agents delegate to each other (A's agent.delegate is B,
// B's is A) hand one requester's task back and forth: each job sends its
// job request to the other node, which starts a job that sends one back.
// The job request counts the agents' jobs it came through
// (metadata.hops) and a delegate does not hand on one past
// delegate.MaxHops: the job that would waits for a human saying so, and
// the jobs before it, their delegate's task no longer at work without an
// answer, stop too, within the step time-out. Before, the two nodes made a
// new job each, on and on, as long as they ran (20 tasks on each within
// 20 s of 2 s step time-outs), from one message.
func TestDelegateLoopIsBounded(t *testing.T) {
	keyA, keyB := newDelegateKey(t), newDelegateKey(t)
	conf := func(c *config.Config, self, other *identity.Key) {
		c.KeyFile = filepath.Join(c.DataDir, "identity.key")
		if err := os.MkdirAll(filepath.Join(c.DataDir, "sandbox"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := identity.SaveKeyFile(c.KeyFile, self); err != nil {
			t.Fatal(err)
		}
		c.Database = filepath.Join(c.DataDir, "tasks.db")
		c.Agent.Delegate = other.Address(identity.Mainnet)
		// Longer than the test waits: the jobs stop because the loop
		// is cut, not because a step ran out of time.
		c.Agent.StepTimeout = config.Duration{Duration: time.Minute}
		c.Agent.Lease = config.Duration{Duration: 2 * time.Second}
	}
	a, _ := startNode(t, func(c *config.Config) { conf(c, keyA, keyB) })
	b, _ := startNode(t, func(c *config.Config) { c.Relays = a.RelayURLs(); conf(c, keyB, keyA) })
	n := &agentNode{Node: a, alice: newRequester(t, a.RelayURLs())}
	id := n.send(t, "", "summarise the week")
	n.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)

	// Every job of the loop stops: none is left at work on either node.
	all := func(nd *node.Node) []*tasks.Task {
		l, err := nd.Tasks.List(context.Background(), tasks.Filter{Brief: true})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		la, lb := all(a), all(b)
		atWork := 0
		for _, x := range append(la, lb...) {
			if x.Status.State == tasks.StateSubmitted || x.Status.State == tasks.StateWorking {
				atWork++
			}
		}
		if atWork == 0 {
			if got := len(la) + len(lb); got > 6 {
				t.Errorf("%d tasks on the two nodes; want at most 6: the requester's and one per hop", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the loop's tasks still at work (%d on A, %d on B); want every job stopped", atWork, len(la), len(lb))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The job that would have handed the task on once more says why.
	var said bool
	for _, nd := range []*node.Node{a, b} {
		for _, x := range all(nd) {
			h, err := nd.Agent().Store().History(context.Background(), x.ID)
			if err != nil {
				continue
			}
			for _, it := range h.Interactions {
				if strings.Contains(it.Response.Error, "hops") {
					said = true
				}
			}
		}
	}
	if !said {
		t.Error("no job's history says it was not handed on past the hops")
	}
}
