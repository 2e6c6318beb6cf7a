package tasks

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
)

// reflective is the way a response's payload was encoded before
// AppendCanonicalJSON, and still is for other payloads: encoding/json by
// reflection, then put in canonical order.
func reflective(r *TaskResponse) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return snap.Canonicalize(b)
}

// sameAsReflective fails t unless AppendCanonicalJSON writes exactly the
// bytes of the reflective path, or both fail.
func sameAsReflective(t *testing.T, r *TaskResponse) (ok bool) {
	t.Helper()
	want, werr := reflective(r)
	got, gerr := r.AppendCanonicalJSON(nil)
	switch {
	case werr != nil && gerr != nil:
	case werr != nil:
		t.Fatalf("reflective path fails (%v), AppendCanonicalJSON wrote %q", werr, got)
	case gerr != nil:
		t.Fatalf("AppendCanonicalJSON fails (%v), reflective path wrote %q", gerr, want)
	case !bytes.Equal(got, want):
		t.Fatalf("AppendCanonicalJSON wrote\n%q\nreflective path\n%q", got, want)
	}
	return gerr == nil
}

// strs are strings that exercise the escaping: control characters, the
// characters encoding/json escapes for HTML and JavaScript, characters
// beyond the BMP, U+FFFD itself, and invalid UTF-8.
var strs = []string{
	"", "a", "task-1", "hello, world", "<b> & </b>", "\"quoted\" \\ back",
	"\x00\x01\x07\x08\t\n\x0b\x0c\r\x1f\x7f", "é", "日本語", "😀 emoji", "\u2028\u2029",
	"\ufffd", "bad \xff byte", "\xc3", "\xed\xa0\x80 surrogate", "tab\there",
	"https://example.com/a?b=c&d=<e>", "image/png", "aGVsbG8=", strings.Repeat("x", 300),
}

// datas are data parts: objects whose members the canonical form
// reorders (by UTF-16 code units: "\ue000" after "😀"), numbers it
// rewrites, nesting; and values the reflective path refuses.
var datas = []string{
	`{}`, `{"a":1}`, `{"b":2,"a":[1,2,{"d":null,"c":true}]}`,
	`{"\ue000":1,"😀":2,"z":3,"A":4}`, `{"n":1e21,"m":0.1,"k":-0,"j":1E+2,"i":100.0,"h":5e-7}`,
	`{"s":"<&>\u2028","t":"\u00e9\ud83d\ude00","u":"\/"}`, ` { "sp" : [ 1 , 2 ] } `,
	`{"schema_version":"1.0.0","id":"p1","action":"READ_FILE","args":{"path":"/sandbox/notes.md"}}`,
	`null`, `[1,2]`, `"str"`,
	// refused by one path or the other: not JSON, beyond a double, a
	// repeated name, empty.
	`{"a":}`, `{"big":1e400}`, `{"a":1,"a":2}`, ``,
}

func randomTask(rng *rand.Rand) *Task {
	pick := func() string { return strs[rng.IntN(len(strs))] }
	maybe := func() bool { return rng.IntN(2) == 0 }
	parts := func() []Part {
		switch rng.IntN(8) {
		case 0:
			return nil
		case 1:
			return []Part{}
		}
		ps := make([]Part, 1+rng.IntN(4))
		for i := range ps {
			switch rng.IntN(5) {
			case 0:
				ps[i] = TextPart(pick())
			case 1:
				ps[i] = RawPart(pick(), pick())
			case 2:
				ps[i] = URLPart(pick())
			case 3:
				ps[i] = DataPart(json.RawMessage(datas[rng.IntN(len(datas))]))
			default: // several members at once, or none
				s, u := pick(), pick()
				ps[i] = Part{Text: &s, URL: &u, MediaType: pick()}
				if maybe() {
					ps[i] = Part{}
				}
			}
			if rng.IntN(4) == 0 {
				ps[i].MediaType = pick()
			}
		}
		return ps
	}
	zones := []*time.Location{time.UTC, time.FixedZone("CET", 3600), time.FixedZone("odd", -(5*3600 + 30*60 + 7))}
	t := &Task{ID: pick(), Status: Status{
		State:     []State{StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateFailed, StateCanceled, State(pick())}[rng.IntN(7)],
		Timestamp: time.Unix(rng.Int64N(1<<34)-1<<33, rng.Int64N(1e9)*int64(rng.IntN(2))).In(zones[rng.IntN(len(zones))]),
	}}
	if rng.IntN(10) == 0 {
		t.Status.Timestamp = time.Time{}
	}
	if maybe() {
		t.Status.Message = pick()
	}
	if maybe() {
		t.ContextID = pick()
	}
	switch rng.IntN(4) {
	case 0:
		t.History = []Message{}
	case 1, 2:
		for range 1 + rng.IntN(4) {
			t.History = append(t.History, Message{MessageID: pick(), Role: []Role{RoleUser, RoleAgent, Role(pick())}[rng.IntN(3)], Parts: parts()})
		}
	}
	switch rng.IntN(4) {
	case 0:
		t.Artifacts = []Artifact{}
	case 1, 2:
		for range 1 + rng.IntN(3) {
			a := Artifact{ArtifactID: pick(), Parts: parts()}
			if maybe() {
				a.Name = pick()
			}
			t.Artifacts = append(t.Artifacts, a)
		}
	}
	switch rng.IntN(6) {
	case 0:
		t.Metadata = map[string]any{}
	case 1:
		t.Metadata = map[string]any{pick(): pick(), "n": 1.5e21, "z": []any{1, "<", nil}, "raw": json.RawMessage(datas[rng.IntN(len(datas))])}
	}
	return t
}

// TestCanonicalJSONSameAsReflective: the task responses a node answers
// with, written directly in canonical form, are byte for byte what
// encoding/json and canonicalization made of them, over thousands of
// varied tasks; where that path fails, so does AppendCanonicalJSON.
func TestCanonicalJSONSameAsReflective(t *testing.T) {
	sameAsReflective(t, &TaskResponse{})
	sameAsReflective(t, NewTaskResponse(fullTask()))
	sameAsReflective(t, &TaskResponse{Task: &Task{}})
	rng := rand.New(rand.NewPCG(1, 2))
	written := 0
	for range 20_000 {
		if sameAsReflective(t, &TaskResponse{Task: randomTask(rng)}) {
			written++
		}
	}
	if written < 5_000 {
		t.Errorf("%d of 20,000 tasks written; the rest failed on both paths", written)
	}
	t.Logf("%d of 20,000 tasks written, the rest failed on both paths", written)
}

// TestCanonicalJSONOfficialVectors: the task payloads of the SNAP
// specification's vectors, read into a TaskResponse, are written as the
// vectors' canonical forms.
func TestCanonicalJSONOfficialVectors(t *testing.T) {
	check := func(t *testing.T, payload []byte, want string) {
		t.Helper()
		var r TaskResponse
		if err := json.Unmarshal(payload, &r); err != nil {
			t.Fatal(err)
		}
		got, err := r.AppendCanonicalJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("AppendCanonicalJSON = %s, want %s", got, want)
		}
		sameAsReflective(t, &r)
	}
	n := 0
	var sv snapref.SignatureVectors
	snapref.Load(t, "signatures/schnorr-signatures.json", &sv)
	for _, v := range sv.Valid {
		var m struct {
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(v.Message, &m); err != nil {
			t.Fatal(err)
		}
		if !carriesTask(m.Payload) {
			continue
		}
		t.Run(v.Description, func(t *testing.T) { check(t, m.Payload, v.Intermediates.CanonicalPayload) })
		n++
	}
	var cv snapref.CanonicalVectors
	snapref.Load(t, "canonical/jcs-payloads.json", &cv)
	for _, v := range cv.Vectors {
		if !carriesTask(v.Input) {
			continue
		}
		t.Run(v.Description, func(t *testing.T) { check(t, v.Input, v.Expected) })
		n++
	}
	if n == 0 {
		t.Fatal("no vector carries a task")
	}
}

// carriesTask reports whether payload is an object with a task and
// nothing else, as the response to message/send.
func carriesTask(payload []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(payload, &m) != nil || len(m) != 1 {
		return false
	}
	_, ok := m["task"]
	return ok
}

// FuzzCanonicalJSON compares AppendCanonicalJSON with the reflective path
// on tasks made of the fuzzer's strings and data.
func FuzzCanonicalJSON(f *testing.F) {
	for i, s := range strs {
		f.Add(s, strs[(i+1)%len(strs)], datas[i%len(datas)], int64(i)*1e9+int64(i))
	}
	f.Fuzz(func(t *testing.T, s1, s2, data string, ts int64) {
		text, url := s1, s2
		r := &TaskResponse{Task: &Task{
			ID: s1, ContextID: s2,
			Status: Status{State: State(s2), Timestamp: time.Unix(0, ts), Message: s1},
			History: []Message{{MessageID: s2, Role: Role(s1), Parts: []Part{
				{Text: &text}, {URL: &url, MediaType: s2}, DataPart(json.RawMessage(data)),
			}}},
			Artifacts: []Artifact{{ArtifactID: s1, Name: s2, Parts: []Part{{Raw: &text, MediaType: s1}}}},
		}}
		sameAsReflective(t, r)
		r.Task.Metadata = map[string]any{s1: s2, s2: json.RawMessage(data)}
		sameAsReflective(t, r)
	})
}

// sendAnswer is the answer to a message/send that created a task from a
// message of a text part and a proposal-shaped data part, as the node's
// benchmark sends it.
func sendAnswer() *TaskResponse {
	return NewTaskResponse(&Task{
		ID: "0d3e1f5c-6a7b-4c8d-9e0f-1a2b3c4d5e6f", ContextID: "5f6e7d8c-9b0a-4f1e-8d2c-3b4a59687766",
		Status: Status{State: StateSubmitted, Timestamp: time.Date(2026, 11, 27, 10, 0, 0, 123_456_789, time.UTC)},
		History: []Message{{MessageID: "m1", Role: RoleUser, Parts: []Part{
			TextPart("please read the notes and summarize what changed since yesterday"),
			DataPart(json.RawMessage(`{"schema_version":"1.0.0","id":"p1","reasoning":"the notes hold the changes","action":"READ_FILE","args":{"path":"/sandbox/notes.md"}}`)),
		}}},
	})
}

// BenchmarkTaskResponseJSON writes the answer to a message/send both
// ways, alternately in the same loop, and reports each one's time and
// their ratio:
//
//	go test ./tasks -run '^$' -bench TaskResponseJSON -benchmem -count 5
func BenchmarkTaskResponseJSON(b *testing.B) {
	r := sendAnswer()
	b.Run("reflective", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reflective(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.AppendCanonicalJSON(make([]byte, 0, 1024)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ratio", func(b *testing.B) {
		var old, cur time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := reflective(r); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := r.AppendCanonicalJSON(make([]byte, 0, 1024)); err != nil {
				b.Fatal(err)
			}
			cur += time.Since(t1)
			old += t1.Sub(t0)
		}
		b.ReportMetric(float64(old.Nanoseconds())/float64(b.N), "reflective-ns/op")
		b.ReportMetric(float64(cur.Nanoseconds())/float64(b.N), "canonical-ns/op")
		b.ReportMetric(float64(cur)/float64(old), "canonical/reflective")
	})
}
