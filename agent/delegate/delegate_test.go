package delegate_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/audit/audittest"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// call is one request to the test's delegate: a message/send (its taskId,
// its message's id, idempotency key and data part) or a tasks/get (its
// taskId).
type call struct {
	method, taskID, messageID, key string
	data                           json.RawMessage
}

// reply is how the test's delegate answers one call: the task it returns
// (nil: a SNAP error; a task without an id: a SNAP error whose message is
// the task's status message).
type reply func(c call) *tasks.Task

// setup starts an embedded relay, a delegate answering with r behind an
// inbox, its card, and returns a Delegate of a node key on that relay.
func setup(t testing.TB, r reply, opts ...func(*delegate.Config)) (*delegate.Delegate, *audittest.Recorder, *[]string) {
	t.Helper()
	return setupHTTP(t, r, nil, opts...)
}

// setupHTTP is setup with the delegate served over HTTP too, on
// 127.0.0.1, through wrap, when wrap is not nil: its card then declares
// that endpoint before its relays.
func setupHTTP(t testing.TB, r reply, wrap func(http.Handler) http.Handler, opts ...func(*delegate.Config)) (*delegate.Delegate, *audittest.Recorder, *[]string) {
	t.Helper()
	return setupCard(t, r, wrap, nil, opts...)
}

// setupCard is setupHTTP with the delegate's card changed by edit, when
// not nil, before it is published.
func setupCard(t testing.TB, r reply, wrap func(http.Handler) http.Handler, edit func(*snap.Card), opts ...func(*delegate.Config)) (*delegate.Delegate, *audittest.Recorder, *[]string) {
	t.Helper()
	urls := []string{relaytest.Serve(t, embedded.Config{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// One Verifier for the process's pools, the delegate's inbox and the
	// Delegate, as a node shares its own.
	v := relay.NewVerifier()
	pool := func() *relay.Pool {
		p := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: quiet(), Verifier: v})
		p.Start(ctx)
		t.Cleanup(func() { p.Close() })
		return p
	}
	dkey, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := dkey.Address(identity.Mainnet)
	var mu sync.Mutex
	var taskIDs []string
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p struct {
			Message snap.InnerMessage `json:"message"`
			TaskID  string            `json:"taskId"`
			Key     string            `json:"idempotencyKey"`
		}
		if err := json.Unmarshal(req.Payload, &p); err != nil || len(p.Message.Parts) != 1 {
			return nil, snap.NewError(snap.CodeInvalidPayload, "want one part", nil)
		}
		mu.Lock()
		taskIDs = append(taskIDs, p.TaskID)
		mu.Unlock()
		task := r(call{method: "message/send", taskID: p.TaskID, messageID: p.Message.MessageID, key: p.Key, data: p.Message.Parts[0].Data})
		if task == nil {
			return nil, snap.NewError(snap.CodeInvalidPayload, "no jobs today", nil)
		}
		if task.ID == "" {
			return nil, snap.NewError(snap.CodeInvalidPayload, task.Status.Message, nil)
		}
		return map[string]any{"task": task}, nil
	})
	router.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p snap.GetParams
		if err := json.Unmarshal(req.Payload, &p); err != nil {
			return nil, snap.NewError(snap.CodeInvalidPayload, "bad params", nil)
		}
		task := r(call{method: "tasks/get", taskID: p.TaskID})
		if task == nil {
			return nil, snap.NewError(snap.CodeTaskNotFound, "no such task", nil)
		}
		return map[string]any{"task": task}, nil
	})
	router.Handle("tasks/cancel", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p snap.CancelParams
		if err := json.Unmarshal(req.Payload, &p); err != nil {
			return nil, snap.NewError(snap.CodeInvalidPayload, "bad params", nil)
		}
		task := r(call{method: "tasks/cancel", taskID: p.TaskID})
		if task == nil {
			return nil, snap.NewError(snap.CodeTaskNotFound, "no such task", nil)
		}
		if task.ID == "" {
			return nil, snap.NewError(snap.CodeInvalidPayload, task.Status.Message, nil)
		}
		return map[string]any{"task": task}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: dkey, Router: router, Logger: quiet(), MaxResponseSize: relay.MaxNIP44Plain,
		Validator: snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: dkey, Transport: pool(), Handler: server, Logger: quiet(), Workers: 2, Verifier: v})
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-inbox.Ready():
	case err := <-done:
		t.Fatal(err)
	}
	card := &snap.Card{Name: "delegate", Description: "answers jobs", Version: "1.0.0", Identity: self, NostrRelays: urls,
		Skills:            []snap.Skill{{ID: "jobs", Name: "Jobs", Description: "answers job requests", Tags: []string{"agent"}, Examples: []string{"a job"}}},
		DefaultInputModes: []string{"application/json"}, DefaultOutputModes: []string{"application/json"}}
	if wrap != nil {
		card.Endpoints = []snap.Endpoint{{Protocol: "http", URL: serveHTTP(t, ctx, dkey, server, wrap) + "/snap"}}
	}
	if edit != nil {
		edit(card)
	}
	ev, err := snapnostr.CardEvent(card, dkey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	nodePool := pool()
	if _, err := nodePool.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	nkey, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	a := &audittest.Recorder{}
	cfg := delegate.Config{Key: nkey, Relays: nodePool, Verifier: v, Address: self, StepTimeout: 20 * time.Second, Audit: a, Logger: quiet()}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := delegate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d, a, &taskIDs
}

// answerTask is a task whose latest agent message, new at each call, has
// the data part b.
func answerTask(id string, b string) *tasks.Task {
	return &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateInputRequired, Timestamp: time.Now()},
		History: []tasks.Message{{MessageID: uuid.NewString(), Role: snap.RoleAgent, Parts: []snap.Part{snap.TextPart("thinking")}},
			{MessageID: uuid.NewString(), Role: snap.RoleAgent, Parts: []snap.Part{snap.TextPart("here"), snap.DataPart(json.RawMessage(b))}}}}
}

const completed = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"done"}`

func prompt(job string, step int) agent.Prompt {
	req := &agent.JobRequest{JobID: job, Phase: "work", ContextFiles: []string{}, SystemPrompt: "be good", TaskDescription: "do it",
		Metadata: agent.JobRequestMetadata{CostThreshold: 1, TimeThresholdMinutes: 1, MaxSteps: 5, AcceptedFormats: []string{"PROPOSAL", "COMPLETED", "STUCK", "RETRY"}}}
	msgs := []agent.ChatMessage{{Role: agent.RoleSystem, Content: "be good"}, {Role: agent.RoleUser, Content: "do it"}}
	for i := 0; i < step; i++ {
		msgs = append(msgs, agent.ChatMessage{Role: agent.RoleAssistant, Content: completed}, agent.ChatMessage{Role: agent.RoleUser, Content: "observed"})
	}
	return agent.Prompt{Messages: msgs, Job: req, Step: step}
}

// The first step opens a task on the delegate with the job request; the
// next continues it with the observation; after EndJob, a new task.
func TestDelegateContinuesItsTask(t *testing.T) {
	var got []map[string]any
	d, _, ids := setup(t, func(c call) *tasks.Task {
		var v map[string]any
		json.Unmarshal(c.data, &v)
		got = append(got, v)
		taskID := c.taskID
		if taskID == "" {
			taskID = "remote-1"
		}
		return answerTask(taskID, `{ "action": "COMPLETED",
			"evidence_files": [], "summary_for_supervisor": "done" }`)
	})
	ctx := context.Background()
	for step := range 2 {
		c, err := d.Complete(ctx, prompt("job-1", step))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if c.Text != completed || c.Model != d.Name() {
			t.Fatalf("step %d: %+v", step, c)
		}
	}
	d.EndJob("job-1")
	if _, err := d.Complete(ctx, prompt("job-1", 0)); err != nil {
		t.Fatal(err)
	}
	if strings.Join(*ids, ",") != ",remote-1," {
		t.Errorf("taskIds %q; want none, the delegate's task, none after EndJob", *ids)
	}
	if got[0]["task_description"] != "do it" || got[1]["observation"] != "observed" || got[1]["step"] != float64(1) || got[1]["job_id"] != "job-1" {
		t.Errorf("the delegate got %v", got)
	}
}

// The Delegate signs its requests through the Verifier its relays check
// them with (Config.Verifier): in a process whose pools and inbox share
// that Verifier, a step and its follow-up check no signature at all,
// where a Delegate signing alone had each request checked again when its
// relays published it.
func TestDelegateSignsThroughTheSharedVerifier(t *testing.T) {
	var v *relay.Verifier
	d, _, _ := setup(t, func(c call) *tasks.Task { return answerTask("remote-1", completed) },
		func(c *delegate.Config) { v = c.Verifier })
	before := v.SignatureChecks()
	ctx := context.Background()
	for step := range 2 {
		if _, err := d.Complete(ctx, prompt("job-1", step)); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	if n := v.SignatureChecks() - before; n != 0 {
		t.Errorf("two steps checked %d signatures, want 0: every event was signed in this process through the shared Verifier", n)
	}
}

// An answer that is not one worker answer stops the job with the rule,
// through the workers' audit path.
func TestDelegateRefusesBadAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		task func(id string) *tasks.Task
		want string
	}{
		{"error response", func(string) *tasks.Task { return nil }, "the delegate answered step 0 with an error: "},
		{"no data part", func(id string) *tasks.Task {
			return &tasks.Task{ID: id, Status: tasks.Status{State: tasks.StateCompleted, Timestamp: time.Now()}}
		}, "the delegate's task t (completed) holds no answer to step 0: no data part in an agent message or artifact (object)"},
		{"not a worker answer", func(id string) *tasks.Task { return answerTask(id, `{"hello":"world"}`) },
			"the delegate answered garbage: "},
		{"an unknown agent response", func(id string) *tasks.Task {
			return answerTask(id, `{"action":"GIVE_UP","evidence_files":[],"summary_for_supervisor":"no"}`)
		}, "the delegate answered garbage: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, a, _ := setup(t, func(call) *tasks.Task { return c.task("t") })
			_, err := d.Complete(context.Background(), prompt("job-1", 0))
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want agent.ErrWorkerFailed with %q", err, c.want)
			}
			if len(a.Entries()) != 1 || a.Entries()[0].Decision != "worker_stopped" || a.Entries()[0].Task != "job-1" ||
				!strings.Contains(string(a.Entries()[0].Detail), `"delegate":"`) {
				t.Errorf("audit: %+v", a.Entries())
			}
		})
	}
}

// A step time-out that passes before the answer comes stops the job with
// the limit named.
func TestDelegateStepTimeOut(t *testing.T) {
	d, a, _ := setup(t, func(call) *tasks.Task { return answerTask("t", completed) },
		func(c *delegate.Config) { c.StepTimeout = time.Nanosecond })
	_, err := d.Complete(context.Background(), prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "the delegate did not answer step 0 within its step time-out of 1ns") ||
		!strings.HasSuffix(err.Error(), "(timeout)") || len(a.Entries()) != 1 {
		t.Fatalf("error %v, audit %+v; want a time-out", err, a.Entries())
	}
}

// A step whose deadline passed before an answer came is a time-out that
// stops the job; a canceled step (the node stops) is not a violation.
func TestDelegateTimeOut(t *testing.T) {
	d, a, _ := setup(t, func(call) *tasks.Task { return answerTask("t", completed) })
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := d.Complete(ctx, prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "the delegate did not answer step 0 within the request time-out") ||
		!strings.HasSuffix(err.Error(), "(timeout)") || len(a.Entries()) != 1 {
		t.Fatalf("error %v, audit %+v; want a time-out", err, a.Entries())
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := d.Complete(ctx, prompt("job-2", 0)); err == nil || errors.Is(err, agent.ErrWorkerFailed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v; want context.Canceled, not a violation", err)
	}
}

// A step cut at the job's time limit (the runtime's agent.ErrTimeLimit
// cause) is no violation of the delegate's: the job halts at its limit
// and the audit log says so, without blaming the delegate.
func TestDelegateStoppedAtTheTimeLimit(t *testing.T) {
	d, a, _ := setup(t, func(call) *tasks.Task { return answerTask("t", completed) })
	ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), agent.ErrTimeLimit)
	defer cancel()
	_, err := d.Complete(ctx, prompt("job-1", 0))
	if errors.Is(err, agent.ErrWorkerFailed) || !errors.Is(err, agent.ErrTimeLimit) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v; want the job's time limit, not a violation", err)
	}
	if len(a.Entries()) != 1 || a.Entries()[0].Step == audit.StepRejected || a.Entries()[0].Decision != "worker_stopped" ||
		!strings.Contains(a.Entries()[0].Reason, "time limit") || !strings.Contains(string(a.Entries()[0].Detail), `"rule":"time_limit"`) {
		t.Fatalf("audit %+v; want the job's time limit named", a.Entries())
	}
}

// A delegate that answers message/send before it has worked (its task
// submitted, then working, with no answer yet) is asked again with
// tasks/get until its answer comes: the agent message after the step's
// own, not the one before it that answered the step before.
func TestDelegateWaitsForItsAnswer(t *testing.T) {
	var (
		mu      sync.Mutex
		history []tasks.Message
		gets    int
	)
	agentSays := func(b string) tasks.Message {
		return tasks.Message{MessageID: uuid.NewString(), Role: snap.RoleAgent, Parts: []snap.Part{snap.DataPart(json.RawMessage(b))}}
	}
	d, a, _ := setup(t, func(c call) *tasks.Task {
		mu.Lock()
		defer mu.Unlock()
		state := tasks.StateWorking
		switch c.method {
		case "message/send":
			history = append(history, tasks.Message{MessageID: c.messageID, Role: snap.RoleUser, Parts: []snap.Part{snap.DataPart(c.data)}})
			state = tasks.StateSubmitted
		case "tasks/get":
			if gets++; gets%3 == 0 { // the answer comes at the third look
				history = append(history, agentSays(completed))
				state = tasks.StateInputRequired
			}
		}
		return &tasks.Task{ID: "remote-1", Status: tasks.Status{State: state, Timestamp: time.Now()}, History: slices.Clone(history)}
	})
	ctx := context.Background()
	for step := range 2 {
		c, err := d.Complete(ctx, prompt("job-1", step))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if c.Text != completed {
			t.Fatalf("step %d: %+v", step, c)
		}
		mu.Lock()
		n := gets
		mu.Unlock()
		if want := 3 * (step + 1); n != want {
			t.Fatalf("step %d: %d tasks/get, want %d (three looks a step)", step, n, want)
		}
	}
	if len(a.Entries()) != 0 {
		t.Fatalf("audit %+v, want no violation", a.Entries())
	}
}

// An answer not tied to the step stops the job: one on another task than
// the job's, or the same answer as the step before on a task that is no
// longer at work.
func TestDelegateRefusesAnswersOfAnotherStep(t *testing.T) {
	first := answerTask("remote-1", completed)
	for _, c := range []struct {
		name  string
		again func(call) *tasks.Task
		want  string
	}{
		{"the answer before", func(call) *tasks.Task { return first },
			"the delegate's task remote-1 (input_required) holds no new answer to step 1: its latest was there when the step before was answered (object)"},
		{"another task", func(call) *tasks.Task { return answerTask("remote-2", completed) },
			"the delegate answered step 1 on task remote-2, not the job's task remote-1 (object)"},
		{"an answer before the step's message", func(c call) *tasks.Task {
			t := answerTask("remote-1", completed)
			t.History = append(t.History, tasks.Message{MessageID: c.messageID, Role: snap.RoleUser, Parts: []snap.Part{snap.DataPart(c.data)}})
			return t
		}, "the delegate's task remote-1 (input_required) holds no answer to step 1: no data part in an agent message or artifact (object)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			d, a, _ := setup(t, func(cl call) *tasks.Task {
				if calls++; calls == 1 {
					return first
				}
				return c.again(cl)
			})
			ctx := context.Background()
			if _, err := d.Complete(ctx, prompt("job-1", 0)); err != nil {
				t.Fatal(err)
			}
			_, err := d.Complete(ctx, prompt("job-1", 1))
			if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want agent.ErrWorkerFailed with %q", err, c.want)
			}
			if len(a.Entries()) != 1 || a.Entries()[0].Decision != "worker_stopped" {
				t.Errorf("audit: %+v", a.Entries())
			}
		})
	}
}

// A delegate at work past the step's time-out stops the job with the
// limit named, however often it was asked again.
func TestDelegateAtWorkPastTheStepTimeOut(t *testing.T) {
	d, a, _ := setup(t, func(call) *tasks.Task {
		return &tasks.Task{ID: "remote-1", Status: tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}}
	}, func(c *delegate.Config) { c.StepTimeout = 300 * time.Millisecond })
	_, err := d.Complete(context.Background(), prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "the delegate did not answer step 0 within its step time-out of 300ms") ||
		len(a.Entries()) != 1 {
		t.Fatalf("error %v, audit %+v; want a time-out", err, a.Entries())
	}
}

// A job whose request came through MaxHops agents' jobs is not handed on:
// the step fails at once, the job waits for a human, and the delegate is
// sent nothing; one hop fewer is sent.
func TestDelegateStopsAtMaxHops(t *testing.T) {
	var asked atomic.Int64
	d, _, _ := setup(t, func(call) *tasks.Task { asked.Add(1); return answerTask("t", completed) })
	pr := prompt("job-1", 0)
	pr.Job.Metadata.Hops = delegate.MaxHops
	_, err := d.Complete(context.Background(), pr)
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "hops") {
		t.Fatalf("error %v; want agent.ErrWorkerFailed naming the hops", err)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the delegate was asked %d times; want none", n)
	}
	pr = prompt("job-2", 0)
	pr.Job.Metadata.Hops = delegate.MaxHops - 1
	if _, err := d.Complete(context.Background(), pr); err != nil || asked.Load() != 1 {
		t.Fatalf("%d hops: %v, asked %d times; want the step sent", delegate.MaxHops-1, err, asked.Load())
	}
}

// A delegate's error response whose message is tens of kilobytes is cut
// before it is logged and returned (the job's history, reason and audit
// entry come from that error): the delegate chooses its message, not the
// size of the node's log lines.
func TestDelegateLongErrorCut(t *testing.T) {
	long := strings.Repeat("\x1b[31mno jobs today ", 1500) // 30 kB
	var logged strings.Builder
	d, a, _ := setup(t, func(call) *tasks.Task { return &tasks.Task{Status: tasks.Status{Message: long}} },
		func(c *delegate.Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	_, err := d.Complete(context.Background(), prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "no jobs today") {
		t.Fatalf("error %v; want agent.ErrWorkerFailed with the delegate's message", err)
	}
	if n := len(err.Error()); n > 2000 {
		t.Errorf("the error is %d bytes; want the delegate's message cut", n)
	}
	if n := logged.Len(); n > 4000 {
		t.Errorf("the log is %d bytes; want the delegate's message cut", n)
	}
	if len(a.Entries()) != 1 {
		t.Errorf("audit: %+v", a.Entries())
	}
}
