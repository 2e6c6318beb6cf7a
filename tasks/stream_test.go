package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// streamEvent is an emitted payload as a requester decodes it, with the
// moment (bubble time in synctest) it was emitted.
type streamEvent struct {
	TaskID    string   `json:"taskId"`
	Progress  *float64 `json:"progress"`
	Message   string   `json:"message"`
	State     State    `json:"state"`
	Version   int64    `json:"version"`
	Current   bool     `json:"current"`
	Heartbeat bool     `json:"heartbeat"`
	Artifact  *struct {
		ArtifactID string `json:"artifactId"`
		Parts      []Part `json:"parts"`
		Partial    bool   `json:"partial"`
	} `json:"artifact"`
	at time.Time
}

func (e streamEvent) String() string {
	switch {
	case e.Heartbeat:
		return "heartbeat:" + string(e.State)
	case e.Current:
		return "current:" + string(e.State)
	case e.Artifact != nil:
		return fmt.Sprintf("%d:artifact:%s", e.Version, e.Artifact.ArtifactID)
	}
	return fmt.Sprintf("%d:%s", e.Version, e.State)
}

// recorder collects emitted payloads, marshaled and decoded as a
// transport and a requester would.
type recorder struct {
	mu     sync.Mutex
	events []streamEvent
	fail   int // emit fails from this event on (1-based); 0: never
}

func (r *recorder) emit(p any) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var e streamEvent
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	e.at = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 && len(r.events)+1 >= r.fail {
		return errors.New("transport gone")
	}
	r.events = append(r.events, e)
	return nil
}

func (r *recorder) got() []streamEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]streamEvent(nil), r.events...)
}

func (r *recorder) summary() string {
	var parts []string
	for _, e := range r.got() {
		parts = append(parts, e.String())
	}
	return strings.Join(parts, " ")
}

// versions returns the versions of the task events among evs, checking
// that they strictly increase.
func versions(t *testing.T, evs []streamEvent) []int64 {
	t.Helper()
	var out []int64
	for _, e := range evs {
		if e.Heartbeat || e.Current {
			if e.Version != 0 {
				t.Fatalf("a heartbeat or current-state event carries version %d", e.Version)
			}
			continue
		}
		if len(out) > 0 && e.Version <= out[len(out)-1] {
			t.Fatalf("version %d after %d", e.Version, out[len(out)-1])
		}
		out = append(out, e.Version)
	}
	return out
}

// storedVersions returns the versions of the task's stored events after
// `after`.
func storedVersions(t *testing.T, s *Service, id string, after int64) []int64 {
	t.Helper()
	evs, err := s.TaskEvents(context.Background(), alice, id, after)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range evs {
		out = append(out, e.Version)
	}
	return out
}

// running runs a stream operation in the background; wait returns its
// result.
type running struct {
	done chan struct{}
	task *Task
	err  error
}

func start(f func() (*Task, error)) *running {
	r := &running{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.task, r.err = f()
	}()
	return r
}

func (r *running) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

func (r *running) wait(t *testing.T) *Task {
	t.Helper()
	<-r.done
	if r.err != nil {
		t.Fatalf("stream: %v", r.err)
	}
	return r.task
}

func resubscribePayload(id string, after int64) string {
	if after < 0 {
		return fmt.Sprintf(`{"taskId":%q}`, id)
	}
	return fmt.Sprintf(`{"taskId":%q,"afterVersion":%d}`, id, after)
}

func artifact(id string, parts ...string) Artifact {
	a := Artifact{ArtifactID: id}
	for _, p := range parts {
		a.Parts = append(a.Parts, TextPart(p))
	}
	return a
}

// A message/stream whose proposals run at once: the task's events in
// version order, then the completed task.
func TestStreamMessageProposal(t *testing.T) {
	r := &recordingRunner{out: func(Job) (Outcome, error) {
		return Outcome{State: StateCompleted, Note: "done", Artifacts: []Artifact{artifact("result", "ok"), artifact("diff", "+x")}}, nil
	}}
	s, _ := newService(t, ServiceOptions{Runner: r})
	rec := &recorder{}
	task, err := streamJSON(context.Background(), s, alice, []byte(proposalMessage(writeProposal)), rec.emit)
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.summary(); got != "1:submitted 2:working 3:artifact:result 4:artifact:diff 5:completed" {
		t.Fatalf("events %s", got)
	}
	evs := rec.got()
	if evs[4].Message != "done" || *evs[4].Progress != 1 || *evs[1].Progress != 0.5 || *evs[0].Progress != 0 || evs[0].TaskID != task.ID {
		t.Errorf("status events %+v", evs)
	}
	if a := evs[2].Artifact; a.Partial || len(a.Parts) != 1 || *a.Parts[0].Text != "ok" {
		t.Errorf("artifact event %+v", a)
	}
	if task.Status.State != StateCompleted || len(task.Artifacts) != 2 || task.Version != 5 {
		t.Fatalf("final task %+v", task)
	}
	if n := s.OpenStreams(); n != 0 {
		t.Fatalf("%d streams open after the end", n)
	}
}

// message/stream follows the task live until input_required; continuing
// the task streams only what this message caused.
func TestStreamMessageLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newService(t, ServiceOptions{})
		rec := &recorder{}
		run := start(func() (*Task, error) {
			return streamJSON(ctx, s, alice, []byte(send(`{"text":"hello"}`)), rec.emit)
		})
		synctest.Wait()
		if run.finished() || rec.summary() != "1:submitted" {
			t.Fatalf("before any change: %s (finished %v)", rec.summary(), run.finished())
		}
		id := rec.got()[0].TaskID
		s.Transition(ctx, id, StateWorking, "")
		s.AddArtifact(ctx, id, artifact("a1", "one"))
		synctest.Wait()
		if run.finished() {
			t.Fatal("the stream ended while the task works")
		}
		s.Transition(ctx, id, StateInputRequired, "which file?")
		task := run.wait(t)
		if got := rec.summary(); got != "1:submitted 2:working 3:artifact:a1 4:input_required" {
			t.Fatalf("events %s", got)
		}
		if task.Status.State != StateInputRequired || task.Version != 4 || len(task.Artifacts) != 1 {
			t.Fatalf("final task %+v", task)
		}
		synctest.Wait() // the broker lets go of a canceled subscription in the background
		if s.Events().Subscribers(id) != 0 {
			t.Fatal("subscription left behind")
		}

		// The answer moves it back to working: only the events from here.
		rec2 := &recorder{}
		run = start(func() (*Task, error) {
			return streamJSON(ctx, s, alice, []byte(continuePayload(id, "m2", "notes.txt")), rec2.emit)
		})
		synctest.Wait()
		s.Transition(ctx, id, StateCompleted, "")
		run.wait(t)
		// Version 5 is the answer's history and its status (one write).
		if got := rec2.summary(); got != "5:working 6:completed" {
			t.Fatalf("continued stream: %s", got)
		}
	})
}

// A quiet task gets a heartbeat at least every StreamHeartbeat, counted
// from the last event; the stream ends at StreamMaxDuration with the task
// as it is.
func TestStreamHeartbeatAndMaxDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newService(t, ServiceOptions{StreamHeartbeat: 25 * time.Second, StreamMaxDuration: 610 * time.Second})
		rec := &recorder{}
		begin := time.Now()
		run := start(func() (*Task, error) {
			return streamJSON(ctx, s, alice, []byte(send(`{"text":"free text"}`)), rec.emit)
		})
		synctest.Wait()
		id := rec.got()[0].TaskID
		time.Sleep(40 * time.Second) // one heartbeat at 25 s
		s.AddArtifact(ctx, id, artifact("note", "still thinking"))
		task := run.wait(t)
		if elapsed := time.Since(begin); elapsed != 610*time.Second {
			t.Fatalf("the stream lasted %v, want the maximum of 610s", elapsed)
		}
		if task.Status.State != StateSubmitted || len(task.Artifacts) != 1 {
			t.Fatalf("final task %+v", task)
		}
		evs := rec.got()
		var beats []time.Duration
		last := begin
		for i, e := range evs {
			if gap := e.at.Sub(last); gap > 25*time.Second {
				t.Fatalf("event %d (%s) came %v after the previous one", i, e, gap)
			}
			last = e.at
			if e.Heartbeat {
				if e.State != StateSubmitted || e.TaskID != id || *e.Progress != 0 {
					t.Fatalf("heartbeat %+v", e)
				}
				beats = append(beats, e.at.Sub(begin))
			}
		}
		// 25 s, then counted from the artifact at 40 s: 65, 90, … 590.
		want := []time.Duration{25 * time.Second}
		for d := 65 * time.Second; d < 610*time.Second; d += 25 * time.Second {
			want = append(want, d)
		}
		if fmt.Sprint(beats) != fmt.Sprint(want) {
			t.Fatalf("heartbeats at %v, want %v", beats, want)
		}
		if got := versions(t, evs); fmt.Sprint(got) != "[1 2]" {
			t.Fatalf("task event versions %v", got)
		}
	})
}

// tasks/resubscribe: the current state, then the stored events after
// afterVersion (all without it), then live ones, with no gap or duplicate.
func TestStreamResubscribe(t *testing.T) {
	for _, after := range []int64{-1, 0, 2, 3} {
		t.Run(fmt.Sprint("after=", after), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				s, _ := newService(t, ServiceOptions{})
				id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
				s.Transition(ctx, id, StateWorking, "started")
				s.AddArtifact(ctx, id, artifact("a1", "one"))
				rec := &recorder{}
				run := start(func() (*Task, error) {
					return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, after)), rec.emit)
				})
				synctest.Wait()
				s.AddArtifact(ctx, id, artifact("a2", "two"))
				s.Transition(ctx, id, StateCompleted, "")
				task := run.wait(t)
				evs := rec.got()
				if len(evs) == 0 || !evs[0].Current || evs[0].State != StateWorking || evs[0].Message != "started" {
					t.Fatalf("first event %v, want the current state", evs)
				}
				from := max(after, 0)
				if got, want := versions(t, evs), storedVersions(t, s, id, from); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("versions %v, want the stored ones after %d: %v (%s)", got, from, want, rec.summary())
				}
				if task.Status.State != StateCompleted || len(task.Artifacts) != 2 {
					t.Fatalf("final %+v", task)
				}
			})
		})
	}
}

// A requester whose stream broke resumes after the last version it saw and
// misses nothing, twice over.
func TestStreamResubscribeAfterDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newService(t, ServiceOptions{})
		first := &recorder{fail: 3} // the transport dies at the third event
		run := start(func() (*Task, error) {
			return streamJSON(ctx, s, alice, []byte(send(`{"text":"x"}`)), first.emit)
		})
		synctest.Wait()
		id := first.got()[0].TaskID
		s.Transition(ctx, id, StateWorking, "")
		s.AddArtifact(ctx, id, artifact("a1", "one"))
		run.wait(t)
		if got := first.summary(); got != "1:submitted 2:working" {
			t.Fatalf("first stream %s", got)
		}
		synctest.Wait() // the broker lets go of a canceled subscription in the background
		if s.Events().Subscribers(id) != 0 || s.OpenStreams() != 0 {
			t.Fatal("a dead stream kept its subscription or slot")
		}
		s.AddArtifact(ctx, id, artifact("a2", "two")) // while nobody listens

		second := &recorder{}
		run = start(func() (*Task, error) {
			return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 2)), second.emit)
		})
		synctest.Wait()
		s.Transition(ctx, id, StateCompleted, "")
		run.wait(t)
		seen := append(versions(t, first.got()), versions(t, second.got())...)
		if want := storedVersions(t, s, id, 0); fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("versions seen over two streams %v, want %v", seen, want)
		}
	})
}

// On a terminal task: the stored events, then the final response at once.
// On one in input_required, it waits for what comes next.
func TestStreamResubscribeStates(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
	s.Transition(ctx, id, StateWorking, "")
	s.Transition(ctx, id, StateCompleted, "")
	rec := &recorder{}
	task, err := resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, -1)), rec.emit)
	if err != nil || task.Status.State != StateCompleted {
		t.Fatalf("terminal: %v %v", task, err)
	}
	if got := rec.summary(); got != "current:completed 1:submitted 2:working 3:completed" {
		t.Fatalf("terminal task: %s", got)
	}

	synctest.Test(t, func(t *testing.T) {
		s, _ := newService(t, ServiceOptions{})
		id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
		s.Transition(ctx, id, StateWorking, "")
		s.Transition(ctx, id, StateInputRequired, "confirm?")
		rec := &recorder{}
		run := start(func() (*Task, error) {
			return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 3)), rec.emit)
		})
		synctest.Wait()
		if run.finished() {
			t.Fatal("a resubscription to a task waiting for input ended at once")
		}
		s.Transition(ctx, id, StateWorking, "approved")
		s.Transition(ctx, id, StateCompleted, "")
		run.wait(t)
		if got := rec.summary(); got != "current:input_required 4:working 5:completed" {
			t.Fatalf("events %s", got)
		}
	})
}

// A subscriber that stops reading is dropped by the broker without
// delaying the others; when it reads again its stream ends with the whole
// task.
func TestStreamStalledSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newService(t, ServiceOptions{EventBuffer: 2})
		id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
		gate := make(chan struct{})
		var stalledN int
		stalled := start(func() (*Task, error) {
			return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 1)), func(any) error {
				if stalledN++; stalledN > 1 { // the current state passes, then it stops reading
					<-gate
				}
				return nil
			})
		})
		healthy := &recorder{}
		run := start(func() (*Task, error) {
			return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 1)), healthy.emit)
		})
		synctest.Wait()
		// The healthy reader keeps up (it runs between two writes); the
		// stalled one's buffer of 2 fills and it is dropped. No write
		// waits for either.
		s.Transition(ctx, id, StateWorking, "")
		synctest.Wait()
		for i := range 6 {
			if _, err := s.AddArtifact(ctx, id, artifact(fmt.Sprint("a", i), "x")); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		s.Transition(ctx, id, StateCompleted, "")
		task := run.wait(t) // while the stalled one still blocks
		if got := fmt.Sprint(versions(t, healthy.got())); got != fmt.Sprint(storedVersions(t, s, id, 1)) {
			t.Fatalf("healthy subscriber got %v", got)
		}
		if task.Status.State != StateCompleted || stalled.finished() {
			t.Fatalf("healthy final %v; stalled finished %v", task.Status.State, stalled.finished())
		}
		close(gate)
		final := stalled.wait(t)
		if final.Status.State != StateCompleted || len(final.Artifacts) != 6 {
			t.Fatalf("stalled subscriber's final task: %s with %d artifacts", final.Status.State, len(final.Artifacts))
		}
		if stalledN >= 1+len(storedVersions(t, s, id, 1)) {
			t.Fatalf("the stalled subscriber got all %d events: it was not dropped", stalledN)
		}
	})
}

// A stream's emit may wait for its peer (a transport applies
// backpressure, up to its write timeout), so a stream holds no lock of the
// task while it emits: a resubscription whose emit blocks on the current
// state, or in its backlog, holds up no write of the task and no other
// stream of it. (Not in a synctest bubble: a goroutine waiting on a mutex
// is not durably blocked there, and the test would hang instead of
// failing.)
func TestStreamEmitHoldsNoLock(t *testing.T) {
	for _, blockAt := range []int{1, 2} { // the current state; the first stored event
		t.Run(fmt.Sprint("emit ", blockAt), func(t *testing.T) {
			ctx := context.Background()
			s, _ := newService(t, ServiceOptions{})
			id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
			s.AddArtifact(ctx, id, artifact("a0", "zero"))
			inEmit, gate := make(chan struct{}), make(chan struct{})
			n := 0
			blocked := start(func() (*Task, error) {
				return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 0)), func(any) error {
					if n++; n == blockAt {
						close(inEmit)
						<-gate
					}
					return nil
				})
			})
			<-inEmit
			released := false
			defer func() {
				if !released {
					close(gate)
				}
			}()
			other := &recorder{}
			run := start(func() (*Task, error) {
				return resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 0)), other.emit)
			})
			wrote := start(func() (*Task, error) {
				if _, err := s.Transition(ctx, id, StateWorking, ""); err != nil {
					return nil, err
				}
				if _, err := s.AddArtifact(ctx, id, artifact("a1", "one")); err != nil {
					return nil, err
				}
				return s.Transition(ctx, id, StateCompleted, "")
			})
			// A generous bound, not a measure: with a lock held across
			// emit these never finish.
			for name, r := range map[string]*running{"the writes": wrote, "the other stream": run} {
				select {
				case <-r.done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s did not finish while a stream's emit waited", name)
				}
			}
			wrote.wait(t)
			if task := run.wait(t); task.Status.State != StateCompleted {
				t.Fatalf("the other stream's final task: %s", task.Status.State)
			}
			released = true
			close(gate)
			if task := blocked.wait(t); task.Status.State != StateCompleted {
				t.Fatalf("the blocked stream's final task: %s", task.Status.State)
			}
		})
	}
}

// Streams are bounded per requester and in all; a refusal is 5002 with
// retryAfter, and a slot comes back when its stream ends.
func TestStreamLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s, _ := newService(t, ServiceOptions{MaxStreams: 2, MaxStreamsPerRequester: 1, MaxNewcomerStreams: 2})
		open := func(who string) *running {
			return start(func() (*Task, error) {
				return streamJSON(ctx, s, who, []byte(send(`{"text":"x"}`)), func(any) error { return nil })
			})
		}
		a := open(alice)
		synctest.Wait()
		_, err := streamJSON(ctx, s, alice, []byte(send(`{"text":"y"}`)), nil)
		wantSnap(t, err, snap.CodeRateLimitExceeded, map[string]any{"retryAfter": StreamRetryAfter, "scope": "requester", "limit": 1})
		b := open(bob)
		synctest.Wait()
		_, err = resubscribeJSON(ctx, s, operator, []byte(resubscribePayload("t", -1)), nil)
		wantSnap(t, err, snap.CodeRateLimitExceeded, map[string]any{"scope": "node", "limit": 2})
		if s.OpenStreams() != 2 || a.finished() || b.finished() {
			t.Fatalf("%d open", s.OpenStreams())
		}
		cancel()
		a.wait(t)
		b.wait(t)
		if st := s.streams.slots.Stats(); st.Open != 0 || st.Identities != 0 || st.Keys != 0 {
			t.Fatalf("after all ended: %+v", st)
		}
	})
}

// Requesters with no task history share MaxNewcomerStreams slots: a
// flood of fresh identities is refused (5002, scope "newcomers") while a
// requester who owns a task the node answered, or an operator, still gets
// a slot; a newcomer's slot comes back when its stream ends. A task still
// submitted is no history (Known): a fresh identity's first task does not
// make it known for its next ones.
func TestStreamNewcomers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s, _ := newService(t, ServiceOptions{MaxStreams: 4, MaxStreamsPerRequester: 4})
		first := mustSend(t, s, alice, send(`{"text":"my first task"}`))
		if s.Known(ctx, alice) {
			t.Fatal("alice, whose only task is submitted, is known")
		}
		if _, err := s.Transition(ctx, first.ID, StateCanceled, "canceled"); err != nil {
			t.Fatal(err)
		}
		if !s.Known(ctx, alice) {
			t.Fatal("alice, whose task the node answered, is not known")
		}
		known := mustSend(t, s, alice, send(`{"text":"my second task"}`))
		open := func(who string) *running {
			return start(func() (*Task, error) {
				return streamJSON(ctx, s, who, []byte(send(`{"text":"x"}`)), func(any) error { return nil })
			})
		}
		fresh := []*running{open(newcomer(1)), open(newcomer(2))}
		synctest.Wait()
		_, err := streamJSON(ctx, s, newcomer(3), []byte(send(`{"text":"y"}`)), nil)
		wantSnap(t, err, snap.CodeRateLimitExceeded, map[string]any{"retryAfter": StreamRetryAfter, "scope": "newcomers", "limit": 2})
		a := open(alice)
		op := start(func() (*Task, error) {
			return resubscribeJSON(ctx, s, operator, []byte(resubscribePayload(known.ID, -1)), func(any) error { return nil })
		})
		synctest.Wait()
		if s.OpenStreams() != 4 || a.finished() || op.finished() {
			t.Fatalf("%d streams open; the known requester's finished %v, the operator's %v", s.OpenStreams(), a.finished(), op.finished())
		}
		cancel()
		for _, r := range append(fresh, a, op) {
			r.wait(t)
		}
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		again := start(func() (*Task, error) {
			return streamJSON(ctx, s, newcomer(3), []byte(send(`{"text":"z"}`)), func(any) error { return nil })
		})
		synctest.Wait()
		if again.finished() || s.streams.slots.Stats().Newcomers != 1 {
			t.Fatalf("a newcomer once the others ended: finished %v, %+v", again.finished(), s.streams.slots.Stats())
		}
		cancel()
		again.wait(t)
	})
}

// newcomer returns the i-th address of a requester with no task history.
func newcomer(i int) string { return fmt.Sprintf("newcomer-%d", i) }

// The request is message/send's: the same errors, ownership and
// idempotency.
func TestStreamRequests(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	mine := mustSend(t, s, alice, send(`{"text":"x"}`))
	s.Transition(ctx, mine.ID, StateWorking, "")
	s.Transition(ctx, mine.ID, StateCompleted, "")
	nop := func(any) error { return nil }
	_, err := streamJSON(ctx, s, alice, []byte(sendMsg(`"messageId":"m1","role":"robot","parts":[{"text":"x"}]`)), nop)
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.message.role"})
	_, err = streamJSON(ctx, s, bob, []byte(continuePayload(mine.ID, "m2", "mine now")), nop)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": mine.ID})
	_, err = streamJSON(ctx, s, alice, []byte(continuePayload(mine.ID, "m2", "again")), nop)
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.taskId", "constraint": "state"})
	_, err = resubscribeJSON(ctx, s, bob, []byte(resubscribePayload(mine.ID, -1)), nop)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": mine.ID})
	// A member the params do not define is ignored, as SNAP's receivers must.
	_, err = resubscribeJSON(ctx, s, alice, []byte(`{"taskId":"x","after":1}`), nop)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": "x"})
	// An operator may watch any task.
	if task, err := resubscribeJSON(ctx, s, operator, []byte(resubscribePayload(mine.ID, -1)), nop); err != nil || task.ID != mine.ID {
		t.Fatalf("operator: %v", err)
	}

	// A repeated idempotency key streams the task it made, not a new one.
	synctest.Test(t, func(t *testing.T) {
		s, store := newService(t, ServiceOptions{StreamMaxDuration: time.Minute})
		p := []byte(`{"idempotencyKey":"k1","message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`)
		first, err := streamJSON(ctx, s, alice, p, nop)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		again, err := streamJSON(ctx, s, alice, p, rec.emit)
		if err != nil || again.ID != first.ID || store.Len() != 1 {
			t.Fatalf("again: %v %v (%d tasks)", again, err, store.Len())
		}
		if got := rec.summary(); !strings.HasPrefix(got, "1:submitted") {
			t.Fatalf("repeated key's stream: %s", got)
		}
	})
}

// Through the node's router and a snap.Server: events are signed event
// messages within the size limit (an artifact too large loses parts, then
// becomes a notice), then one final response with the whole task.
func TestStreamThroughServer(t *testing.T) {
	r := &recordingRunner{out: func(Job) (Outcome, error) {
		return Outcome{State: StateCompleted, Artifacts: []Artifact{
			artifact("small", "ok"),
			artifact("three", strings.Repeat("a", 700), strings.Repeat("b", 700), strings.Repeat("c", 700)),
			artifact("huge", strings.Repeat("z", 5000)),
		}}, nil
	}}
	svc, _ := newService(t, ServiceOptions{Runner: r})
	router := snap.NewRouter()
	svc.Register(router, nil)
	server, raw := testServer(t, router, 2500, "message/stream", proposalMessage(writeProposal))
	var events []streamEvent
	var sizes []int
	final := server.Serve(context.Background(), snap.Inbound{Raw: raw}, func(m *snap.Message) error {
		b, _ := m.MarshalJSON()
		sizes = append(sizes, len(b))
		if m.Type != snap.TypeEvent || m.Method != "message/stream" || m.Sig == "" {
			t.Fatalf("event envelope %s", b)
		}
		var e streamEvent
		json.Unmarshal(m.Payload, &e)
		events = append(events, e)
		return nil
	})
	var names []string
	for i, e := range events {
		if sizes[i] > 2500 {
			t.Fatalf("event %d is %d bytes, over the limit", i, sizes[i])
		}
		names = append(names, e.String())
	}
	// The notice replacing the huge artifact reads as a status line.
	if got := strings.Join(names, " "); got != "1:submitted 2:working 3:artifact:small 4:artifact:three 5:working 6:completed" {
		t.Fatalf("events %s", got)
	}
	if a := events[3].Artifact; a == nil || !a.Partial || len(a.Parts) != 2 {
		t.Fatalf("three-part artifact in 2500 bytes: %+v, want two parts, partial", a)
	}
	if n := events[4]; n.Artifact != nil || n.Version != 5 || !strings.Contains(n.Message, "huge") || n.State != StateWorking {
		t.Fatalf("huge artifact: %+v, want a notice at version 5", n)
	}
	if fmt.Sprint(versions(t, events)) != "[1 2 3 4 5 6]" {
		t.Fatalf("versions %v", versions(t, events))
	}
	// The whole task is larger than the limit: the final response says so.
	if final.Type != snap.TypeResponse || !strings.Contains(string(final.Payload), `"code":5001`) {
		t.Fatalf("final %s", final.Payload)
	}
	// With room for it, the final response is the whole task.
	server, raw = testServer(t, router, 0, "message/stream", proposalMessage(writeProposal))
	n := 0
	final = server.Serve(context.Background(), snap.Inbound{Raw: raw}, func(*snap.Message) error { n++; return nil })
	var resp TaskResponse
	if err := json.Unmarshal(final.Payload, &resp); err != nil || resp.Task.Status.State != StateCompleted || len(resp.Task.Artifacts) != 3 || n != 6 {
		t.Fatalf("final %s after %d events (%v)", final.Payload, n, err)
	}
}

// testServer returns a snap.Server of a node on router with the size
// limit, and a request from alice's key to it.
func testServer(t *testing.T, router *snap.Router, limit int, method, payload string) (*snap.Server, []byte) {
	t.Helper()
	node, _ := identity.FromHex(strings.Repeat("0b", 32))
	peer, _ := identity.FromHex(strings.Repeat("0a", 32))
	self := node.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: node, Router: router, MaxResponseSize: limit,
		Logger:    slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: method,
		From: peer.Address(identity.Mainnet), To: self, Payload: []byte(payload), Timestamp: time.Now().Unix()}
	if err := m.Sign(peer); err != nil {
		t.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	return server, raw
}

// The mainnet and testnet addresses of one key (one Nostr key signs for
// both) share the key's streams: past MaxStreamsPerKey together, 5002
// with scope "key".
func TestStreamPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		s, _ := newService(t, ServiceOptions{MaxStreams: 8, MaxStreamsPerRequester: 2, MaxStreamsPerKey: 2})
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		main, test := k.Address(identity.Mainnet), k.Address(identity.Testnet)
		open := func(who string) *running {
			return start(func() (*Task, error) {
				return streamJSON(ctx, s, who, []byte(send(`{"text":"x"}`)), func(any) error { return nil })
			})
		}
		a, b := open(main), open(strings.ToUpper(test))
		synctest.Wait()
		_, err = streamJSON(ctx, s, test, []byte(send(`{"text":"y"}`)), nil)
		wantSnap(t, err, snap.CodeRateLimitExceeded, map[string]any{"retryAfter": StreamRetryAfter, "scope": "key", "limit": 2})
		if a.finished() || b.finished() {
			t.Fatal("a stream ended")
		}
		cancel()
		a.wait(t)
		b.wait(t)
	})
}

// listSpy records the filters of the store's List calls.
type listSpy struct {
	Store
	mu      sync.Mutex
	filters []Filter
}

func (l *listSpy) List(ctx context.Context, f Filter) ([]*Task, error) {
	l.mu.Lock()
	l.filters = append(l.filters, f)
	l.mu.Unlock()
	return l.Store.List(ctx, f)
}

// Whether a stream's requester is known (owns a task) is read without
// the task's history and artifacts: before, every stream request read the
// requester's oldest task whole, up to MaxHistory messages and
// MaxArtifacts artifacts of up to the body limit each, only to see that
// there was one.
func TestStreamSlotReadsNoTaskContent(t *testing.T) {
	spy := &listSpy{Store: NewMemoryStore(MemoryStoreOptions{MaxTasks: 100})}
	s := NewService(spy, ServiceOptions{Now: fixedClock(), Operators: []string{operator}})
	task := mustSend(t, s, alice, send(`{"text":"my first task"}`))
	spy.mu.Lock()
	spy.filters = nil
	spy.mu.Unlock()
	if _, err := resubscribeJSON(t.Context(), s, alice, []byte(resubscribePayload(task.ID, -1)), func(any) error { return errors.New("stop") }); err != nil {
		t.Fatal(err)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.filters) == 0 {
		t.Fatal("no List call: the test no longer sees how a requester is known")
	}
	for _, f := range spy.filters {
		if !f.Brief {
			t.Errorf("List(%+v): the tasks read whole", f)
		}
	}
}

// readSpy records the largest read of a task's events the store was
// asked for: the events and their bytes (JSON) of one call.
type readSpy struct {
	Store
	mu                  sync.Mutex
	maxEvents, maxBytes int
	calls               int
}

func (r *readSpy) record(evs []Event) {
	n := 0
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		n += len(b)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.maxEvents = max(r.maxEvents, len(evs))
	r.maxBytes = max(r.maxBytes, n)
}

func (r *readSpy) Events(ctx context.Context, id string, after int64) ([]Event, error) {
	evs, err := r.Store.Events(ctx, id, after)
	r.record(evs)
	return evs, err
}

func (r *readSpy) EventsPage(ctx context.Context, id string, after int64, limit, maxBytes int) ([]Event, error) {
	evs, err := r.Store.(interface {
		EventsPage(context.Context, string, int64, int, int) ([]Event, error)
	}).EventsPage(ctx, id, after, limit, maxBytes)
	r.record(evs)
	return evs, err
}

// A resubscription to a task holding many events, some large, reads its
// backlog from the store in pages, a bounded number of events and bytes
// a read, and emits every event once, in order, then the live ones (one
// added while the backlog is emitted): before, the whole backlog (up to
// MaxArtifacts artifacts of the spec's size each) was read into memory
// at once, for every stream.
func TestStreamResubscribeReadsBacklogInPages(t *testing.T) {
	const (
		artifacts = 90
		big       = 300 << 10 // bytes of every tenth artifact
		maxEvents = 32        // the most events one read may hold
		maxBytes  = 2 << 20   // the most bytes one read may hold
	)
	ctx := context.Background()
	spy := &readSpy{Store: NewMemoryStore(MemoryStoreOptions{MaxTasks: 10})}
	s := NewService(spy, ServiceOptions{Now: fixedClock(), Operators: []string{operator}})
	id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
	if _, err := s.Transition(ctx, id, StateWorking, "started"); err != nil {
		t.Fatal(err)
	}
	for i := range artifacts {
		text := fmt.Sprint("part ", i)
		if i%10 == 0 {
			text = strings.Repeat("b", big)
		}
		if _, err := s.AddArtifact(ctx, id, artifact(fmt.Sprint("a", i), text)); err != nil {
			t.Fatal(err)
		}
	}
	spy.mu.Lock()
	spy.maxEvents, spy.maxBytes, spy.calls = 0, 0, 0
	spy.mu.Unlock()
	rec := &recorder{}
	emitted := 0
	emit := func(p any) error {
		emitted++
		if emitted == 40 { // mid-backlog: a live event, then the end
			if _, err := s.AddArtifact(ctx, id, artifact("live", "late")); err != nil {
				t.Error(err)
			}
			if _, err := s.Transition(ctx, id, StateCompleted, "done"); err != nil {
				t.Error(err)
			}
		}
		return rec.emit(p)
	}
	task, err := resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 0)), emit)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.State != StateCompleted || len(task.Artifacts) != artifacts+1 {
		t.Fatalf("final task %s with %d artifacts", task.Status.State, len(task.Artifacts))
	}
	spy.mu.Lock()
	if spy.maxEvents > maxEvents || spy.maxBytes > maxBytes {
		t.Errorf("a read of %d events, %d bytes; want at most %d events, %d bytes a read (%d reads)",
			spy.maxEvents, spy.maxBytes, maxEvents, maxBytes, spy.calls)
	}
	spy.mu.Unlock()
	got, want := versions(t, rec.got()), storedVersions(t, s, id, 0)
	if len(want) != artifacts+4 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("versions %v, want every stored one once: %v", got, want)
	}
}

// prunedAfterFirstPage is a store whose task the retention deletes once
// the first page of its events was read.
type prunedAfterFirstPage struct {
	Store
	mu    sync.Mutex
	pages int
}

func (p *prunedAfterFirstPage) EventsPage(ctx context.Context, id string, after int64, limit, maxBytes int) ([]Event, error) {
	p.mu.Lock()
	p.pages++
	n := p.pages
	p.mu.Unlock()
	if n > 1 {
		return nil, fmt.Errorf("gone: %w", ErrNotFound)
	}
	return p.Store.EventsPage(ctx, id, after, limit, maxBytes)
}

// A task deleted while its backlog is emitted ends the stream with 1001,
// as one deleted before it began.
func TestStreamResubscribeDeletedMidBacklog(t *testing.T) {
	ctx := context.Background()
	store := &prunedAfterFirstPage{Store: NewMemoryStore(MemoryStoreOptions{MaxTasks: 10})}
	s := NewService(store, ServiceOptions{Now: fixedClock(), Operators: []string{operator}})
	id := mustSend(t, s, alice, send(`{"text":"x"}`)).ID
	for i := range backlogPageEvents + 1 {
		if _, err := s.AddArtifact(ctx, id, artifact(fmt.Sprint("a", i), "r")); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	_, err := resubscribeJSON(ctx, s, alice, []byte(resubscribePayload(id, 0)), rec.emit)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": id})
	if got := len(versions(t, rec.got())); got != backlogPageEvents {
		t.Fatalf("%d events emitted, want the first page's %d", got, backlogPageEvents)
	}
}
