package tasks

import (
	"encoding/json"
	"testing"
	"time"
)

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
