package agent

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

func TestStatusTaskState(t *testing.T) {
	// The table of job.go and the package documentation.
	tests := []struct {
		status   Status
		state    tasks.State
		terminal bool
	}{
		{Draft, tasks.StateSubmitted, false},
		{Pending, tasks.StateSubmitted, false},
		{Running, tasks.StateWorking, false},
		{Reviewing, tasks.StateWorking, false},
		{Success, tasks.StateCompleted, true},
		{Canceled, tasks.StateCanceled, true},
		{InterventionRequired, tasks.StateInputRequired, false},
		{HaltedCost, tasks.StateFailed, true},
		{HaltedTime, tasks.StateFailed, true},
	}
	var listed []Status
	for _, tt := range tests {
		listed = append(listed, tt.status)
		t.Run(string(tt.status), func(t *testing.T) {
			if got := tt.status.TaskState(); got != tt.state {
				t.Errorf("TaskState() = %q; want %q", got, tt.state)
			}
			if got := tt.status.Terminal(); got != tt.terminal {
				t.Errorf("Terminal() = %v; want %v", got, tt.terminal)
			}
			// A job is over exactly when its task is.
			if tt.status.Terminal() != tt.status.TaskState().Terminal() {
				t.Errorf("Terminal() = %v but the task state %s has Terminal() = %v",
					tt.status.Terminal(), tt.status.TaskState(), tt.status.TaskState().Terminal())
			}
		})
	}
	if got := Statuses(); !slices.Equal(got, listed) {
		t.Errorf("Statuses() = %v; want every status of the table, in its order: %v", got, listed)
	}
}

// schemaEnum reads an enum of an embedded schema file: the strings at the
// path of object members.
func schemaEnum(t *testing.T, file string, path ...string) []string {
	t.Helper()
	raw, err := schemas.FS.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%s: no object at %s", file, p)
		}
		v = m[p]
	}
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

func TestStatusesMatchSchema(t *testing.T) {
	want := schemaEnum(t, schemas.JobManifestFile, "$defs", "status", "enum")
	var got []string
	for _, s := range Statuses() {
		got = append(got, string(s))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Statuses() = %v; the manifest schema's enum is %v", got, want)
	}
	states := schemaEnum(t, schemas.JobManifestFile, "properties", "task_state", "enum")
	for _, s := range Statuses() {
		if !slices.Contains(states, string(s.TaskState())) {
			t.Errorf("%s maps to %q, not a task_state of the schema %v", s, s.TaskState(), states)
		}
	}
}

func TestKindsAndOutcomesMatchSchema(t *testing.T) {
	kinds := schemaEnum(t, schemas.JobHistoryFile, "$defs", "response", "properties", "kind", "enum")
	for _, k := range []string{KindProposal, KindAgentResponse, KindInvalid, KindAPIError, KindCanceled} {
		if !slices.Contains(kinds, k) {
			t.Errorf("kind %q is not in the history schema %v", k, kinds)
		}
	}
	outcomes := schemaEnum(t, schemas.JobHistoryFile, "$defs", "observation", "properties", "outcome", "enum")
	for _, o := range []string{ObsCompleted, ObsFailed, ObsNeedsConfirmation, ObsApproved, ObsDenied, ObsInvalid, ObsRetried, ObsNone} {
		if !slices.Contains(outcomes, o) {
			t.Errorf("outcome %q is not in the history schema %v", o, outcomes)
		}
	}
	statuses := schemaEnum(t, schemas.JobHistoryFile, "$defs", "response", "properties", "status", "enum")
	for _, s := range []string{ResponseSuccess, ResponseError, ResponseTimeout} {
		if !slices.Contains(statuses, s) {
			t.Errorf("response status %q is not in the history schema %v", s, statuses)
		}
	}
}

// validateJSON validates v's JSON against the job history or manifest
// schema, as a client of `snapnode job history|show --format json` would.
func validateJSON(v any, which string) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	switch which {
	case "history":
		return schemas.JobHistory().Validate(doc)
	case "manifest":
		return schemas.JobManifest().Validate(doc)
	}
	return fmt.Errorf("no schema %q", which)
}

// sampleJob is a job a few steps in: a proposal that ran, an invalid
// answer, a failed model call, one held for an operator and an agent
// response.
func sampleJob() (*Job, []Interaction, []RecoveryPoint) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456000, time.UTC)
	j := &Job{TaskID: "3f2a9c1e-task", Requester: "bc1ptest", Description: "summarise notes.md into report.md",
		Status: Success, Phase: "work", Steps: 5, CostCents: 0.42, Seconds: 12.5, PromptTokens: 5000, CompletionTokens: 600,
		Retries: 1, HistoryBytes: 4096, NextSeq: 5, RecoverySeq: 5, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute)}
	req := Request{Messages: []ChatMessage{{Role: RoleSystem, Content: systemPrompt}, {Role: RoleUser, Content: "Task from bc1ptest:\nsummarise"}},
		Metadata: RequestMetadata{Role: "Worker", Phase: "work", Model: "qwen3", Temperature: 0.2, MaxTokens: 2048}}
	its := []Interaction{
		{Sequence: 0, Timestamp: t0, StateBefore: Running, WorkspacePath: "/sandbox/", Request: req,
			Response: Response{Status: ResponseSuccess, Kind: KindProposal, Action: "READ_FILE",
				RawResponse: answerProposal(stuckID(0), "read", "READ_FILE", `{"path":"/sandbox/notes.md"}`),
				NewStatus:   Running, ExecutionTimeSeconds: 1.5, CostUSD: 0.001, PromptTokens: 900, CompletionTokens: 60},
			Observation: &Observation{Outcome: ObsCompleted, ActionID: "a-0",
				Output: json.RawMessage(`{"status":"success","action":"READ_FILE","result":{"content":"notes"}}`),
				Text:   `{"outcome":"completed","action":"READ_FILE"}`}},
		{Sequence: 1, Timestamp: t0.Add(time.Second), StateBefore: Running, Request: req,
			Response:    Response{Status: ResponseSuccess, Kind: KindInvalid, RawResponse: "Sure!", Error: "not JSON", NewStatus: Running},
			Observation: &Observation{Outcome: ObsInvalid, Reason: "not JSON", Text: "Your answer was refused"}},
		{Sequence: 2, Timestamp: t0.Add(2 * time.Second), StateBefore: Running, Request: req,
			Response: Response{Status: ResponseTimeout, Kind: KindAPIError, Error: "deadline", NewStatus: Running, ExecutionTimeSeconds: 120}},
		{Sequence: 3, Timestamp: t0.Add(3 * time.Second).In(time.FixedZone("CET", 3600)), StateBefore: Running, Request: req,
			Guidance: "Message from the requester: in French",
			Response: Response{Status: ResponseSuccess, Kind: KindProposal, Action: "write_file",
				RawResponse: answerProposal(stuckID(3), "write", "write_file", `{"path":"/sandbox/report.md","content":"x"}`),
				NewStatus:   InterventionRequired},
			Observation: &Observation{Outcome: ObsNeedsConfirmation, ActionID: "a-3", Diff: "--- a\n+++ b\n", Reason: "policy"}},
		{Sequence: 4, Timestamp: t0.Add(4 * time.Second), StateBefore: Running, Request: Request{Prompt: "one text", Metadata: req.Metadata},
			Response: Response{Status: ResponseSuccess, Kind: KindAgentResponse, Action: ActionCompleted,
				EvidenceFiles: []string{"/sandbox/report.md"}, SummaryForSupervisor: "done",
				RawResponse: `{"action":"COMPLETED","evidence_files":["/sandbox/report.md"],"summary_for_supervisor":"done"}`,
				NewStatus:   Success},
			Observation: &Observation{Outcome: ObsCompleted, Text: "accepted"}},
	}
	rps := []RecoveryPoint{{CheckpointID: "work-complete-4", Sequence: 4, CanResumeFrom: true, ResumePhase: "work",
		RollbackFiles: []string{"/sandbox/report.md"}, Description: "done", Metadata: map[string]any{"evidence_count": 1}}}
	return j, its, rps
}

func TestHistoryValidates(t *testing.T) {
	j, its, rps := sampleJob()
	tests := []struct {
		name string
		h    History
		ok   bool
	}{
		{"sample", History{JobID: j.TaskID, CreatedAt: j.CreatedAt, Description: j.Description, Status: j.Status, Interactions: its, RecoveryPoints: rps}, true},
		{"empty", History{JobID: j.TaskID, CreatedAt: j.CreatedAt, Interactions: []Interaction{}, RecoveryPoints: []RecoveryPoint{}}, true},
		// The schema is not a formality: these are refused.
		{"nil interactions", History{JobID: j.TaskID, CreatedAt: j.CreatedAt, RecoveryPoints: []RecoveryPoint{}}, false},
		{"unknown status", History{JobID: j.TaskID, CreatedAt: j.CreatedAt, Status: "DONE", Interactions: []Interaction{}, RecoveryPoints: []RecoveryPoint{}}, false},
		{"no job id", History{CreatedAt: j.CreatedAt, Interactions: []Interaction{}, RecoveryPoints: []RecoveryPoint{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateJSON(&tt.h, "history")
			if (err == nil) != tt.ok {
				t.Errorf("Validate = %v; want ok %v", err, tt.ok)
			}
		})
	}
	t.Run("each status", func(t *testing.T) {
		for _, st := range Statuses() {
			h := History{JobID: "j", CreatedAt: j.CreatedAt, Status: st, Interactions: its[:1], RecoveryPoints: rps}
			h.Interactions = []Interaction{its[0]}
			h.Interactions[0].StateBefore, h.Interactions[0].Response.NewStatus = st, st
			if err := validateJSON(&h, "history"); err != nil {
				t.Errorf("%s: %v", st, err)
			}
		}
	})
}

func TestManifest(t *testing.T) {
	j, its, _ := sampleJob()
	m := j.Manifest(j.Status.TaskState(), its)
	t.Run("content", func(t *testing.T) {
		if m.JobID != j.TaskID || m.Status != Success || m.TaskState != tasks.StateCompleted || m.Retries != 1 {
			t.Errorf("manifest %+v", m)
		}
		if m.CurrentPhase == nil || *m.CurrentPhase != "work" {
			t.Errorf("CurrentPhase = %v; want work", m.CurrentPhase)
		}
		want := Metrics{CumulativeCost: 0.42, CumulativeTimeSeconds: 12.5, Steps: 5, PromptTokens: 5000, CompletionTokens: 600}
		if m.Metrics != want {
			t.Errorf("Metrics = %+v; want %+v", m.Metrics, want)
		}
		if len(m.History) != len(its) {
			t.Fatalf("%d history entries; want %d", len(m.History), len(its))
		}
		for i, e := range m.History {
			if e.Role != "Worker" || e.Action != its[i].Response.Action || !e.Timestamp.Equal(its[i].Timestamp) ||
				!reflect.DeepEqual(e.EvidenceFiles, its[i].Response.EvidenceFiles) {
				t.Errorf("entry %d = %+v", i, e)
			}
		}
	})
	t.Run("validates", func(t *testing.T) {
		if err := validateJSON(m, "manifest"); err != nil {
			t.Error(err)
		}
	})
	t.Run("each status", func(t *testing.T) {
		for _, st := range Statuses() {
			jj := *j
			jj.Status = st
			if st == Draft {
				jj.Phase = "" // not started: current_phase is null
			}
			mm := jj.Manifest(st.TaskState(), its)
			if err := validateJSON(mm, "manifest"); err != nil {
				t.Errorf("%s: %v", st, err)
			}
			if st == Draft {
				b, _ := json.Marshal(mm)
				var doc map[string]any
				_ = json.Unmarshal(b, &doc)
				if v, ok := doc["current_phase"]; !ok || v != nil {
					t.Errorf("current_phase of a job in no phase = %v (present %v); want null", v, ok)
				}
			}
		}
	})
	t.Run("new job", func(t *testing.T) {
		fresh := &Job{TaskID: "t", Status: Pending, RecoverySeq: -1}
		mm := fresh.Manifest(fresh.Status.TaskState(), nil)
		if err := validateJSON(mm, "manifest"); err != nil {
			t.Error(err)
		}
	})
}
