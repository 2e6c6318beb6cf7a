package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// Run runs the conformance suite against stores made by newStore, one per
// subtest.
func Run(t *testing.T, newStore func(t *testing.T) tasks.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, tasks.Store)
	}{
		{"CreateGet", testCreateGet},
		{"CreateRejects", testCreateRejects},
		{"StatusText", testStatusText},
		{"GetMissing", testGetMissing},
		{"Update", testUpdate},
		{"UpdateVersionConflict", testUpdateVersionConflict},
		{"UpdateKeepsFixedFields", testUpdateKeepsFixedFields},
		{"StateMachine", testStateMachine},
		{"TerminalIsFinal", testTerminalIsFinal},
		{"AppendHistory", testAppendHistory},
		{"AppendKeyed", testAppendKeyed},
		{"AppendArtifact", testAppendArtifact},
		{"ArtifactLimits", testArtifactLimits},
		{"Copies", testCopies},
		{"List", testList},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"CanceledContext", testCanceledContext},
		{"Events", testEvents},
		{"EventsWithFailedWrites", testEventsWithFailedWrites},
		{"EventsPage", testEventsPage},
		{"Prune", testPrune},
		{"PruneEdges", testPruneEdges},
		{"CountByState", testCountByState},
		{"Apply", testApply},
		{"ApplyAtomic", testApplyAtomic},
		{"ApplyReplace", testApplyReplace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

// base is a fixed instant with microseconds, the precision stores keep.
func base() time.Time { return time.Date(2026, 2, 4, 10, 0, 0, 123456000, time.UTC) }

func text(s string) tasks.Part { return tasks.TextPart(s) }

// sample returns a task using every kind of part and field.
func sample(id, owner string) *tasks.Task {
	return &tasks.Task{
		ID:        id,
		ContextID: "ctx-" + id,
		Status:    tasks.Status{State: tasks.StateSubmitted, Timestamp: base(), Message: "queued"},
		History: []tasks.Message{{
			MessageID: "m-" + id,
			Role:      tasks.RoleUser,
			Parts: []tasks.Part{
				text("hello"),
				text(""),
				tasks.RawPart("aGk=", "application/octet-stream"),
				tasks.URLPart("https://example.com/a?b=c"),
				{Data: json.RawMessage(`{"schema_version":"1.0.0","n":[1,2]}`), MediaType: "application/json"},
			},
		}},
		Metadata:       map[string]any{"k": "v", "nested": map[string]any{"a": []any{"x"}}},
		Owner:          owner,
		IdempotencyKey: "key-" + id,
		CreatedAt:      base(),
	}
}

func mustCreate(t *testing.T, s tasks.Store, task *tasks.Task) *tasks.Task {
	t.Helper()
	got, err := s.Create(context.Background(), task)
	if err != nil {
		t.Fatalf("Create(%s): %v", task.ID, err)
	}
	return got
}

func mustGet(t *testing.T, s tasks.Store, id string) *tasks.Task {
	t.Helper()
	got, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

// equal compares tasks, times by instant and JSON values by content.
func equal(t *testing.T, what string, got, want *tasks.Task) {
	t.Helper()
	norm := func(x *tasks.Task) *tasks.Task {
		c := x.Clone()
		c.Status.Timestamp = c.Status.Timestamp.UTC()
		c.CreatedAt = c.CreatedAt.UTC()
		for i := range c.History {
			normParts(c.History[i].Parts)
		}
		for i := range c.Artifacts {
			normParts(c.Artifacts[i].Parts)
		}
		if c.Metadata != nil {
			b, _ := json.Marshal(c.Metadata)
			c.Metadata = nil
			_ = json.Unmarshal(b, &c.Metadata)
		}
		return c
	}
	g, w := norm(got), norm(want)
	if !reflect.DeepEqual(g, w) {
		gj, _ := json.Marshal(g)
		wj, _ := json.Marshal(w)
		t.Fatalf("%s:\n got %s (owner %q v%d key %q created %v)\nwant %s (owner %q v%d key %q created %v)", what,
			gj, g.Owner, g.Version, g.IdempotencyKey, g.CreatedAt, wj, w.Owner, w.Version, w.IdempotencyKey, w.CreatedAt)
	}
}

func normParts(ps []tasks.Part) {
	for i := range ps {
		if ps[i].Data != nil {
			var v any
			if err := json.Unmarshal(ps[i].Data, &v); err == nil {
				ps[i].Data, _ = json.Marshal(v)
			}
		}
	}
}

func testCreateGet(t *testing.T, s tasks.Store) {
	in := sample("t1", "owner-a")
	in.Version = 42 // ignored: a new task is version 1
	got := mustCreate(t, s, in)
	want := sample("t1", "owner-a")
	want.Version = 1
	equal(t, "Create result", got, want)
	equal(t, "Get", mustGet(t, s, "t1"), want)

	// Every state may be stored by Create.
	for i, st := range tasks.States() {
		task := sample(fmt.Sprintf("state-%d", i), "owner-a")
		task.Status.State = st
		if got := mustCreate(t, s, task); got.Status.State != st {
			t.Fatalf("created in %s, got %s", st, got.Status.State)
		}
	}
}

func testCreateRejects(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	mustCreate(t, s, sample("dup", "owner-a"))
	if _, err := s.Create(ctx, sample("dup", "owner-b")); !errors.Is(err, tasks.ErrExists) {
		t.Fatalf("duplicate id: err = %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "dup"); got.Owner != "owner-a" {
		t.Fatalf("duplicate create replaced the task: owner %q", got.Owner)
	}
	noID := sample("", "owner-a")
	noOwner := sample("x1", "")
	badState := sample("x2", "owner-a")
	badState.Status.State = "done"
	tooMany := sample("x3", "owner-a")
	for i := range tasks.MaxArtifacts + 1 {
		tooMany.Artifacts = append(tooMany.Artifacts, tasks.Artifact{ArtifactID: fmt.Sprintf("a%d", i), Parts: []tasks.Part{text("x")}})
	}
	for name, c := range map[string]struct {
		task *tasks.Task
		want error
	}{
		"nil":           {nil, tasks.ErrInvalidTask},
		"no id":         {noID, tasks.ErrInvalidTask},
		"no owner":      {noOwner, tasks.ErrInvalidTask},
		"unknown state": {badState, tasks.ErrInvalidTask},
		"101 artifacts": {tooMany, tasks.ErrLimit},
	} {
		if _, err := s.Create(ctx, c.task); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
	for _, id := range []string{"x1", "x2", "x3"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("rejected task %s was stored (err %v)", id, err)
		}
	}
}

// A status message is text every store keeps as it is: one that is not
// UTF-8, or holds a NUL (which PostgreSQL's text cannot), is refused by
// every store alike, with ErrInvalidTask, and nothing is written.
func testStatusText(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	live := mustCreate(t, s, sample("st-live", "owner-a"))
	for _, c := range []struct{ name, msg string }{
		{"NUL", "done\x00then"},
		{"not UTF-8", "done \xff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			task := sample("st-new", "owner-a")
			task.Status.Message = c.msg
			if _, err := s.Create(ctx, task); !errors.Is(err, tasks.ErrInvalidTask) {
				t.Errorf("Create: err = %v, want ErrInvalidTask", err)
			}
			if _, err := s.Get(ctx, "st-new"); !errors.Is(err, tasks.ErrNotFound) {
				t.Errorf("refused task stored: %v", err)
			}
			next := live.Clone()
			next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base(), Message: c.msg}
			if _, err := s.Update(ctx, next, live.Version); !errors.Is(err, tasks.ErrInvalidTask) {
				t.Errorf("Update: err = %v, want ErrInvalidTask", err)
			}
			if _, _, err := s.Apply(ctx, live.ID, tasks.Outcome{State: tasks.StateCompleted, Note: c.msg, At: base()}); !errors.Is(err, tasks.ErrInvalidTask) {
				t.Errorf("Apply: err = %v, want ErrInvalidTask", err)
			}
			equal(t, "task after refused writes", mustGet(t, s, live.ID), live)
		})
	}
}

func testGetMissing(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Get: err = %v, want ErrNotFound", err)
	}
	ghost := sample("nope", "o")
	ghost.Status.State = tasks.StateWorking
	if _, err := s.Update(ctx, ghost, 1); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Update: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AppendHistory(ctx, "nope", 1, tasks.Message{MessageID: "m", Role: tasks.RoleUser, Parts: []tasks.Part{text("x")}}); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("AppendHistory: err = %v, want ErrNotFound", err)
	}
	if _, err := s.AppendArtifact(ctx, "nope", 1, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{text("x")}}); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("AppendArtifact: err = %v, want ErrNotFound", err)
	}
}

func testUpdate(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("u1", "owner-a"))
	next := cur.Clone()
	next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base().Add(time.Second), Message: "picked up"}
	next.Metadata = map[string]any{"worker": "w1"}
	next.History = append(next.History, tasks.Message{MessageID: "m2", Role: tasks.RoleAgent, Parts: []tasks.Part{text("on it")}})
	got, err := s.Update(ctx, next, 1)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	want := next.Clone()
	want.Version = 2
	equal(t, "Update result", got, want)
	equal(t, "Get after Update", mustGet(t, s, "u1"), want)

	// Same state with a new note is a change too.
	again := got.Clone()
	again.Status.Message = "50%"
	got, err = s.Update(ctx, again, 2)
	if err != nil || got.Version != 3 || got.Status.Message != "50%" {
		t.Fatalf("same-state Update: v%d %q, %v", got.Version, got.Status.Message, err)
	}
	long := got.Clone()
	long.Status.Message = string(make([]byte, tasks.MaxStatusMessage+1))
	if _, err := s.Update(ctx, long, 3); !errors.Is(err, tasks.ErrLimit) {
		t.Fatalf("status message over 1024: err = %v, want ErrLimit", err)
	}
}

func testUpdateVersionConflict(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("v1", "owner-a"))
	next := cur.Clone()
	next.Status.State = tasks.StateWorking
	for _, v := range []int64{0, 2, 7} {
		if _, err := s.Update(ctx, next, v); !errors.Is(err, tasks.ErrVersionConflict) {
			t.Fatalf("Update expecting v%d: err = %v, want ErrVersionConflict", v, err)
		}
		if _, err := s.AppendHistory(ctx, "v1", v, cur.History[0]); !errors.Is(err, tasks.ErrVersionConflict) {
			t.Fatalf("AppendHistory expecting v%d: err = %v, want ErrVersionConflict", v, err)
		}
		if _, err := s.AppendArtifact(ctx, "v1", v, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{text("x")}}); !errors.Is(err, tasks.ErrVersionConflict) {
			t.Fatalf("AppendArtifact expecting v%d: err = %v, want ErrVersionConflict", v, err)
		}
	}
	equal(t, "after conflicts", mustGet(t, s, "v1"), cur)
}

func testUpdateKeepsFixedFields(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("f1", "owner-a"))
	next := cur.Clone()
	next.Status.State = tasks.StateWorking
	next.Owner, next.ContextID, next.IdempotencyKey, next.CreatedAt = "thief", "ctx-other", "other", base().Add(time.Hour)
	got, err := s.Update(ctx, next, 1)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	for _, g := range []*tasks.Task{got, mustGet(t, s, "f1")} {
		if g.Owner != "owner-a" || g.ContextID != "ctx-f1" || g.IdempotencyKey != "key-f1" || !g.CreatedAt.Equal(base()) {
			t.Fatalf("fixed fields changed: owner %q context %q key %q created %v", g.Owner, g.ContextID, g.IdempotencyKey, g.CreatedAt)
		}
	}
}

// isLegal is the SNAP specification's task state machine, written out
// independently of the package's.
func isLegal(from, to tasks.State) bool {
	legal := map[tasks.State][]tasks.State{
		tasks.StateSubmitted:     {tasks.StateWorking, tasks.StateFailed, tasks.StateCanceled},
		tasks.StateWorking:       {tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled, tasks.StateInputRequired},
		tasks.StateInputRequired: {tasks.StateWorking, tasks.StateFailed, tasks.StateCanceled},
	}
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

func testStateMachine(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	n := 0
	for _, from := range tasks.States() {
		for _, to := range tasks.States() {
			if from == to {
				continue
			}
			n++
			task := sample(fmt.Sprintf("sm-%d", n), "owner-a")
			task.Status.State = from
			cur := mustCreate(t, s, task)
			next := cur.Clone()
			next.Status = tasks.Status{State: to, Timestamp: base().Add(time.Minute)}
			got, err := s.Update(ctx, next, cur.Version)
			if isLegal(from, to) {
				if err != nil || got.Status.State != to || got.Version != 2 {
					t.Errorf("%s → %s: legal, got %v", from, to, err)
				}
				continue
			}
			if !errors.Is(err, tasks.ErrIllegalTransition) {
				t.Errorf("%s → %s: err = %v, want ErrIllegalTransition", from, to, err)
			}
			if after := mustGet(t, s, task.ID); after.Status.State != from || after.Version != 1 {
				t.Errorf("%s → %s: rejected update changed the task to %s v%d", from, to, after.Status.State, after.Version)
			}
		}
	}
}

func testTerminalIsFinal(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	for i, st := range []tasks.State{tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled} {
		task := sample(fmt.Sprintf("term-%d", i), "owner-a")
		task.Status.State = st
		cur := mustCreate(t, s, task)
		same := cur.Clone()
		same.Status.Message = "edited"
		if _, err := s.Update(ctx, same, 1); !errors.Is(err, tasks.ErrTerminal) {
			t.Errorf("%s: same-state Update: err = %v, want ErrTerminal", st, err)
		}
		if _, err := s.AppendHistory(ctx, cur.ID, 1, cur.History[0]); !errors.Is(err, tasks.ErrTerminal) {
			t.Errorf("%s: AppendHistory: err = %v, want ErrTerminal", st, err)
		}
		if _, err := s.AppendArtifact(ctx, cur.ID, 1, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{text("x")}}); !errors.Is(err, tasks.ErrTerminal) {
			t.Errorf("%s: AppendArtifact: err = %v, want ErrTerminal", st, err)
		}
		equal(t, string(st)+" after refused writes", mustGet(t, s, cur.ID), cur)
	}
}

func testAppendHistory(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("h1", "owner-a"))
	m2 := tasks.Message{MessageID: "m2", Role: tasks.RoleAgent, Parts: []tasks.Part{text("two")}}
	m3 := tasks.Message{MessageID: "m3", Role: tasks.RoleUser, Parts: []tasks.Part{text("three")}}
	got, err := s.AppendHistory(ctx, "h1", 1, m2, m3)
	if err != nil {
		t.Fatalf("AppendHistory: %v", err)
	}
	want := cur.Clone()
	want.History = append(want.History, m2, m3)
	want.Version = 2
	equal(t, "AppendHistory result", got, want)
	equal(t, "Get after AppendHistory", mustGet(t, s, "h1"), want)
}

func testAppendArtifact(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("a1", "owner-a"))
	a := tasks.Artifact{ArtifactID: "out", Name: "out.txt", Parts: []tasks.Part{text("result"), tasks.DataPart(json.RawMessage(`{"status":"success"}`))}}
	got, err := s.AppendArtifact(ctx, "a1", 1, a)
	if err != nil {
		t.Fatalf("AppendArtifact: %v", err)
	}
	want := cur.Clone()
	want.Artifacts = []tasks.Artifact{a}
	want.Version = 2
	equal(t, "AppendArtifact result", got, want)
	equal(t, "Get after AppendArtifact", mustGet(t, s, "a1"), want)
}

func testArtifactLimits(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("lim", "owner-a"))
	v := cur.Version
	for i := range tasks.MaxArtifacts {
		got, err := s.AppendArtifact(ctx, "lim", v, tasks.Artifact{ArtifactID: fmt.Sprintf("a%d", i), Parts: []tasks.Part{text("x")}})
		if err != nil {
			t.Fatalf("artifact %d: %v", i, err)
		}
		v = got.Version
	}
	if _, err := s.AppendArtifact(ctx, "lim", v, tasks.Artifact{ArtifactID: "one-too-many", Parts: []tasks.Part{text("x")}}); !errors.Is(err, tasks.ErrLimit) {
		t.Fatalf("artifact 101: err = %v, want ErrLimit", err)
	}
	dup := mustCreate(t, s, sample("dupart", "owner-a"))
	got, err := s.AppendArtifact(ctx, "dupart", dup.Version, tasks.Artifact{ArtifactID: "same", Parts: []tasks.Part{text("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendArtifact(ctx, "dupart", got.Version, tasks.Artifact{ArtifactID: "same", Parts: []tasks.Part{text("y")}}); !errors.Is(err, tasks.ErrExists) {
		t.Fatalf("duplicate artifactId: err = %v, want ErrExists", err)
	}
	if after := mustGet(t, s, "dupart"); after.Version != got.Version || len(after.Artifacts) != 1 {
		t.Fatalf("refused appends changed the task: v%d, %d artifacts", after.Version, len(after.Artifacts))
	}
}

func testCopies(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	in := sample("c1", "owner-a")
	created := mustCreate(t, s, in)
	want := created.Clone()

	// Changing the caller's task, or what the store returned, changes
	// nothing stored.
	mutate := func(x *tasks.Task) {
		x.Status.State = tasks.StateFailed
		x.History[0].MessageID = "changed"
		x.History[0].Parts[0] = text("changed")
		*x.History[0].Parts[1].Text = "changed"
		x.History[0].Parts[4].Data[2] = 'X'
		x.Metadata["k"] = "changed"
		x.Metadata["nested"].(map[string]any)["a"].([]any)[0] = "changed"
		x.History = append(x.History, x.History[0])
	}
	mutate(in)
	mutate(created)
	got := mustGet(t, s, "c1")
	equal(t, "after mutating input and Create result", got, want)
	mutate(got)
	equal(t, "after mutating a Get result", mustGet(t, s, "c1"), want)

	next := want.Clone()
	next.Status.State = tasks.StateWorking
	upd, err := s.Update(ctx, next, 1)
	if err != nil {
		t.Fatal(err)
	}
	wantUpd := next.Clone()
	wantUpd.Version = 2
	mutate(next)
	mutate(upd)
	equal(t, "after mutating Update input and result", mustGet(t, s, "c1"), wantUpd)

	m := tasks.Message{MessageID: "m2", Role: tasks.RoleUser, Parts: []tasks.Part{text("orig")}}
	app, err := s.AppendHistory(ctx, "c1", 2, m)
	if err != nil {
		t.Fatal(err)
	}
	wantApp := app.Clone()
	*m.Parts[0].Text = "changed"
	app.History[1].Parts[0] = text("changed")
	equal(t, "after mutating AppendHistory input and result", mustGet(t, s, "c1"), wantApp)

	a := tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{tasks.DataPart(json.RawMessage(`{"a":1}`))}}
	art, err := s.AppendArtifact(ctx, "c1", 3, a)
	if err != nil {
		t.Fatal(err)
	}
	wantArt := art.Clone()
	a.Parts[0].Data[2] = 'b'
	art.Artifacts[0].Parts[0].Data[2] = 'c'
	equal(t, "after mutating AppendArtifact input and result", mustGet(t, s, "c1"), wantArt)

	list, err := s.List(ctx, tasks.Filter{})
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %d tasks, %v", len(list), err)
	}
	mutate(list[0])
	equal(t, "after mutating a List result", mustGet(t, s, "c1"), wantArt)
}

func testList(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	// Created out of order; List sorts by CreatedAt, then ID.
	specs := []struct {
		id, owner, ctx string
		state          tasks.State
		at             int
	}{
		{"l3", "alice", "c1", tasks.StateWorking, 3},
		{"l1", "alice", "c1", tasks.StateSubmitted, 1},
		{"l2b", "bob", "c2", tasks.StateCompleted, 2},
		{"l2a", "alice", "c3", tasks.StateCanceled, 2},
		{"l4", "bob", "c2", tasks.StateInputRequired, 4},
	}
	for _, sp := range specs {
		task := sample(sp.id, sp.owner)
		task.ContextID = sp.ctx
		task.Status.State = sp.state
		task.CreatedAt = base().Add(time.Duration(sp.at) * time.Second)
		mustCreate(t, s, task)
	}
	ids := func(f tasks.Filter) []string {
		t.Helper()
		list, err := s.List(ctx, f)
		if err != nil {
			t.Fatalf("List(%+v): %v", f, err)
		}
		out := []string{}
		for _, x := range list {
			out = append(out, x.ID)
		}
		return out
	}
	for _, c := range []struct {
		f    tasks.Filter
		want []string
	}{
		{tasks.Filter{}, []string{"l1", "l2a", "l2b", "l3", "l4"}},
		{tasks.Filter{Owner: "alice"}, []string{"l1", "l2a", "l3"}},
		{tasks.Filter{Owner: "bob"}, []string{"l2b", "l4"}},
		{tasks.Filter{Owner: "carol"}, []string{}},
		{tasks.Filter{ContextID: "c1"}, []string{"l1", "l3"}},
		{tasks.Filter{Owner: "bob", ContextID: "c1"}, []string{}},
		{tasks.Filter{States: []tasks.State{tasks.StateCompleted, tasks.StateCanceled}}, []string{"l2a", "l2b"}},
		{tasks.Filter{Owner: "alice", States: []tasks.State{tasks.StateWorking}}, []string{"l3"}},
		{tasks.Filter{Limit: 2}, []string{"l1", "l2a"}},
		{tasks.Filter{Owner: "bob", Limit: 1}, []string{"l2b"}},
		{tasks.Filter{Limit: 2, Newest: true}, []string{"l3", "l4"}},
		{tasks.Filter{Owner: "alice", Limit: 2, Newest: true}, []string{"l2a", "l3"}},
		{tasks.Filter{Newest: true}, []string{"l1", "l2a", "l2b", "l3", "l4"}},
	} {
		if got := ids(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.f, got, c.want)
		}
	}
	// Brief leaves out what the tasks carry, and only that.
	if _, err := s.AppendArtifact(ctx, "l4", 1, tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{text("big")}}); err != nil {
		t.Fatal(err)
	}
	brief, err := s.List(ctx, tasks.Filter{Owner: "bob", Brief: true})
	if err != nil || len(brief) != 2 {
		t.Fatalf("List(Brief): %d tasks, %v", len(brief), err)
	}
	for _, b := range brief {
		full := mustGet(t, s, b.ID)
		if b.History != nil || b.Artifacts != nil {
			t.Errorf("List(Brief) read task %s's %d messages and %d artifacts", b.ID, len(b.History), len(b.Artifacts))
		}
		full.History, full.Artifacts = nil, nil
		equal(t, "List(Brief) "+b.ID, b, full)
	}
}

func testConcurrentUpdates(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	mustCreate(t, s, sample("cc", "owner-a"))
	const writers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				cur, err := s.Get(ctx, "cc")
				if err != nil {
					errs <- err
					return
				}
				m := tasks.Message{MessageID: fmt.Sprintf("w%d-%d", w, i), Role: tasks.RoleUser, Parts: []tasks.Part{text("x")}}
				_, err = s.AppendHistory(ctx, "cc", cur.Version, m)
				switch {
				case errors.Is(err, tasks.ErrVersionConflict):
					continue
				case err != nil:
					errs <- err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustGet(t, s, "cc")
	if got.Version != 1+writers*each || len(got.History) != 1+writers*each {
		t.Fatalf("after %d appends: version %d, %d messages", writers*each, got.Version, len(got.History))
	}
	seen := map[string]bool{}
	for _, m := range got.History {
		if seen[m.MessageID] {
			t.Fatalf("message %s appended twice", m.MessageID)
		}
		seen[m.MessageID] = true
	}
}

func testCanceledContext(t *testing.T, s tasks.Store) {
	mustCreate(t, s, sample("ctx1", "owner-a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	next := sample("ctx1", "owner-a")
	next.Status.State = tasks.StateWorking
	m := next.History[0]
	a := tasks.Artifact{ArtifactID: "a", Parts: []tasks.Part{text("x")}}
	for name, err := range map[string]error{
		"Create":         func() error { _, err := s.Create(ctx, sample("ctx2", "o")); return err }(),
		"Get":            func() error { _, err := s.Get(ctx, "ctx1"); return err }(),
		"Update":         func() error { _, err := s.Update(ctx, next, 1); return err }(),
		"AppendHistory":  func() error { _, err := s.AppendHistory(ctx, "ctx1", 1, m); return err }(),
		"AppendArtifact": func() error { _, err := s.AppendArtifact(ctx, "ctx1", 1, a); return err }(),
		"List":           func() error { _, err := s.List(ctx, tasks.Filter{}); return err }(),
	} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: err = %v, want context.Canceled", name, err)
		}
	}
	if got := mustGet(t, s, "ctx1"); got.Version != 1 {
		t.Fatalf("writes with a canceled context changed the task: v%d", got.Version)
	}
	if _, err := s.Get(context.Background(), "ctx2"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Create with a canceled context stored the task (err %v)", err)
	}
}

// eventSummary renders events as "v1:status:submitted v2:artifact:out …".
func eventSummary(evs []tasks.Event) string {
	var b strings.Builder
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "v%d:%s:", e.Version, e.Kind)
		switch {
		case e.Status != nil:
			b.WriteString(string(e.Status.State))
			if e.Status.Message != "" {
				b.WriteString("(" + e.Status.Message + ")")
			}
		case e.Artifact != nil:
			b.WriteString(e.Artifact.ArtifactID)
		}
	}
	return b.String()
}

// Every status change and artifact is an event at the version it made;
// history appends and metadata-only updates make none; Events(after)
// returns what follows after.
func testEvents(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("e1", "owner-a"))
	step := func(got *tasks.Task, err error) *tasks.Task {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	next := cur.Clone()
	next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base().Add(time.Second)}
	cur = step(s.Update(ctx, next, cur.Version))                                                                                               // v2
	cur = step(s.AppendHistory(ctx, "e1", cur.Version, tasks.Message{MessageID: "m2", Role: tasks.RoleAgent, Parts: []tasks.Part{text("x")}})) // v3
	cur = step(s.AppendArtifact(ctx, "e1", cur.Version, tasks.Artifact{ArtifactID: "out", Parts: []tasks.Part{text("r")}}))                    // v4
	meta := cur.Clone()
	meta.Metadata = map[string]any{"only": "metadata"}
	cur = step(s.Update(ctx, meta, cur.Version)) // v5, no event
	note := cur.Clone()
	note.Status.Message = "half way"
	cur = step(s.Update(ctx, note, cur.Version)) // v6
	done := cur.Clone()
	done.Status = tasks.Status{State: tasks.StateCompleted, Timestamp: base().Add(2 * time.Second), Message: "done"}
	cur = step(s.Update(ctx, done, cur.Version)) // v7

	all, err := s.Events(ctx, "e1", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := "v1:status:submitted(queued) v2:status:working v4:artifact:out v6:status:working(half way) v7:status:completed(done)"
	if got := eventSummary(all); got != want {
		t.Fatalf("Events = %s\nwant     %s", got, want)
	}
	if !all[len(all)-1].Final() || all[0].Final() {
		t.Fatal("Final() wrong on stored events")
	}
	if !all[1].Status.Timestamp.Equal(base().Add(time.Second)) || all[2].Artifact.Parts[0].Text == nil || *all[2].Artifact.Parts[0].Text != "r" {
		t.Fatalf("event contents: %+v %+v", all[1].Status, all[2].Artifact)
	}
	for _, e := range all {
		if e.TaskID != "e1" {
			t.Fatalf("event of task %q", e.TaskID)
		}
	}
	for after, want := range map[int64]string{
		1: "v2:status:working v4:artifact:out v6:status:working(half way) v7:status:completed(done)",
		3: "v4:artifact:out v6:status:working(half way) v7:status:completed(done)",
		4: "v6:status:working(half way) v7:status:completed(done)",
		7: "", 100: "",
	} {
		evs, err := s.Events(ctx, "e1", after)
		if err != nil || evs == nil || eventSummary(evs) != want {
			t.Errorf("Events(after %d) = %s (%v, nil %v), want %s", after, eventSummary(evs), err, evs == nil, want)
		}
	}
	if _, err := s.Events(ctx, "missing", 0); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Events of a missing task: %v, want ErrNotFound", err)
	}
	// Returned events are copies.
	all[0].Status.State = tasks.StateFailed
	again, _ := s.Events(ctx, "e1", 0)
	if again[0].Status.State != tasks.StateSubmitted {
		t.Fatal("Events handed out its stored event")
	}
}

// EventsPage reads the events in pages: at most limit events, no more
// once they hold maxBytes (one at least), and reading on from a page's
// last version gives every event once, in order.
func testEventsPage(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("ep", "owner-a")) // v1
	next := cur.Clone()
	next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base().Add(time.Second)}
	cur, err := s.Update(ctx, next, cur.Version) // v2
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("b", 4000)
	for i := range 6 { // v3…v8, every other one large
		body := fmt.Sprint("small ", i)
		if i%2 == 0 {
			body = big
		}
		if cur, err = s.AppendArtifact(ctx, "ep", cur.Version, tasks.Artifact{ArtifactID: fmt.Sprint("a", i), Parts: []tasks.Part{text(body)}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.Events(ctx, "ep", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ limit, maxBytes int }{{1, 1 << 20}, {3, 1 << 20}, {100, 1 << 20}, {100, 1}, {100, 5000}, {0, 0}} {
		var got []tasks.Event
		var after int64
		for pages := 0; ; pages++ {
			if pages > len(all) {
				t.Fatalf("limit %d, %d bytes: no end", tc.limit, tc.maxBytes)
			}
			page, err := s.EventsPage(ctx, "ep", after, tc.limit, tc.maxBytes)
			if err != nil || page == nil {
				t.Fatalf("EventsPage(after %d, %d, %d) = %v, %v", after, tc.limit, tc.maxBytes, page, err)
			}
			if len(page) == 0 {
				break
			}
			if len(page) > max(tc.limit, 1) {
				t.Fatalf("limit %d: a page of %d", tc.limit, len(page))
			}
			// Past a page's first event, the events before the last hold
			// less than maxBytes.
			size := 0
			for _, ev := range page[:len(page)-1] {
				if ev.Artifact != nil {
					for _, p := range ev.Artifact.Parts {
						size += len(*p.Text)
					}
				}
			}
			if len(page) > 1 && size >= max(tc.maxBytes, 1)+len(big) {
				t.Fatalf("%d bytes: a page of %d events holding %d bytes before its last", tc.maxBytes, len(page), size)
			}
			if tc.maxBytes <= 1 && len(page) != 1 {
				t.Fatalf("%d bytes: a page of %d events, want one", tc.maxBytes, len(page))
			}
			got = append(got, page...)
			after = page[len(page)-1].Version
		}
		if eventSummary(got) != eventSummary(all) {
			t.Fatalf("limit %d, %d bytes: pages %s\nwant %s", tc.limit, tc.maxBytes, eventSummary(got), eventSummary(all))
		}
	}
	if _, err := s.EventsPage(ctx, "missing", 0, 10, 1<<20); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("EventsPage of a missing task: %v, want ErrNotFound", err)
	}
}

// A write that fails records no event.
func testEventsWithFailedWrites(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	cur := mustCreate(t, s, sample("e2", "owner-a"))
	bad := cur.Clone()
	bad.Status = tasks.Status{State: tasks.StateCompleted, Timestamp: base()}
	if _, err := s.Update(ctx, bad, cur.Version); !errors.Is(err, tasks.ErrIllegalTransition) {
		t.Fatalf("submitted → completed: %v", err)
	}
	stale := cur.Clone()
	stale.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base()}
	if _, err := s.Update(ctx, stale, cur.Version+1); !errors.Is(err, tasks.ErrVersionConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if _, err := s.AppendArtifact(ctx, "e2", cur.Version+5, tasks.Artifact{ArtifactID: "x", Parts: []tasks.Part{text("r")}}); !errors.Is(err, tasks.ErrVersionConflict) {
		t.Fatalf("stale artifact: %v", err)
	}
	if _, err := s.Create(ctx, sample("e2", "owner-b")); !errors.Is(err, tasks.ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	evs, err := s.Events(ctx, "e2", 0)
	if err != nil || eventSummary(evs) != "v1:status:submitted(queued)" {
		t.Fatalf("Events after failed writes = %s, %v", eventSummary(evs), err)
	}
}

// Prune deletes terminal tasks that became terminal before the cut-off,
// oldest first and at most limit, with their events; never a live task.
func testPrune(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	finish := func(id string, state tasks.State, at time.Duration) {
		t.Helper()
		cur := mustCreate(t, s, sample(id, "owner-a"))
		next := cur.Clone()
		next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base()}
		cur, err := s.Update(ctx, next, cur.Version)
		if err != nil {
			t.Fatal(err)
		}
		if state == tasks.StateWorking {
			return
		}
		next = cur.Clone()
		next.Status = tasks.Status{State: state, Timestamp: base().Add(at)}
		if _, err := s.Update(ctx, next, cur.Version); err != nil {
			t.Fatal(err)
		}
	}
	finish("p-old-done", tasks.StateCompleted, time.Hour)
	finish("p-old-failed", tasks.StateFailed, 2*time.Hour)
	finish("p-old-canceled", tasks.StateCanceled, 3*time.Hour)
	finish("p-new-done", tasks.StateCompleted, 10*time.Hour)
	finish("p-live", tasks.StateWorking, 0)
	mustCreate(t, s, sample("p-submitted", "owner-a"))
	cut := base().Add(5 * time.Hour)

	if n, err := s.Prune(ctx, cut, 0); err != nil || n != 0 {
		t.Fatalf("Prune(limit 0) = %d, %v", n, err)
	}
	if n, err := s.Prune(ctx, cut, 2); err != nil || n != 2 {
		t.Fatalf("Prune(limit 2) = %d, %v; want 2", n, err)
	}
	for _, id := range []string{"p-old-done", "p-old-failed"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("%s after Prune: %v, want ErrNotFound (oldest first)", id, err)
		}
		if _, err := s.Events(ctx, id, 0); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("events of %s after Prune: %v", id, err)
		}
	}
	if n, err := s.Prune(ctx, cut, 100); err != nil || n != 1 {
		t.Fatalf("second Prune = %d, %v; want 1", n, err)
	}
	if n, err := s.Prune(ctx, cut, 100); err != nil || n != 0 {
		t.Fatalf("third Prune = %d, %v; want 0", n, err)
	}
	for _, id := range []string{"p-new-done", "p-live", "p-submitted"} {
		mustGet(t, s, id)
		if evs, err := s.Events(ctx, id, 0); err != nil || len(evs) == 0 {
			t.Errorf("events of kept task %s: %d, %v", id, len(evs), err)
		}
	}
	// The pruned ids are free again, with fresh events.
	mustCreate(t, s, sample("p-old-done", "owner-b"))
	if evs, _ := s.Events(ctx, "p-old-done", 0); eventSummary(evs) != "v1:status:submitted(queued)" {
		t.Fatalf("events of a re-created id: %s", eventSummary(evs))
	}
}

// Prune judges the cut-off to the nanosecond, as time.Time.Before does,
// although stores keep microseconds: a task that ended at T was ended
// before T+1ns (retention's cut-off, now minus the TTL, has nanoseconds).
// Of tasks that ended at the same instant, a limited Prune deletes the
// lowest ids first, in every store.
func testPruneEdges(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	at := base().Add(time.Hour)
	end := func(id string) {
		t.Helper()
		cur := mustCreate(t, s, sample(id, "owner-a"))
		next := cur.Clone()
		next.Status = tasks.Status{State: tasks.StateFailed, Timestamp: at}
		if _, err := s.Update(ctx, next, cur.Version); err != nil {
			t.Fatal(err)
		}
	}
	end("edge")
	if n, err := s.Prune(ctx, at, 10); err != nil || n != 0 {
		t.Fatalf("Prune(before = the end) = %d, %v; want 0", n, err)
	}
	if n, err := s.Prune(ctx, at.Add(time.Nanosecond), 10); err != nil || n != 1 {
		t.Fatalf("Prune(before = the end + 1ns) = %d, %v; want 1", n, err)
	}

	ids := []string{"tie-z", "tie-m", "tie-a", "tie-q"} // created in this order
	for _, id := range ids {
		end(id)
	}
	for _, want := range []string{"tie-a", "tie-m", "tie-q", "tie-z"} {
		if n, err := s.Prune(ctx, at.Add(time.Second), 1); err != nil || n != 1 {
			t.Fatalf("Prune(limit 1) = %d, %v", n, err)
		}
		if _, err := s.Get(ctx, want); !errors.Is(err, tasks.ErrNotFound) {
			var left []string
			for _, id := range ids {
				if _, err := s.Get(ctx, id); err == nil {
					left = append(left, id)
				}
			}
			t.Fatalf("Prune(limit 1) of tasks ended together kept %s (left: %v); want the lowest id deleted first", want, left)
		}
	}
}

func testCountByState(t *testing.T, s tasks.Store) {
	ctx := context.Background()
	counts := func() map[tasks.State]int64 {
		t.Helper()
		got, err := s.CountByState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for st, n := range got { // states with none may be left out
			if n == 0 {
				delete(got, st)
			}
		}
		return got
	}
	if got := counts(); len(got) != 0 {
		t.Fatalf("empty store counts %v", got)
	}
	want := map[tasks.State]int64{}
	for i, st := range []tasks.State{tasks.StateSubmitted, tasks.StateSubmitted, tasks.StateWorking, tasks.StateCompleted, tasks.StateSubmitted} {
		task := sample(fmt.Sprintf("count-%d", i), "owner-a")
		task.Status.State = st
		mustCreate(t, s, task)
		want[st]++
	}
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	// A change of state moves the task between counts.
	cur := mustGet(t, s, "count-0")
	cur.Status = tasks.Status{State: tasks.StateWorking, Timestamp: base().Add(time.Second)}
	if _, err := s.Update(ctx, cur, cur.Version); err != nil {
		t.Fatal(err)
	}
	want[tasks.StateSubmitted]--
	want[tasks.StateWorking]++
	if got := counts(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after an update, counts %v, want %v", got, want)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.CountByState(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
}
