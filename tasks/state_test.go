package tasks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// specTable is the SNAP specification's task state machine written out
// again, so that the tests do not check CanTransition against itself.
var specTable = map[State]map[State]bool{
	StateSubmitted:     {StateWorking: true, StateFailed: true, StateCanceled: true},
	StateWorking:       {StateCompleted: true, StateFailed: true, StateCanceled: true, StateInputRequired: true},
	StateInputRequired: {StateWorking: true, StateFailed: true, StateCanceled: true},
	StateCompleted:     {},
	StateFailed:        {},
	StateCanceled:      {},
}

func TestStateMachineTable(t *testing.T) {
	all := append(States(), "", "done", "SUBMITTED")
	for _, from := range all {
		for _, to := range all {
			want := specTable[from][to]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%q, %q) = %v, want %v", from, to, got, want)
			}
			err := CheckTransition(from, to)
			if want != (err == nil) || (!want && !errors.Is(err, ErrIllegalTransition)) {
				t.Errorf("CheckTransition(%q, %q) = %v", from, to, err)
			}
		}
	}
	// The state machine's rules: terminal states never change, submitted
	// never goes straight to completed or input_required, and any
	// non-terminal state may fail or be canceled.
	for _, s := range []State{StateCompleted, StateFailed, StateCanceled} {
		if !s.Terminal() {
			t.Errorf("%s is not terminal", s)
		}
	}
	if CanTransition(StateSubmitted, StateCompleted) || CanTransition(StateSubmitted, StateInputRequired) {
		t.Error("submitted may not go straight to completed or input_required")
	}
	for _, s := range []State{StateSubmitted, StateWorking, StateInputRequired} {
		if s.Terminal() || !CanTransition(s, StateFailed) || !CanTransition(s, StateCanceled) {
			t.Errorf("%s must be able to fail or be canceled", s)
		}
	}
}

func TestCheckUpdateTerminal(t *testing.T) {
	cur := &Task{ID: "t", Status: Status{State: StateCompleted}}
	err := CheckUpdate(cur, &Task{ID: "t", Status: Status{State: StateWorking}})
	if !errors.Is(err, ErrTerminal) || !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("completed → working: %v", err)
	}
	err = CheckUpdate(cur, &Task{ID: "t", Status: Status{State: StateCompleted, Message: "x"}})
	if !errors.Is(err, ErrTerminal) || errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("completed → completed: %v", err)
	}
	err = CheckUpdate(&Task{ID: "t", Status: Status{State: StateWorking}}, &Task{ID: "t", Status: Status{State: "paused"}})
	if !errors.Is(err, ErrInvalidTask) {
		t.Fatalf("unknown state: %v", err)
	}
}

// TestStorePropertyVersions drives MemoryStore with random writes and checks
// each against a model: a write is accepted exactly when the model says it
// is legal, and the version moves by exactly one per accepted write and
// never otherwise.
func TestStorePropertyVersions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 0x5eed))
	ctx := context.Background()
	s := NewMemoryStore(MemoryStoreOptions{})
	states := States()
	const sequences, steps = 3000, 40
	accepted, refused := 0, 0
	for seq := range sequences {
		start := states[rng.IntN(len(states))]
		task := &Task{ID: fmt.Sprintf("p%d", seq), Owner: "o", Status: Status{State: start, Timestamp: time.Unix(0, 0)}}
		cur, err := s.Create(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		state, version, artifacts := start, int64(1), 0
		for step := range steps {
			var (
				got   *Task
				legal bool
			)
			expected := version
			stale := rng.IntN(10) == 0
			if stale {
				expected = version - 1 - int64(rng.IntN(2))
			}
			switch op := rng.IntN(4); op {
			case 0, 1: // a status update, to a random state (sometimes the same)
				to := states[rng.IntN(len(states))]
				next := cur.Clone()
				next.Status = Status{State: to, Timestamp: time.Unix(int64(step), 0)}
				got, err = s.Update(ctx, next, expected)
				legal = !state.Terminal() && (to == state || specTable[state][to])
				if legal && !stale {
					state = to
				}
				if !legal && !stale && !errors.Is(err, ErrIllegalTransition) && !errors.Is(err, ErrTerminal) {
					t.Fatalf("seq %d step %d: %s → %s: err = %v, want a state machine error", seq, step, state, to, err)
				}
			case 2:
				m := Message{MessageID: fmt.Sprintf("m%d", step), Role: RoleUser, Parts: []Part{TextPart("x")}}
				got, err = s.AppendHistory(ctx, cur.ID, expected, m)
				legal = !state.Terminal()
			case 3:
				a := Artifact{ArtifactID: fmt.Sprintf("a%d", step), Parts: []Part{TextPart("x")}}
				got, err = s.AppendArtifact(ctx, cur.ID, expected, a)
				legal = !state.Terminal() && artifacts < MaxArtifacts
				if legal && !stale {
					artifacts++
				}
			}
			if stale {
				if !errors.Is(err, ErrVersionConflict) {
					t.Fatalf("seq %d step %d: stale write: err = %v, want ErrVersionConflict", seq, step, err)
				}
				legal = false
			}
			if legal != (err == nil) {
				t.Fatalf("seq %d step %d in %s: legal=%v, err=%v", seq, step, state, legal, err)
			}
			after, gerr := s.Get(ctx, cur.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if legal {
				accepted++
				version++
				if got.Version != version {
					t.Fatalf("seq %d step %d: returned version %d, want %d", seq, step, got.Version, version)
				}
				cur = got
			} else {
				refused++
			}
			if after.Version != version || after.Status.State != state || len(after.Artifacts) != artifacts {
				t.Fatalf("seq %d step %d: stored v%d %s %d artifacts, model v%d %s %d", seq, step,
					after.Version, after.Status.State, len(after.Artifacts), version, state, artifacts)
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("degenerate run: %d accepted, %d refused", accepted, refused)
	}
}

// TestServicePropertyEvents drives a Service with random worker transitions,
// artifacts, continuations and cancels, and checks legality, versions and the
// events a subscriber receives.
func TestServicePropertyEvents(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 1010))
	ctx := context.Background()
	svc := NewService(NewMemoryStore(MemoryStoreOptions{}), ServiceOptions{EventBuffer: 256, Now: fixedClock()})
	states := States()
	const owner = "bc1powner"
	for seq := range 1000 {
		created, err := sendJSON(ctx, svc, owner, []byte(send(`{"text":"go"}`)))
		if err != nil {
			t.Fatal(err)
		}
		_, events, err := svc.Subscribe(ctx, owner, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		state, version := StateSubmitted, int64(1)
		var want []Event // the events the model expects
		for step := range 30 {
			var got *Task
			accepted, stateChanged, unchanged := false, false, false
			switch op := rng.IntN(6); op {
			case 0, 1, 2:
				to := states[rng.IntN(len(states))]
				got, err = svc.Transition(ctx, created.ID, to, "")
				accepted = !state.Terminal() && specTable[state][to]
				if accepted {
					state, stateChanged = to, true
				} else if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("seq %d step %d: %s → %s: err = %v", seq, step, state, to, err)
				}
			case 3:
				a := Artifact{ArtifactID: fmt.Sprintf("a%d", step), Parts: []Part{TextPart("x")}}
				got, err = svc.AddArtifact(ctx, created.ID, a)
				accepted = !state.Terminal()
				if accepted {
					want = append(want, Event{TaskID: created.ID, Version: version + 1, Kind: EventArtifact, Artifact: &a})
				}
			case 4:
				payload := fmt.Sprintf(`{"taskId":%q,"message":{"messageId":"m%d","role":"user","parts":[{"text":"more"}]}}`, created.ID, step)
				got, err = sendJSON(ctx, svc, owner, []byte(payload))
				accepted = !state.Terminal()
				if accepted && state == StateInputRequired {
					state, stateChanged = StateWorking, true
				}
				if !accepted && !errors.Is(err, snap.CodeInvalidPayload) {
					t.Fatalf("seq %d step %d: continue a %s task: err = %v", seq, step, state, err)
				}
			case 5:
				got, err = cancelJSON(ctx, svc, owner, []byte(fmt.Sprintf(`{"taskId":%q}`, created.ID)))
				accepted = !state.Terminal()
				switch {
				case accepted:
					state, stateChanged = StateCanceled, true
				case state == StateCanceled:
					unchanged = true
					if err != nil || got.Version != version {
						t.Fatalf("seq %d step %d: cancel twice: v%d, %v", seq, step, got.Version, err)
					}
				case !errors.Is(err, snap.CodeTaskNotCancelable):
					t.Fatalf("seq %d step %d: cancel a %s task: err = %v", seq, step, state, err)
				}
			}
			if (accepted || unchanged) != (err == nil) {
				t.Fatalf("seq %d step %d: accepted=%v err=%v", seq, step, accepted, err)
			}
			if accepted {
				version++
				if got.Version != version || got.Status.State != state {
					t.Fatalf("seq %d step %d: got v%d %s, want v%d %s", seq, step, got.Version, got.Status.State, version, state)
				}
			}
			if stateChanged {
				want = append(want, Event{TaskID: created.ID, Version: version, Kind: EventStatus, Status: &Status{State: state}})
			}
		}
		// Collect what was delivered: the channel is closed after a final
		// event; otherwise drain what is buffered.
		var gotEvents []Event
	drain:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					break drain
				}
				gotEvents = append(gotEvents, ev)
			default:
				break drain
			}
		}
		if len(gotEvents) != len(want) {
			t.Fatalf("seq %d: %d events, want %d", seq, len(gotEvents), len(want))
		}
		for i, ev := range gotEvents {
			w := want[i]
			if ev.TaskID != w.TaskID || ev.Version != w.Version || ev.Kind != w.Kind {
				t.Fatalf("seq %d event %d: %+v, want %+v", seq, i, ev, w)
			}
			if ev.Kind == EventStatus && ev.Status.State != w.Status.State {
				t.Fatalf("seq %d event %d: state %s, want %s", seq, i, ev.Status.State, w.Status.State)
			}
			if ev.Kind == EventArtifact && ev.Artifact.ArtifactID != w.Artifact.ArtifactID {
				t.Fatalf("seq %d event %d: artifact %s, want %s", seq, i, ev.Artifact.ArtifactID, w.Artifact.ArtifactID)
			}
		}
		if state.Terminal() {
			if _, open := <-events; open {
				t.Fatalf("seq %d: subscription open after the final event", seq)
			}
		}
	}
}

// fixedClock returns a clock that advances a millisecond per reading.
func fixedClock() func() time.Time {
	var n atomic.Int64
	return func() time.Time {
		return time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC).Add(time.Duration(n.Add(1)) * time.Millisecond)
	}
}
