package tasks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
)

func TestParseResubscribeRequest(t *testing.T) {
	cases := []payloadCase{
		{"task only", `{"taskId":"t1"}`, "", ""},
		{"after 0", `{"taskId":"t1","afterVersion":0}`, "", ""},
		{"after 3.0", `{"taskId":"t1","afterVersion":3.0}`, "", ""},
		{"after max", `{"taskId":"t1","afterVersion":9007199254740991}`, "", ""},
		{"unknown member", `{"taskId":"t1","historyLength":1}`, "payload.historyLength", "additionalProperties"},
		{"first unknown in byte order", `{"z":1,"taskId":"t1","b":2}`, "payload.b", "additionalProperties"},
		{"empty payload", ``, "payload.taskId", "required"},
		{"taskId missing", `{"afterVersion":1}`, "payload.taskId", "required"},
		{"taskId number", `{"taskId":1}`, "payload.taskId", "type"},
		{"taskId pattern", `{"taskId":"a.b"}`, "payload.taskId", "pattern"},
		{"taskId 129", `{"taskId":"` + strings.Repeat("t", 129) + `"}`, "payload.taskId", "maxLength"},
		{"after -1", `{"taskId":"t1","afterVersion":-1}`, "payload.afterVersion", "minimum"},
		{"after 1.5", `{"taskId":"t1","afterVersion":1.5}`, "payload.afterVersion", "type"},
		{"after string", `{"taskId":"t1","afterVersion":"3"}`, "payload.afterVersion", "type"},
		{"after null", `{"taskId":"t1","afterVersion":null}`, "payload.afterVersion", "type"},
		{"after 2^53", `{"taskId":"t1","afterVersion":9007199254740992}`, "payload.afterVersion", "maximum"},
		{"after huge", `{"taskId":"t1","afterVersion":1e400}`, "payload.afterVersion", "maximum"},
		{"after huge negative", `{"taskId":"t1","afterVersion":-1e400}`, "payload.afterVersion", "minimum"},
		{"duplicate member", `{"taskId":"t1","taskId":"t2"}`, "payload.taskId", "syntax"},
		{"not object", `["t1"]`, "payload", "type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkCase(t, c, func(b []byte) error { _, err := ParseResubscribeRequest(b); return err })
		})
	}
	for lit, want := range map[string]int64{"0": 0, "7": 7, "3.0": 3, "1e2": 100, "-0": 0} {
		r, err := ParseResubscribeRequest([]byte(`{"taskId":"t1","afterVersion":` + lit + `}`))
		if err != nil || r.AfterVersion == nil || *r.AfterVersion != want {
			t.Errorf("afterVersion %s: got %v, %v; want %d", lit, r, err, want)
		}
	}
	if r, err := ParseResubscribeRequest([]byte(`{"taskId":"t1"}`)); err != nil || r.AfterVersion != nil || r.TaskID != "t1" {
		t.Errorf("no afterVersion: %+v, %v", r, err)
	}
}

func FuzzParseResubscribeRequest(f *testing.F) {
	for _, s := range []string{
		`{"taskId":"t1"}`, `{"taskId":"t1","afterVersion":12}`, `{"taskId":"t1","afterVersion":1e3}`,
		`{"taskId":"t1","x":1}`, `[]`, `{"afterVersion":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseResubscribeRequest(b)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || !strings.HasPrefix(se.Field(), "payload") {
				t.Fatalf("error is not a 1004 on a payload field: %v", err)
			}
			return
		}
		if snap.CheckID("taskId", r.TaskID) != nil {
			t.Fatalf("accepted taskId %q", r.TaskID)
		}
		if v := r.AfterVersion; v != nil && (*v < 0 || *v > MaxAfterVersion) {
			t.Fatalf("accepted afterVersion %d", *v)
		}
	})
}

// The exact JSON of each event form.
func TestStreamPayloadJSON(t *testing.T) {
	ts := time.Date(2026, 2, 4, 10, 0, 0, 500_000_000, time.UTC)
	three := &ArtifactUpdate{TaskID: "t1", Version: 4, state: StateWorking, Artifact: StreamArtifact{
		ArtifactID: "a1", Name: "out", Parts: []Part{TextPart("x"), TextPart("y"), TextPart("z")}}}
	shrunk := *three
	shrunk.Artifact.Parts = append([]Part(nil), three.Artifact.Parts...)
	var shrinks []bool
	for range 4 {
		shrinks = append(shrinks, shrunk.Shrink())
	}
	oneShrink := *three
	oneShrink.Shrink()
	cases := []struct {
		name string
		p    any
		want string
	}{
		{"status", StreamPayload(Event{TaskID: "t1", Version: 2, Kind: EventStatus, Status: &Status{State: StateWorking, Timestamp: ts}}, StateSubmitted),
			`{"taskId":"t1","progress":0.5,"message":"task working","state":"working","timestamp":"2026-02-04T10:00:00.5Z","version":2}`},
		{"status with note", StreamPayload(Event{TaskID: "t1", Version: 5, Kind: EventStatus, Status: &Status{State: StateFailed, Timestamp: ts, Message: "denied"}}, StateWorking),
			`{"taskId":"t1","progress":1,"message":"denied","state":"failed","timestamp":"2026-02-04T10:00:00.5Z","version":5}`},
		{"artifact", StreamPayload(Event{TaskID: "t1", Version: 3, Kind: EventArtifact, Artifact: &Artifact{ArtifactID: "a1", Parts: []Part{TextPart("x")}}}, StateWorking),
			`{"taskId":"t1","artifact":{"artifactId":"a1","parts":[{"text":"x"}],"partial":false},"version":3}`},
		{"artifact shrunk once", &oneShrink,
			`{"taskId":"t1","artifact":{"artifactId":"a1","name":"out","parts":[{"text":"x"},{"text":"y"}],"partial":true},"version":4}`},
		{"artifact left out", &shrunk,
			`{"taskId":"t1","progress":0.5,"message":"artifact a1 is too large for this transport; the task holds it","state":"working","version":4,"artifactId":"a1"}`},
		{"heartbeat", &ProgressUpdate{TaskID: "t1", Progress: 0, State: StateSubmitted, Message: "task still submitted", Heartbeat: true},
			`{"taskId":"t1","progress":0,"message":"task still submitted","state":"submitted","heartbeat":true}`},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.p)
		if err != nil || string(b) != c.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", c.name, b, err, c.want)
		}
	}
	if got := []bool{true, true, true, false}; len(shrinks) != 4 || shrinks[0] != got[0] || shrinks[1] != got[1] || shrinks[2] != got[2] || shrinks[3] != got[3] {
		t.Errorf("Shrink results %v, want %v (two parts dropped, then the notice, then nothing)", shrinks, got)
	}
	if StreamPayload(Event{TaskID: "t1", Version: 1, Kind: "other"}, StateWorking) != nil {
		t.Error("an unknown event kind has a payload")
	}
	if len(three.Artifact.Parts) != 3 {
		t.Error("shrinking a copy changed the original's parts")
	}
}
