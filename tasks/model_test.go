package tasks

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/snap"
)

// iso8601 is the ISO8601Timestamp pattern of the SNAP common schema.
var iso8601 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`)

func fullTask() *Task {
	return &Task{
		ID:        "task-1",
		ContextID: "ctx-1",
		Status:    Status{State: StateWorking, Timestamp: time.Date(2026, 2, 4, 11, 0, 0, 500_000_000, time.FixedZone("CET", 3600)), Message: "halfway"},
		History: []Message{{MessageID: "m1", Role: RoleUser, Parts: []Part{
			TextPart(""),
			RawPart("aGk=", "image/png"),
			URLPart("https://example.com"),
			DataPart(json.RawMessage(`{"a":1}`)),
		}}},
		Artifacts: []Artifact{{ArtifactID: "a1", Name: "out.txt", Parts: []Part{TextPart("done")}}},
		Owner:     alice,
		Version:   7,
	}
}

const fullTaskJSON = `{"id":"task-1","contextId":"ctx-1","status":{"state":"working","timestamp":"2026-02-04T10:00:00.5Z","message":"halfway"},` +
	`"history":[{"messageId":"m1","role":"user","parts":[{"text":""},{"raw":"aGk=","mediaType":"image/png"},{"url":"https://example.com"},{"data":{"a":1}}]}],` +
	`"artifacts":[{"artifactId":"a1","name":"out.txt","parts":[{"text":"done"}]}]}`

func TestTaskJSON(t *testing.T) {
	task := fullTask()
	for name, marshal := range map[string]func(any) ([]byte, error){
		"encoding/json": func(v any) ([]byte, error) { return json.Marshal(v) },
		"json v2":       func(v any) ([]byte, error) { return jsonv2.Marshal(v) },
	} {
		b, err := marshal(task)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(b) != fullTaskJSON {
			t.Fatalf("%s:\n got %s\nwant %s", name, b, fullTaskJSON)
		}
		canon, err := snap.Canonicalize(b)
		if err != nil {
			t.Fatalf("%s: not I-JSON: %v", name, err)
		}
		_ = canon
	}
	// Minimal task: optional members are left out, the timestamp has no
	// fraction when it has none.
	min := &Task{ID: "t", Status: Status{State: StateSubmitted, Timestamp: time.Unix(1770163200, 0)}}
	b, _ := json.Marshal(min)
	if string(b) != `{"id":"t","status":{"state":"submitted","timestamp":"2026-02-04T00:00:00Z"}}` {
		t.Fatalf("minimal task %s", b)
	}

	// Round trip: every wire field comes back; bookkeeping is not sent.
	var back Task
	if err := jsonv2.Unmarshal([]byte(fullTaskJSON), &back); err != nil {
		t.Fatal(err)
	}
	want := fullTask()
	want.Status.Timestamp = want.Status.Timestamp.UTC()
	want.Owner, want.Version = "", 0
	if !reflect.DeepEqual(&back, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, *want)
	}
	if err := back.Validate(); err != nil {
		t.Fatal(err)
	}
	var bad Status
	if err := json.Unmarshal([]byte(`{"state":"working","timestamp":"yesterday"}`), &bad); err == nil {
		t.Fatal("bad timestamp accepted")
	}
}

func TestStatusTimestampPattern(t *testing.T) {
	for _, ts := range []time.Time{
		time.Unix(0, 0),
		time.Unix(1770163200, 1),
		time.Unix(1770163200, 123456000).In(time.FixedZone("X", -7*3600)),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		b, err := json.Marshal(Status{State: StateWorking, Timestamp: ts})
		if err != nil {
			t.Fatal(err)
		}
		var w struct{ Timestamp string }
		_ = json.Unmarshal(b, &w)
		if !iso8601.MatchString(w.Timestamp) || w.Timestamp[len(w.Timestamp)-1] != 'Z' {
			t.Fatalf("timestamp %q does not match the schema's pattern in UTC", w.Timestamp)
		}
	}
}

func TestTrimHistory(t *testing.T) {
	task := fullTask()
	for i := 2; i <= 5; i++ {
		task.History = append(task.History, Message{MessageID: "m" + string(rune('0'+i)), Role: RoleAgent, Parts: []Part{TextPart("x")}})
	}
	for n, want := range map[int]string{-1: "", 0: "", 1: "m5", 2: "m4m5", 5: "m1m2m3m4m5", 9: "m1m2m3m4m5"} {
		got := task.TrimHistory(n)
		ids := ""
		for _, m := range got.History {
			ids += m.MessageID
		}
		if ids != want {
			t.Errorf("TrimHistory(%d) = %q, want %q", n, ids, want)
		}
		if got.ID != task.ID || got.Version != task.Version || len(got.Artifacts) != 1 {
			t.Errorf("TrimHistory(%d) lost fields", n)
		}
	}
	if len(task.History) != 5 {
		t.Fatal("TrimHistory changed the task")
	}
	// Appending to the trimmed copy never writes into the task's history.
	c := task.TrimHistory(2)
	c.History = append(c.History, Message{MessageID: "x"})
	c.History[0] = Message{MessageID: "y"}
	if task.History[3].MessageID != "m4" {
		t.Fatal("trimmed copy aliases the task's history")
	}
	if (*Task)(nil).TrimHistory(1) != nil {
		t.Fatal("nil")
	}
}

func TestClone(t *testing.T) {
	task := fullTask()
	task.Metadata = map[string]any{"a": []any{map[string]any{"b": "c"}}, "raw": json.RawMessage(`{}`)}
	c := task.Clone()
	if !reflect.DeepEqual(c, task) {
		t.Fatal("clone differs")
	}
	*c.History[0].Parts[0].Text = "changed"
	c.History[0].Parts[3].Data[1] = 'X'
	c.Artifacts[0].Parts[0] = TextPart("changed")
	c.Metadata["a"].([]any)[0].(map[string]any)["b"] = "changed"
	c.Metadata["raw"].(json.RawMessage)[0] = '['
	if !reflect.DeepEqual(task, fullTaskWithMeta()) {
		t.Fatal("changing the clone changed the task")
	}
	if (*Task)(nil).Clone() != nil {
		t.Fatal("nil")
	}
}

func fullTaskWithMeta() *Task {
	t := fullTask()
	t.Metadata = map[string]any{"a": []any{map[string]any{"b": "c"}}, "raw": json.RawMessage(`{}`)}
	return t
}

func TestTaskValidate(t *testing.T) {
	for name, c := range map[string]struct {
		mut   func(*Task)
		field string
	}{
		"ok":             {func(*Task) {}, ""},
		"id":             {func(t *Task) { t.ID = "" }, "task.id"},
		"context":        {func(t *Task) { t.ContextID = "c c" }, "task.contextId"},
		"state":          {func(t *Task) { t.Status.State = "done" }, "task.status.state"},
		"timestamp":      {func(t *Task) { t.Status.Timestamp = time.Time{} }, "task.status.timestamp"},
		"status message": {func(t *Task) { t.Status.Message = string(make([]rune, 1025)) }, "task.status.message"},
		"history":        {func(t *Task) { t.History[0].Role = "x" }, "task.history[0].role"},
		"artifact":       {func(t *Task) { t.Artifacts[0].Parts = nil }, "task.artifacts[0].parts"},
		"artifacts": {func(t *Task) {
			for range 100 {
				t.Artifacts = append(t.Artifacts, t.Artifacts[0])
			}
		}, "task.artifacts"},
	} {
		task := fullTask()
		c.mut(task)
		err := task.Validate()
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		se, ok := err.(*snap.Error)
		if !ok || se.Field() != c.field {
			t.Errorf("%s: err = %v, want field %s", name, err, c.field)
		}
	}
}

func TestEventJSON(t *testing.T) {
	st := Status{State: StateCompleted, Timestamp: time.Unix(1770163200, 0)}
	ev := Event{TaskID: "t", Version: 3, Kind: EventStatus, Status: &st}
	b, _ := json.Marshal(ev)
	if string(b) != `{"taskId":"t","version":3,"kind":"status","status":{"state":"completed","timestamp":"2026-02-04T00:00:00Z"}}` {
		t.Fatalf("%s", b)
	}
	if !ev.Final() || (Event{Kind: EventArtifact}).Final() {
		t.Fatal("Final")
	}
}

// A peer's status without a timestamp, as the SNAP specification's own
// examples write some, is read (its state and message), as the zero time;
// only the reading side takes it: Validate refuses such a task, and a
// status is never written without its timestamp member.
func TestStatusWithoutTimestampIsOnlyRead(t *testing.T) {
	var task Task
	if err := json.Unmarshal([]byte(`{"id":"t","status":{"state":"completed","message":"done"}}`), &task); err != nil {
		t.Fatalf("a status without a timestamp: %v", err)
	}
	if st := task.Status; st.State != StateCompleted || st.Message != "done" || !st.Timestamp.IsZero() {
		t.Fatalf("status %+v; want completed, its message, the zero time", st)
	}
	if err := task.Validate(); snap.CodeOf(err) != snap.CodeInvalidPayload {
		t.Errorf("Validate = %v; want task.status.timestamp refused", err)
	}
	for _, s := range []Status{task.Status, {State: StateWorking}} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if ts, ok := back["timestamp"].(string); !ok || !iso8601.MatchString(ts) {
			t.Errorf("written %s; want a timestamp member", b)
		}
	}
	for _, bad := range []string{`{"state":"working","timestamp":""}`, `{"state":"working","timestamp":5}`} {
		var s Status
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s read as %+v; want an error", bad, s)
		}
	}
}
