package delegate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// serveRemote is the other agent, a worker behind SNAP: it publishes its
// card on the relays and answers each step's message/send on its task
// remote-1 with an agent message whose data part is a worker answer. It
// stops when ctx ends; stopped reports it.
func serveRemote(ctx context.Context, key *identity.Key, urls []string, log *slog.Logger) (stopped <-chan error) {
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p struct {
			TaskID  string            `json:"taskId"`
			Message snap.InnerMessage `json:"message"`
		}
		json.Unmarshal(req.Payload, &p)
		var step map[string]any // the job request, then an observation
		json.Unmarshal(p.Message.Parts[0].Data, &step)
		fmt.Printf("remote: task %q, job %v, observation %v\n", p.TaskID, step["job_id"], step["observation"])
		answer := snap.DataPart(json.RawMessage(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`))
		return map[string]any{"task": map[string]any{"id": "remote-1", "contextId": "c-1",
			"status":  map[string]any{"state": "input-required", "timestamp": time.Now().UTC().Format(time.RFC3339)},
			"history": []any{map[string]any{"messageId": snap.NewID(), "role": "agent", "parts": []snap.Part{answer}}}}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: key, Router: router, Logger: log,
		Validator: snap.NewValidator(snap.Config{Self: key.Address(identity.Mainnet), Replay: snap.NewMemoryReplayStore(0)})})
	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
	pool.Start(ctx)
	in := snapnostr.NewInbox(snapnostr.InboxConfig{Key: key, Transport: pool, Handler: server, Logger: log})
	done := make(chan error, 1)
	go func() { err := in.Run(ctx); pool.Close(); done <- err }()
	<-in.Ready()
	card := &snap.Card{Name: "worker", Description: "answers jobs", Version: "1.0.0", Identity: server.Address(), NostrRelays: urls,
		Skills:            []snap.Skill{{ID: "jobs", Name: "Jobs", Description: "answers job requests", Tags: []string{"agent"}}},
		DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"application/json"}}
	ev, _ := snapnostr.CardEvent(card, key, time.Now())
	if _, err := pool.Publish(ctx, ev); err != nil {
		panic(err)
	}
	return done
}

// A Delegate is the agent runtime's model: each step of a job is a
// message/send to the other agent, found by its card on the node's relays;
// the first carries the job request, the next continue the same remote
// task with the host's observation, and each answer is one worker answer
// line, which the node then judges and runs itself.
func Example() {
	log := slog.New(slog.DiscardHandler)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rel, _ := embedded.New(embedded.Config{DBPath: ":memory:", Logger: log})
	defer rel.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- rel.Serve(ctx, ln) }()
	urls := []string{embedded.WebSocketURL(ln.Addr())}
	remote, _ := identity.FromHex(strings.Repeat("0c", 32))
	remoteStopped := serveRemote(ctx, remote, urls, log)

	// The node's side.
	nodeKey, _ := identity.FromHex(strings.Repeat("0b", 32))
	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
	pool.Start(ctx)
	defer pool.Close()
	d, err := delegate.New(delegate.Config{Key: nodeKey, Relays: pool, Address: remote.Address(identity.Mainnet),
		StepTimeout: 10 * time.Second, Logger: log})
	if err != nil {
		panic(err)
	}
	// In a node the agent runtime (agent.Runtime) makes the prompts; here
	// two steps are asked by hand, the second after an observation.
	job := &agent.JobRequest{JobID: "job-1", Phase: "work", ContextFiles: []string{}, SystemPrompt: "be careful",
		TaskDescription: "tidy /sandbox", Metadata: agent.JobRequestMetadata{AcceptedFormats: agent.AcceptedFormats()}}
	msgs := []agent.ChatMessage{{Role: agent.RoleSystem, Content: job.SystemPrompt}, {Role: agent.RoleUser, Content: job.TaskDescription}}
	for step := range 2 {
		c, err := d.Complete(ctx, agent.Prompt{Messages: msgs, Job: job, Step: step})
		if err != nil {
			panic(err)
		}
		fmt.Println("answer:", c.Text, c.Model == d.Name())
		msgs = append(msgs, agent.ChatMessage{Role: agent.RoleAssistant, Content: c.Text}, agent.ChatMessage{Role: agent.RoleUser, Content: "3 files"})
	}
	d.EndJob("job-1") // the job ended: its remote task is forgotten
	stop()
	fmt.Println(<-remoteStopped, <-served)
	// Output:
	// remote: task "", job job-1, observation <nil>
	// answer: {"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"} true
	// remote: task "remote-1", job job-1, observation 3 files
	// answer: {"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"} true
	// <nil> <nil>
}
