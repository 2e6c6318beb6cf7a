package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

const (
	alice    = "bc1palice"
	bob      = "bc1pbob"
	operator = "bc1poperator"
)

func newService(t testing.TB, opts ServiceOptions) (*Service, *MemoryStore) {
	t.Helper()
	store := NewMemoryStore(MemoryStoreOptions{MaxTasks: 1000})
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	if opts.Operators == nil {
		opts.Operators = []string{operator}
	}
	return NewService(store, opts), store
}

func mustSend(t testing.TB, s *Service, owner, payload string) *Task {
	t.Helper()
	task, err := sendJSON(context.Background(), s, owner, []byte(payload))
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	return task
}

func continuePayload(taskID, msgID, text string) string {
	return fmt.Sprintf(`{"taskId":%q,"message":{"messageId":%q,"role":"user","parts":[{"text":%q}]}}`, taskID, msgID, text)
}

func getPayload(taskID string) string { return fmt.Sprintf(`{"taskId":%q}`, taskID) }

// wantSnap asserts err is a *snap.Error with the code and data members.
func wantSnap(t *testing.T, err error, code snap.Code, data map[string]any) *snap.Error {
	t.Helper()
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("err = %v, want snap %d", err, code)
	}
	for k, v := range data {
		if fmt.Sprint(se.Data[k]) != fmt.Sprint(v) {
			t.Fatalf("data[%s] = %v, want %v (%v)", k, se.Data[k], v, se)
		}
	}
	return se
}

var idRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)

func TestSendMessageNewTask(t *testing.T) {
	s, _ := newService(t, ServiceOptions{Now: func() time.Time {
		return time.Date(2026, 2, 4, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	}})
	task := mustSend(t, s, alice, send(`{"text":"summarize the README"}`))
	switch {
	case !idRE.MatchString(task.ID) || !idRE.MatchString(task.ContextID) || task.ID == task.ContextID:
		t.Fatalf("ids %q %q", task.ID, task.ContextID)
	case task.Status.State != StateSubmitted:
		t.Fatalf("state %s, want submitted (free text waits for a worker)", task.Status.State)
	case !task.Status.Timestamp.Equal(time.Date(2026, 2, 4, 10, 0, 0, 123456000, time.UTC)):
		t.Fatalf("timestamp %v: want the clock's, in UTC, to the microsecond", task.Status.Timestamp)
	case len(task.History) != 1 || task.History[0].MessageID != "m1" || *task.History[0].Parts[0].Text != "summarize the README":
		t.Fatalf("history %+v", task.History)
	case task.Owner != alice || task.Version != 1 || len(task.Artifacts) != 0 || task.Metadata != nil:
		t.Fatalf("owner %q version %d artifacts %d metadata %v", task.Owner, task.Version, len(task.Artifacts), task.Metadata)
	}
	if err := task.Validate(); err != nil {
		t.Fatalf("task breaks the schema: %v", err)
	}
	b, _ := json.Marshal(task)
	if !strings.Contains(string(b), `"timestamp":"2026-02-04T10:00:00.123456Z"`) {
		t.Fatalf("JSON %s", b)
	}

	// Every new task gets its own context, also for the same requester.
	again := mustSend(t, s, alice, send(`{"text":"and the LICENSE"}`))
	other := mustSend(t, s, bob, send(`{"text":"hi"}`))
	if again.ID == task.ID || again.ContextID == task.ContextID || other.ContextID == task.ContextID {
		t.Fatal("contexts shared between tasks")
	}
}

func TestSendMessageProposalStaysSubmitted(t *testing.T) {
	s, _ := newService(t, ServiceOptions{})
	for _, data := range []string{
		`{"schema_version":"1.0.0","action":"read_file","reasoning":"r","id":"6f1c1f64-52b4-4bd4-9c55-5d7b2b1a0a3e","args":{"path":"/sandbox/a"}}`,
		`{"descriptor_version":"1.0.0","action_type":"file_write"}`,
		`{"schema_version":"9.0.0","action":"run_command"}`,
	} {
		task := mustSend(t, s, alice, send(`{"data":`+data+`,"mediaType":"application/json"}`))
		if task.Status.State != StateSubmitted || task.Metadata != nil || len(task.Artifacts) != 0 || len(task.History) != 1 || task.Status.Message != "" {
			t.Fatalf("proposal task: %+v", task)
		}
		if string(task.History[0].Parts[0].Data) != data {
			t.Fatalf("data kept as %s", task.History[0].Parts[0].Data)
		}
	}
}

func TestSendMessageContinue(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"one"}`))

	// submitted: the message joins the history, the state stays.
	got := mustSend(t, s, alice, continuePayload(task.ID, "m2", "two"))
	if got.Status.State != StateSubmitted || len(got.History) != 2 || got.History[1].MessageID != "m2" || got.Version != 2 || got.ContextID != task.ContextID {
		t.Fatalf("continue submitted: %+v", got)
	}

	// input_required → working.
	if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, task.ID, StateInputRequired, "which file?"); err != nil {
		t.Fatal(err)
	}
	got = mustSend(t, s, alice, continuePayload(task.ID, "m3", "README.md"))
	if got.Status.State != StateWorking || got.Status.Message != "" || len(got.History) != 3 || got.Version != 5 || got.ContextID != task.ContextID {
		t.Fatalf("continue input_required: %+v", got)
	}

	// working: appended, still working.
	got = mustSend(t, s, alice, continuePayload(task.ID, "m4", "thanks"))
	if got.Status.State != StateWorking || len(got.History) != 4 {
		t.Fatalf("continue working: %+v", got)
	}
}

func TestSendMessageContinueTerminal(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	for _, end := range []State{StateCompleted, StateFailed, StateCanceled} {
		task := mustSend(t, s, alice, send(`{"text":"one"}`))
		if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transition(ctx, task.ID, end, ""); err != nil {
			t.Fatal(err)
		}
		_, err := sendJSON(ctx, s, alice, []byte(continuePayload(task.ID, "m2", "more")))
		wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.taskId", "constraint": "state", "received": string(end)})
		after, _ := getJSON(ctx, s, alice, []byte(getPayload(task.ID)))
		if len(after.History) != 1 || after.Status.State != end {
			t.Fatalf("refused continuation changed the task: %+v", after)
		}
	}
}

func TestOwnership(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"mine"}`))
	notFound := map[string]any{"taskId": task.ID}

	_, err := sendJSON(ctx, s, bob, []byte(continuePayload(task.ID, "m2", "hijack")))
	wantSnap(t, err, snap.CodeTaskNotFound, notFound)
	_, err = getJSON(ctx, s, bob, []byte(getPayload(task.ID)))
	wantSnap(t, err, snap.CodeTaskNotFound, notFound)
	_, err = cancelJSON(ctx, s, bob, []byte(getPayload(task.ID)))
	wantSnap(t, err, snap.CodeTaskNotFound, notFound)
	_, _, err = s.Subscribe(ctx, bob, task.ID)
	wantSnap(t, err, snap.CodeTaskNotFound, notFound)

	// The answer for another's task is the answer for no task.
	_, errNone := getJSON(ctx, s, bob, []byte(getPayload("no-such-task")))
	se := wantSnap(t, errNone, snap.CodeTaskNotFound, map[string]any{"taskId": "no-such-task"})
	if se.Message != "task not found" || len(se.Data) != 1 {
		t.Fatalf("1001 carries more than the task id: %v", se)
	}
	for _, p := range []func() error{
		func() error {
			_, err := sendJSON(ctx, s, alice, []byte(continuePayload("no-such-task", "m", "x")))
			return err
		},
		func() error { _, err := cancelJSON(ctx, s, alice, []byte(getPayload("no-such-task"))); return err },
	} {
		wantSnap(t, p(), snap.CodeTaskNotFound, map[string]any{"taskId": "no-such-task"})
	}

	after, err := getJSON(ctx, s, alice, []byte(getPayload(task.ID)))
	if err != nil || after.Version != 1 || after.Status.State != StateSubmitted {
		t.Fatalf("another requester changed the task: %+v %v", after, err)
	}
}

func TestOperator(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))
	if got, err := getJSON(ctx, s, operator, []byte(getPayload(task.ID))); err != nil || got.ID != task.ID {
		t.Fatalf("operator get: %v", err)
	}
	// An operator reads and cancels, but does not speak for the owner.
	_, err := sendJSON(ctx, s, operator, []byte(continuePayload(task.ID, "m2", "x")))
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": task.ID})
	got, err := cancelJSON(ctx, s, operator, []byte(getPayload(task.ID)))
	if err != nil || got.Status.State != StateCanceled || got.Status.Message != "canceled by an operator" {
		t.Fatalf("operator cancel: %+v %v", got, err)
	}
	if !s.IsOperator(operator) || s.IsOperator(alice) {
		t.Fatal("IsOperator")
	}
}

// SetOperators takes effect for the next request: a removed operator
// reads another's task no more, an added one does.
func TestSetOperators(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))
	if _, err := getJSON(ctx, s, operator, []byte(getPayload(task.ID))); err != nil {
		t.Fatalf("operator get: %v", err)
	}
	s.SetOperators([]string{bob})
	_, err := getJSON(ctx, s, operator, []byte(getPayload(task.ID)))
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": task.ID})
	if got, err := getJSON(ctx, s, bob, []byte(getPayload(task.ID))); err != nil || got.ID != task.ID {
		t.Fatalf("added operator get: %v", err)
	}
	if s.IsOperator(operator) || !s.IsOperator(bob) {
		t.Fatal("IsOperator after SetOperators")
	}
}

// ServiceOptions.IsOperator decides who is an operator, asked at each
// request, instead of ServiceOptions.Operators; SetOperators replaces it.
func TestServiceAsksIsOperator(t *testing.T) {
	ctx := context.Background()
	var ops atomic.Pointer[string]
	first, then := bob, operator
	ops.Store(&first)
	s, _ := newService(t, ServiceOptions{IsOperator: func(addr string) bool { return addr == *ops.Load() }})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))
	_, err := getJSON(ctx, s, operator, []byte(getPayload(task.ID)))
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": task.ID})
	if got, err := getJSON(ctx, s, bob, []byte(getPayload(task.ID))); err != nil || got.ID != task.ID {
		t.Fatalf("get by the operator IsOperator names: %v", err)
	}
	ops.Store(&then)
	if s.IsOperator(bob) || !s.IsOperator(operator) {
		t.Fatal("IsOperator does not follow ServiceOptions.IsOperator")
	}
	s.SetOperators([]string{alice})
	if s.IsOperator(operator) || !s.IsOperator(alice) {
		t.Fatal("SetOperators did not replace ServiceOptions.IsOperator")
	}
}

func TestGetTaskHistoryLength(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"m1"}`))
	for i := 2; i <= 5; i++ {
		mustSend(t, s, alice, continuePayload(task.ID, fmt.Sprintf("m%d", i), "x"))
	}
	ids := func(tk *Task) string {
		var out []string
		for _, m := range tk.History {
			out = append(out, m.MessageID)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		payload, want string
	}{
		{getPayload(task.ID), "m1,m2,m3,m4,m5"},
		{fmt.Sprintf(`{"taskId":%q,"historyLength":0}`, task.ID), ""},
		{fmt.Sprintf(`{"taskId":%q,"historyLength":2}`, task.ID), "m4,m5"},
		{fmt.Sprintf(`{"taskId":%q,"historyLength":5}`, task.ID), "m1,m2,m3,m4,m5"},
		{fmt.Sprintf(`{"taskId":%q,"historyLength":1000}`, task.ID), "m1,m2,m3,m4,m5"},
	} {
		got, err := getJSON(ctx, s, alice, []byte(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		if ids(got) != c.want {
			t.Errorf("%s: history %q, want %q", c.payload, ids(got), c.want)
		}
	}
	got, _ := getJSON(ctx, s, alice, []byte(fmt.Sprintf(`{"taskId":%q,"historyLength":0}`, task.ID)))
	if b, _ := json.Marshal(got); strings.Contains(string(b), "history") {
		t.Fatalf("historyLength 0 still sends a history: %s", b)
	}
	// The stored task keeps everything.
	full, _ := getJSON(ctx, s, alice, []byte(getPayload(task.ID)))
	if len(full.History) != 5 {
		t.Fatal("trimming a response trimmed the task")
	}
	_, err := getJSON(ctx, s, alice, []byte(fmt.Sprintf(`{"taskId":%q,"historyLength":1001}`, task.ID)))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.historyLength", "constraint": "maximum"})
}

func TestCancelTask(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})

	for _, from := range []State{StateSubmitted, StateWorking, StateInputRequired} {
		task := mustSend(t, s, alice, send(`{"text":"x"}`))
		switch from {
		case StateInputRequired:
			if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil {
				t.Fatal(err)
			}
			fallthrough
		case StateWorking:
			if _, err := s.Transition(ctx, task.ID, from, ""); err != nil {
				t.Fatal(err)
			}
		}
		got, err := cancelJSON(ctx, s, alice, []byte(getPayload(task.ID)))
		if err != nil || got.Status.State != StateCanceled || got.Status.Message != "canceled by the requester" {
			t.Fatalf("cancel %s: %+v %v", from, got, err)
		}
		// Idempotent: the same task, unchanged.
		again, err := cancelJSON(ctx, s, alice, []byte(getPayload(task.ID)))
		if err != nil || again.Version != got.Version || !again.Status.Timestamp.Equal(got.Status.Timestamp) {
			t.Fatalf("second cancel: %+v %v", again, err)
		}
	}

	for _, end := range []State{StateCompleted, StateFailed} {
		task := mustSend(t, s, alice, send(`{"text":"x"}`))
		if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil {
			t.Fatal(err)
		}
		done, err := s.Transition(ctx, task.ID, end, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = cancelJSON(ctx, s, alice, []byte(getPayload(task.ID)))
		wantSnap(t, err, snap.CodeTaskNotCancelable, map[string]any{"taskId": task.ID, "state": string(end)})
		after, _ := getJSON(ctx, s, alice, []byte(getPayload(task.ID)))
		if after.Version != done.Version || after.Status.State != end {
			t.Fatal("refused cancel changed the task")
		}
	}

	_, err := cancelJSON(ctx, s, alice, []byte(`{}`))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.taskId", "constraint": "required"})
}

func TestIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	s, store := newService(t, ServiceOptions{})
	withKey := func(key, text string) string {
		return `{"idempotencyKey":"` + key + `",` + send(`{"text":"` + text + `"}`)[1:]
	}
	first := mustSend(t, s, alice, withKey("k1", "one"))
	retry := mustSend(t, s, alice, withKey("k1", "one again"))
	if retry.ID != first.ID || len(retry.History) != 1 || retry.Version != 1 || store.Len() != 1 {
		t.Fatalf("retry with the same key made a change: %+v (store %d)", retry, store.Len())
	}
	// The key names the task as it is now.
	if _, err := s.Transition(ctx, first.ID, StateWorking, ""); err != nil {
		t.Fatal(err)
	}
	if retry := mustSend(t, s, alice, withKey("k1", "x")); retry.ID != first.ID || retry.Status.State != StateWorking {
		t.Fatalf("retry after a change: %+v", retry)
	}
	// Keys are per requester.
	bobs := mustSend(t, s, bob, withKey("k1", "bob's"))
	if bobs.ID == first.ID || bobs.Owner != bob {
		t.Fatal("a key of alice returned her task to bob")
	}
	// Another key is another task.
	if other := mustSend(t, s, alice, withKey("k2", "two")); other.ID == first.ID {
		t.Fatal("different keys, same task")
	}
	// A continuation with a key: a retry does not append twice.
	cont := fmt.Sprintf(`{"taskId":%q,"idempotencyKey":"k3","message":{"messageId":"m2","role":"user","parts":[{"text":"more"}]}}`, first.ID)
	a := mustSend(t, s, alice, cont)
	b := mustSend(t, s, alice, cont)
	if len(a.History) != 2 || len(b.History) != 2 || b.Version != a.Version {
		t.Fatalf("continuation retried: %d then %d messages", len(a.History), len(b.History))
	}
	// A key reused for another task is refused.
	_, err := sendJSON(ctx, s, alice, []byte(fmt.Sprintf(`{"taskId":%q,"idempotencyKey":"k3","message":{"messageId":"m3","role":"user","parts":[{"text":"x"}]}}`, bobs.ID)))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.idempotencyKey", "constraint": "unique"})
	// A failed request records no key.
	_, err = sendJSON(ctx, s, alice, []byte(`{"taskId":"nope","idempotencyKey":"k4","message":{"messageId":"m3","role":"user","parts":[{"text":"x"}]}}`))
	wantSnap(t, err, snap.CodeTaskNotFound, nil)
	if fresh := mustSend(t, s, alice, withKey("k4", "now")); fresh.ID == first.ID {
		t.Fatal("k4 was recorded by a failed request")
	}
}

func TestIdempotencyKeysBounded(t *testing.T) {
	s, store := newService(t, ServiceOptions{IdempotencyKeys: 2})
	withKey := func(key string) string { return `{"idempotencyKey":"` + key + `",` + send(`{"text":"x"}`)[1:] }
	t1 := mustSend(t, s, alice, withKey("a"))
	mustSend(t, s, alice, withKey("b"))
	mustSend(t, s, alice, withKey("c")) // forgets a
	if s.keys.len() != 2 {
		t.Fatalf("%d keys held, want 2", s.keys.len())
	}
	if again := mustSend(t, s, alice, withKey("a")); again.ID == t1.ID || store.Len() != 4 {
		t.Fatal("the oldest key was not forgotten")
	}

	// Disabled: every request is new.
	s2, _ := newService(t, ServiceOptions{IdempotencyKeys: -1})
	if mustSend(t, s2, alice, withKey("a")).ID == mustSend(t, s2, alice, withKey("a")).ID {
		t.Fatal("keys honoured while disabled")
	}
}

func TestIdempotencyKeyConcurrent(t *testing.T) {
	s, store := newService(t, ServiceOptions{})
	payload := `{"idempotencyKey":"same",` + send(`{"text":"x"}`)[1:]
	var wg sync.WaitGroup
	ids := make([]string, 16)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task, err := sendJSON(context.Background(), s, alice, []byte(payload))
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = task.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("concurrent sends with one key made several tasks: %v", ids)
		}
	}
	if store.Len() != 1 {
		t.Fatalf("store holds %d tasks", store.Len())
	}
}

func TestKeyCacheReuse(t *testing.T) {
	c := newKeyCache(2)
	a, b, d := idemKey{"o", "a"}, idemKey{"o", "b"}, idemKey{"o", "d"}
	c.put(a, "1")
	c.remove(a)
	c.put(a, "2") // a is newer than its stale entry
	c.put(b, "3")
	c.put(d, "4") // evicts the oldest live key: a
	if _, ok := c.get(a); ok {
		t.Fatal("a kept")
	}
	if id, ok := c.get(b); !ok || id != "3" {
		t.Fatal("b lost")
	}
	for i := range 1000 {
		c.put(idemKey{"o", fmt.Sprint(i)}, "x")
	}
	if c.len() != 2 || len(c.order)-c.head > 2*2+64 {
		t.Fatalf("cache grew: %d keys, %d refs", c.len(), len(c.order)-c.head)
	}
}

func TestMaxHistory(t *testing.T) {
	s, _ := newService(t, ServiceOptions{MaxHistory: 3})
	task := mustSend(t, s, alice, send(`{"text":"1"}`))
	mustSend(t, s, alice, continuePayload(task.ID, "m2", "2"))
	mustSend(t, s, alice, continuePayload(task.ID, "m3", "3"))
	_, err := sendJSON(context.Background(), s, alice, []byte(continuePayload(task.ID, "m4", "4")))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.taskId", "constraint": "maxHistory", "expected": 3})
}

func TestSendMessageStoreFull(t *testing.T) {
	s := NewService(NewMemoryStore(MemoryStoreOptions{MaxTasks: 1}), ServiceOptions{})
	mustSend(t, s, alice, send(`{"text":"x"}`))
	_, err := sendJSON(context.Background(), s, alice, []byte(send(`{"text":"y"}`)))
	wantSnap(t, err, snap.CodeServiceUnavailable, nil)
	if !errors.Is(err, ErrStoreFull) {
		t.Fatalf("err = %v, want ErrStoreFull", err)
	}
}

func TestSendMessageInvalid(t *testing.T) {
	s, store := newService(t, ServiceOptions{})
	_, err := sendJSON(context.Background(), s, alice, []byte(send(`{"text":"a","url":"https://x.org"}`)))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.message.parts[0]", "constraint": "oneOf"})
	if store.Len() != 0 {
		t.Fatal("an invalid request made a task")
	}
	if _, err := sendJSON(context.Background(), s, "", []byte(send(`{"text":"a"}`))); err == nil {
		t.Fatal("no requester accepted")
	}
}

func TestWorkerOperations(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))

	_, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "bad id", Parts: []Part{TextPart("x")}})
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "artifact.artifactId", "constraint": "pattern"})
	_, err = s.AddArtifact(ctx, "nope", Artifact{ArtifactID: "a", Parts: []Part{TextPart("x")}})
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": "nope"})
	_, err = s.Transition(ctx, "nope", StateWorking, "")
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": "nope"})

	if _, err := s.Transition(ctx, task.ID, StateCompleted, ""); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("submitted → completed: %v", err)
	}
	if _, err := s.Transition(ctx, task.ID, StateWorking, strings.Repeat("x", MaxStatusMessage+1)); !errors.Is(err, ErrLimit) {
		t.Fatalf("note over 1024: %v", err)
	}
	got, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "a1", Parts: []Part{DataPart(json.RawMessage(`{"status":"success"}`))}})
	if err != nil || len(got.Artifacts) != 1 || got.Version != 2 {
		t.Fatalf("AddArtifact: %+v %v", got, err)
	}
	if _, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "a1", Parts: []Part{TextPart("x")}}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate artifact: %v", err)
	}
	if _, err := s.Transition(ctx, task.ID, StateFailed, "boom"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "a2", Parts: []Part{TextPart("x")}}); !errors.Is(err, ErrTerminal) {
		t.Fatalf("artifact on a failed task: %v", err)
	}
	if _, err := s.Transition(ctx, task.ID, StateWorking, ""); !errors.Is(err, ErrTerminal) || !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("failed → working: %v", err)
	}
}

func TestServiceSubscribe(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))
	snapshot, events, err := s.Subscribe(ctx, alice, task.ID)
	if err != nil || snapshot.Version != 1 {
		t.Fatalf("Subscribe: %+v %v", snapshot, err)
	}
	_, opEvents, err := s.Subscribe(ctx, operator, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "out", Parts: []Part{TextPart("done")}}); err != nil {
		t.Fatal(err)
	}
	mustSend(t, s, alice, continuePayload(task.ID, "m2", "x")) // version 4, no event
	if _, err := cancelJSON(ctx, s, alice, []byte(getPayload(task.ID))); err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan Event{events, opEvents} {
		var got []string
		for ev := range ch {
			got = append(got, fmt.Sprintf("%d:%s", ev.Version, ev.Kind))
			if ev.Kind == EventArtifact && ev.Artifact.ArtifactID != "out" {
				t.Fatalf("artifact event %+v", ev)
			}
		}
		if strings.Join(got, " ") != "2:status 3:artifact 5:status" {
			t.Fatalf("events %v", got)
		}
	}
	// A terminal task: the snapshot and a closed channel.
	final, events, err := s.Subscribe(ctx, alice, task.ID)
	if err != nil || final.Status.State != StateCanceled {
		t.Fatalf("Subscribe to a canceled task: %v", err)
	}
	if _, ok := <-events; ok {
		t.Fatal("events for a terminal task")
	}
	if s.Events().Subscribers(task.ID) != 0 {
		t.Fatal("subscriptions kept after the final event")
	}
}

// A requester that saw events up to some version resumes after it: the
// stored backlog and the live channel meet with no gap and no duplicate;
// published events are the stored ones.
func TestServiceResubscribe(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{})
	task := mustSend(t, s, alice, send(`{"text":"x"}`))
	if _, err := s.Transition(ctx, task.ID, StateWorking, ""); err != nil { // v2
		t.Fatal(err)
	}
	if _, err := s.AddArtifact(ctx, task.ID, Artifact{ArtifactID: "out", Parts: []Part{TextPart("done")}}); err != nil { // v3
		t.Fatal(err)
	}
	summary := func(evs []Event) string {
		var out []string
		for _, ev := range evs {
			out = append(out, fmt.Sprintf("%d:%s", ev.Version, ev.Kind))
		}
		return strings.Join(out, " ")
	}
	for after, want := range map[int64]string{0: "1:status 2:status 3:artifact", 1: "2:status 3:artifact", 3: ""} {
		snap, backlog, live, err := s.Resubscribe(ctx, alice, task.ID, after)
		if err != nil || snap.Version != 3 || summary(collect(t, backlog)) != want {
			t.Fatalf("Resubscribe(after %d) = v%d %v; want [%s]", after, snap.Version, err, want)
		}
		if after == 1 {
			defer func() {
				var got []Event
				for ev := range live {
					got = append(got, ev)
				}
				if summary(got) != "4:status" {
					t.Errorf("live after resubscribe: %s", summary(got))
				}
			}()
		}
	}
	_, _, _, err := s.Resubscribe(ctx, bob, task.ID, 0)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": task.ID})
	_, err = s.TaskEvents(ctx, bob, task.ID, 0)
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": task.ID})
	if _, err := s.Transition(ctx, task.ID, StateCompleted, "ok"); err != nil { // v4, final
		t.Fatal(err)
	}
	evs, err := s.TaskEvents(ctx, operator, task.ID, 0)
	if err != nil || summary(evs) != "1:status 2:status 3:artifact 4:status" || !evs[3].Final() {
		t.Fatalf("TaskEvents = [%s] %v", summary(evs), err)
	}
	_, backlog, live, err := s.Resubscribe(ctx, alice, task.ID, 2)
	if err != nil {
		t.Fatalf("Resubscribe to a finished task: %v", err)
	}
	if got := summary(collect(t, backlog)); got != "3:artifact 4:status" {
		t.Fatalf("Resubscribe to a finished task: [%s]", got)
	}
	if _, ok := <-live; ok {
		t.Fatal("live events for a finished task")
	}
}

// collect reads a backlog whole.
func collect(t *testing.T, backlog iter.Seq2[Event, error]) []Event {
	t.Helper()
	var out []Event
	for ev, err := range backlog {
		if err != nil {
			t.Fatalf("backlog: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

// snap.Router is the Registrar the node uses.
var _ Registrar = (*snap.Router)(nil)

// fakeRouter is a Registrar that only records.
type fakeRouter map[string]func(context.Context, *snap.Verified) (any, error)

func (r fakeRouter) Handle(method string, h func(context.Context, *snap.Verified) (any, error)) {
	r[method] = h
}

// HandleStream records h with its events discarded.
func (r fakeRouter) HandleStream(method string, h snap.StreamHandlerFunc) {
	r[method] = func(ctx context.Context, req *snap.Verified) (any, error) {
		return h(ctx, req, func(any) error { return nil })
	}
}

func request(from, method, payload string) *snap.Verified {
	return &snap.Verified{
		Message: &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: from, Type: snap.TypeRequest,
			Method: method, Payload: []byte(payload), Timestamp: 1770163200},
		Signed: true,
	}
}

// brokenStore fails every read.
type brokenStore struct{ Store }

func (brokenStore) Get(context.Context, string) (*Task, error) {
	return nil, errors.New("disk on fire at /var/lib/snapnode")
}

func TestRegister(t *testing.T) {
	ctx := context.Background()
	s, store := newService(t, ServiceOptions{})
	r := fakeRouter{}
	s.Register(r, nil)
	for _, m := range []string{"message/send", "tasks/get", "tasks/cancel", "message/stream", "tasks/resubscribe"} {
		if r[m] == nil {
			t.Fatalf("%s not registered", m)
		}
	}
	if len(r) != 5 {
		t.Fatalf("%d handlers registered", len(r))
	}

	out, err := r["message/send"](ctx, request(alice, "message/send", send(`{"text":"hi"}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(*TaskResponse)
	if !ok || resp.Task == nil || resp.Task.Owner != alice {
		t.Fatalf("response %#v", out)
	}
	id := resp.Task.ID

	// Node-local metadata never reaches a peer.
	cur, _ := store.Get(ctx, id)
	cur.Metadata = map[string]any{"worker": "w1"}
	if _, err := store.Update(ctx, cur, cur.Version); err != nil {
		t.Fatal(err)
	}
	out, err = r["tasks/get"](ctx, request(alice, "tasks/get", getPayload(id)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	task := doc["task"]
	for _, k := range []string{"id", "contextId", "status", "history"} {
		if _, ok := task[k]; !ok {
			t.Fatalf("response lacks %s: %s", k, b)
		}
	}
	for k := range task {
		if k != "id" && k != "contextId" && k != "status" && k != "history" && k != "artifacts" {
			t.Fatalf("response task has member %q the schema forbids: %s", k, b)
		}
	}
	if stored, _ := store.Get(ctx, id); stored.Metadata["worker"] != "w1" {
		t.Fatal("stripping the response stripped the task")
	}

	// Errors come back as *snap.Error.
	_, err = r["tasks/get"](ctx, request(bob, "tasks/get", getPayload(id)))
	wantSnap(t, err, snap.CodeTaskNotFound, map[string]any{"taskId": id})
	_, err = r["tasks/cancel"](ctx, request(alice, "tasks/cancel", `{"taskId":1}`))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.taskId", "constraint": "type"})
	out, err = r["tasks/cancel"](ctx, request(alice, "tasks/cancel", getPayload(id)))
	if err != nil || out.(*TaskResponse).Task.Status.State != StateCanceled {
		t.Fatalf("cancel via handler: %v", err)
	}

	unsigned := request(alice, "tasks/get", getPayload(id))
	unsigned.Signed = false
	_, err = r["tasks/get"](ctx, unsigned)
	wantSnap(t, err, snap.CodeSignatureMissing, nil)
	response := request(alice, "tasks/get", getPayload(id))
	response.Type = snap.TypeResponse
	_, err = r["tasks/get"](ctx, response)
	wantSnap(t, err, snap.CodeInvalidMessage, nil)
	_, err = r["tasks/get"](ctx, nil)
	wantSnap(t, err, snap.CodeInternal, nil)

	// Internal failures are 5001 without their details.
	broken := NewService(brokenStore{store}, ServiceOptions{})
	br := fakeRouter{}
	broken.Register(br, nil)
	_, err = br["tasks/get"](ctx, request(alice, "tasks/get", getPayload(id)))
	se := wantSnap(t, err, snap.CodeInternal, nil)
	if strings.Contains(se.Error(), "disk") || se.Data != nil {
		t.Fatalf("internal details leaked: %v", se)
	}
}

// The interceptor Register takes sees message/send and message/stream
// with the params the router decoded: what it handles is answered by it
// alone, what it leaves goes to the Service, and a payload the codec
// refuses reaches neither.
func TestRegisterInterceptor(t *testing.T) {
	ctx := context.Background()
	s, store := newService(t, ServiceOptions{})
	var seen []string
	r := fakeRouter{}
	s.Register(r, func(ctx context.Context, req *snap.Verified, p *SendParams) (any, bool, error) {
		seen = append(seen, req.Method+" "+p.Message.MessageID)
		if p.TaskID == "decided" {
			return "decided", true, nil
		}
		return nil, false, nil
	})
	decision := `{"taskId":"decided","message":{"messageId":"d1","role":"user","parts":[{"data":{"decision":"approve"}}]}}`
	for _, method := range []string{"message/send", "message/stream"} {
		out, err := r[method](ctx, request(operator, method, decision))
		if err != nil || out != "decided" {
			t.Fatalf("%s of a decision: %v, %v; want the interceptor's answer", method, out, err)
		}
	}
	if ts, _ := store.List(ctx, Filter{}); len(ts) != 0 {
		t.Fatalf("the Service handled an intercepted request: %d tasks", len(ts))
	}
	out, err := r["message/send"](ctx, request(alice, "message/send", send(`{"text":"hi"}`)))
	if err != nil || out.(*TaskResponse).Task.Owner != alice {
		t.Fatalf("a message the interceptor left: %v, %v", out, err)
	}
	_, err = r["message/send"](ctx, request(alice, "message/send", `{"message":{"messageId":"bad id","role":"user","parts":[{"text":"x"}]}}`))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.message.messageId", "constraint": "pattern"})
	if want := []string{"message/send d1", "message/stream d1", "message/send m1"}; !slices.Equal(seen, want) {
		t.Fatalf("the interceptor saw %q, want %q", seen, want)
	}
}

func TestHandlerNilErrorIsNil(t *testing.T) {
	// A success must return a nil error interface, not a typed nil.
	s, _ := newService(t, ServiceOptions{})
	r := fakeRouter{}
	s.Register(r, nil)
	_, err := r["message/send"](context.Background(), request(alice, "message/send", send(`{"text":"hi"}`)))
	if err != nil {
		t.Fatalf("err = %#v", err)
	}
}

func TestIdempotencyKeyOfEvictedTask(t *testing.T) {
	ctx := context.Background()
	s := NewService(NewMemoryStore(MemoryStoreOptions{MaxTasks: 1}), ServiceOptions{})
	payload := `{"idempotencyKey":"k",` + send(`{"text":"x"}`)[1:]
	first := mustSend(t, s, alice, payload)
	if _, err := cancelJSON(ctx, s, alice, []byte(getPayload(first.ID))); err != nil {
		t.Fatal(err)
	}
	second := mustSend(t, s, alice, send(`{"text":"y"}`)) // evicts first
	if _, err := cancelJSON(ctx, s, alice, []byte(getPayload(second.ID))); err != nil {
		t.Fatal(err)
	}
	// The key's task is gone: the key starts afresh rather than fail.
	third := mustSend(t, s, alice, payload)
	if third.ID == first.ID || third.Status.State != StateSubmitted {
		t.Fatalf("key of an evicted task: %+v", third)
	}
	if again := mustSend(t, s, alice, payload); again.ID != third.ID {
		t.Fatal("key not re-recorded")
	}
}

func TestTaskResponseShrink(t *testing.T) {
	task := fullTask()
	for i := 2; i <= 5; i++ {
		task.History = append(task.History, Message{MessageID: fmt.Sprintf("m%d", i), Role: RoleUser, Parts: []Part{TextPart("x")}})
	}
	r := &TaskResponse{Task: task}
	var lens []int
	for r.Shrink() {
		lens = append(lens, len(r.Task.History))
	}
	if fmt.Sprint(lens) != "[2 1 0]" || len(task.History) != 5 {
		t.Fatalf("history lengths while shrinking %v (task keeps %d)", lens, len(task.History))
	}
	if r.Task.ID != task.ID || len(r.Task.Artifacts) != 1 {
		t.Fatal("shrinking dropped more than history")
	}
	if (&TaskResponse{}).Shrink() {
		t.Fatal("nil task shrank")
	}
}

// TestRegisterWithRouter registers on the node's router itself.
func TestRegisterWithRouter(t *testing.T) {
	s, _ := newService(t, ServiceOptions{})
	r := snap.NewRouter()
	s.Register(r, nil)
	if got := fmt.Sprint(r.Methods()); got != "[message/send message/stream tasks/cancel tasks/get tasks/resubscribe]" {
		t.Fatalf("methods %s", got)
	}
}

// A continuation's key the Service forgot is still kept with the task in
// the store, which finds it in the write of the message: a retry changes
// nothing, and the key stays the task's.
func TestContinuationKeyKeptByTheStore(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, ServiceOptions{IdempotencyKeys: 1})
	first := mustSend(t, s, alice, send(`{"text":"one"}`))
	other := mustSend(t, s, alice, send(`{"text":"two"}`))
	cont := fmt.Sprintf(`{"taskId":%q,"idempotencyKey":"k","message":{"messageId":"m2","role":"user","parts":[{"text":"more"}]}}`, first.ID)
	a := mustSend(t, s, alice, cont)
	mustSend(t, s, alice, `{"idempotencyKey":"forget-k",`+send(`{"text":"x"}`)[1:]) // the Service holds one key
	if _, ok := s.keys.get(idemKey{owner: alice, key: "k"}); ok {
		t.Fatal("key k still held by the Service")
	}
	b := mustSend(t, s, alice, cont)
	if len(a.History) != 2 || len(b.History) != 2 || b.Version != a.Version {
		t.Fatalf("continuation retried: %d then %d messages", len(a.History), len(b.History))
	}
	s.keys.put(idemKey{owner: alice, key: "forget-k"}, other.ID) // forget k again
	_, err := sendJSON(ctx, s, alice, []byte(fmt.Sprintf(`{"taskId":%q,"idempotencyKey":"k","message":{"messageId":"m3","role":"user","parts":[{"text":"x"}]}}`, other.ID)))
	wantSnap(t, err, snap.CodeInvalidPayload, map[string]any{"field": "payload.idempotencyKey", "constraint": "unique"})
	if got, _ := getJSON(ctx, s, alice, []byte(getPayload(other.ID))); len(got.History) != 1 {
		t.Fatalf("the other task got %d messages", len(got.History))
	}
}
