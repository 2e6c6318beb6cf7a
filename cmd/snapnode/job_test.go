package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/agenttest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// jobDataDir makes a node data folder whose database holds one finished
// agent job of two steps, written through the job store as the runtime
// writes it.
func jobDataDir(t *testing.T) (dir, id string) {
	t.Helper()
	dir = t.TempDir()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	id = "job-1"
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: id, Requester: "bc1p-requester", Description: "write a.md", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	answers := []struct{ raw, action string }{
		{`{"schema_version":"1.0.0","id":"3f1c2a9e-8d4b-4f6a-9c2e-1b7d5e0a4c3f","reasoning":"write it","action":"WRITE_FILE","args":{"path":"/sandbox/a.md","content":"a\n"}}`, "WRITE_FILE"},
		{`{"schema_version":"1.0.0","id":"5a2b7c1d-3e4f-4a5b-8c6d-7e8f9a0b1c2d","reasoning":"done","action":"FINISH","args":{"response":"a.md written"}}`, "FINISH"},
	}
	for i, a := range answers {
		next := agent.Running
		if a.action == "FINISH" {
			next = agent.Success
		}
		it := &agent.Interaction{Sequence: i, Timestamp: t0.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
			Request:     agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "write a.md"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: a.action, RawResponse: a.raw, NewStatus: next, ExecutionTimeSeconds: 0.5},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, ActionID: "act-" + a.action, Text: `{"outcome":"completed"}`}}
		j.Status, j.NextSeq, j.Steps = next, i+1, i+1
		if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
			t.Fatal(err)
		}
	}
	return dir, id
}

func TestJobCommands(t *testing.T) {
	dir, id := jobDataDir(t)
	cmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}

	code, out, errOut := cmd("job", "history", "--data-dir", dir, id)
	if code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut)
	}
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if err := schemas.JobHistory().Validate(v); err != nil {
		t.Fatalf("job history does not validate against schemas/job-history.v1.json: %v\n%s", err, out)
	}

	if code, out, errOut := cmd("job", "replay", "--data-dir", dir, id); code != exitOK || !strings.Contains(out, "2 interactions replayed") {
		t.Fatalf("job replay: exit %d: %s%s", code, out, errOut)
	}
	// A copy whose FINISH was turned into a WRITE_FILE does not replay.
	var h map[string]any
	json.Unmarshal([]byte(mustHistory(t, cmd, dir, id)), &h)
	h["interactions"].([]any)[1].(map[string]any)["response"].(map[string]any)["action"] = "WRITE_FILE"
	b, _ := json.Marshal(h)
	file := filepath.Join(t.TempDir(), "tampered.json")
	os.WriteFile(file, b, 0o600)
	if code, _, errOut := cmd("job", "replay", "--file", file); code != exitFail || !strings.Contains(errOut, "interaction 1") {
		t.Fatalf("a tampered history: exit %d: %s", code, errOut)
	}

	if code, out, errOut := cmd("job", "show", "--format", "text", "--data-dir", dir, id); code != exitOK ||
		!strings.Contains(out, "SUCCESS (task completed)") || !strings.Contains(out, "2 steps") {
		t.Fatalf("job show: exit %d: %s%s", code, out, errOut)
	}
	if code, out, _ := cmd("job", "list", "--status", "SUCCESS", "--data-dir", dir); code != exitOK || strings.Count(out, "\n") != 1 {
		t.Fatalf("job list: exit %d: %s", code, out)
	}
	// The hint is the list command as this one was given: it names the
	// node's data folder (the bare command finds no node here).
	if code, _, errOut := cmd("job", "show", "--data-dir", dir, "no-such-job"); code != exitFail || !strings.Contains(errOut, "not an agent job") ||
		!strings.Contains(errOut, "snapnode job list --data-dir "+shellWord(dir)+" shows them") {
		t.Fatalf("unknown job: exit %d: %s", code, errOut)
	}
	// A folder with no node database is named, never created.
	empty := filepath.Join(t.TempDir(), "nothing")
	if code, _, errOut := cmd("job", "list", "--data-dir", empty); code != exitFail || !strings.Contains(errOut, "no node keeps its data here") {
		t.Fatalf("no database: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(empty); !os.IsNotExist(err) {
		t.Fatalf("job list created %s: %v", empty, err)
	}
}

func mustHistory(t *testing.T, cmd func(...string) (int, string, string), dir, id string) string {
	t.Helper()
	code, out, errOut := cmd("job", "history", "--data-dir", dir, id)
	if code != exitOK {
		t.Fatalf("job history: %s", errOut)
	}
	return out
}

// The text formats of job show and job history print what a model wrote
// (an action's name, a refusal, an observation's reason) with every
// control and invisible character spelled out, as the console and `held
// --diff` do: a model, led by a file it read, cannot clear the operator's
// terminal, colour it or forge a line of the listing.
func TestJobTextSpellsControls(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	const evil = "WRITE_FILE\x1b[2J\x1b]52;c;ZXZpbA==\a\u202e\n  9 10:00:09 Worker FINISH"
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: "job-evil", Requester: "bc1p-requester", Description: "x", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	it := &agent.Interaction{Sequence: 0, Timestamp: t0, StateBefore: agent.Running,
		Request:     agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
		Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: evil, Error: evil, RawResponse: "{}", NewStatus: agent.Running},
		Observation: &agent.Observation{Outcome: agent.ObsFailed, Reason: evil, Text: "{}"}}
	j.Status, j.NextSeq, j.Steps, j.Reason = agent.Running, 1, 1, evil
	if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, sub := range []string{"show", "history"} {
		var out, errOut bytes.Buffer
		if code := run([]string{"job", sub, "--format", "text", "--data-dir", dir, "job-evil"}, strings.NewReader(""), &out, &errOut); code != exitOK {
			t.Fatalf("job %s: exit %d: %s", sub, code, errOut.String())
		}
		s := out.String()
		for _, c := range []string{"\x1b", "\a", "\u202e", "\n  9 10:00:09"} {
			if strings.Contains(s, c) {
				t.Errorf("job %s --format text prints %q raw:\n%s", sub, c, s)
			}
		}
		if !strings.Contains(s, "⟨U+001B⟩[2J") {
			t.Errorf("job %s --format text does not spell the escape out:\n%s", sub, s)
		}
		// In JSON, the escapes are JSON's: the same strings, nothing raw.
		out.Reset()
		if code := run([]string{"job", sub, "--format", "json", "--data-dir", dir, "job-evil"}, strings.NewReader(""), &out, &errOut); code != exitOK {
			t.Fatalf("job %s --format json: exit %d: %s", sub, code, errOut.String())
		}
		for _, c := range []string{"\x1b", "\a", "\u202e"} {
			if strings.Contains(out.String(), c) {
				t.Errorf("job %s --format json prints %q raw:\n%s", sub, c, out.String())
			}
		}
		var v any
		if err := json.Unmarshal(out.Bytes(), &v); err != nil || !strings.Contains(fmt.Sprint(v), evil) {
			t.Errorf("job %s --format json: %v; the output does not decode to the job's text", sub, err)
		}
	}
}

// The text formats tell the job's waits for a human, read from its task's
// status events: the call after which the job stopped shows where it went
// (INTERVENTION_REQUIRED, not the RUNNING it recorded), how long it waited
// and for whom, the guidance the next call was told first and the start
// of the model's reasoning for a step; job show
// says its seconds are work, and the time waited apart.
func TestJobTextShowsWaits(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := sqlstore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	const id = "job-waits"
	task, err := ts.Create(ctx, &tasks.Task{ID: id, Owner: "bc1p-requester", Status: tasks.Status{State: tasks.StateSubmitted, Timestamp: t0}})
	if err != nil {
		t.Fatal(err)
	}
	status := func(state tasks.State, at time.Duration, note string) {
		t.Helper()
		next := task.Clone()
		next.Status = tasks.Status{State: state, Timestamp: t0.Add(at), Message: note}
		if task, err = ts.Update(ctx, next, task.Version); err != nil {
			t.Fatal(err)
		}
	}
	j := &agent.Job{TaskID: id, Requester: "bc1p-requester", Description: "x", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	call := func(seq int, at time.Duration, guidance string, r agent.Response, o *agent.Observation) {
		t.Helper()
		it := &agent.Interaction{Sequence: seq, Timestamp: t0.Add(at), StateBefore: agent.Running, Guidance: guidance,
			Request:  agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
			Response: r, Observation: o}
		j.Status, j.NextSeq, j.UpdatedAt = r.NewStatus, seq+1, t0.Add(at)
		if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
			t.Fatal(err)
		}
	}
	status(tasks.StateWorking, 0, "the agent is working on the task")
	call(0, 0, "", agent.Response{Status: agent.ResponseError, Kind: agent.KindAPIError, Error: "connection refused", NewStatus: agent.Running, ExecutionTimeSeconds: 0.01}, nil)
	status(tasks.StateInputRequired, 100*time.Millisecond, "the model server failed 4 times in a row: connection refused")
	status(tasks.StateWorking, 16*time.Second, "the agent is working on the task")
	call(1, 16*time.Second, "use notes.md", agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "DELETE_FILE", RawResponse: "{}", Reasoning: "notes.md is\nstale\x1b]52;c;QUJD\x07\x1b[2J\u202e" + strings.Repeat(" and old", 100), NewStatus: agent.InterventionRequired, ExecutionTimeSeconds: 0.02},
		&agent.Observation{Outcome: agent.ObsNeedsConfirmation, Reason: "held"})
	status(tasks.StateInputRequired, 16100*time.Millisecond, "confirmation needed for action a1: deletes a file")
	status(tasks.StateWorking, 21100*time.Millisecond, "approved")
	j.Seconds = 0.03
	call(2, 21100*time.Millisecond, "the operator approved", agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindAgentResponse, Action: "FINISH", RawResponse: "{}", NewStatus: agent.Success, ExecutionTimeSeconds: 0.01}, nil)
	status(tasks.StateCompleted, 21200*time.Millisecond, "done")
	db.Close()

	r := runCLI(t, "", "job", "history", "--format", "text", "--data-dir", dir, id)
	for _, want := range []string{
		"#0 10:00:00 RUNNING → INTERVENTION_REQUIRED: api_error",
		"    waited 15.9 s for the requester: the model server failed 4 times in a row: connection refused\n#1 ",
		"#1 10:00:16 RUNNING → INTERVENTION_REQUIRED: proposal DELETE_FILE (0.02s)\n    told first: use notes.md\n    reasoning: notes.md is⟨U+000A⟩stale⟨U+001B⟩]52;c;QUJD⟨U+0007⟩⟨U+001B⟩[2J⟨U+202E⟩ and old",
		"…\n    needs_confirmation held\n",
		"    waited 5.0 s for an operator: confirmation needed for action a1: deletes a file\n#2 ",
		"#2 10:00:21 RUNNING → SUCCESS",
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("job history --format text: want %q in %s", want, r)
		}
	}
	// The reasoning is the model's text: a terminal's escapes (a
	// clipboard write, a screen clear) and a bidi override in it are
	// spelled out, never sent to the operator's terminal.
	if strings.ContainsAny(r.stdout, "\x1b\x07\u202e") {
		t.Errorf("job history --format text wrote the reasoning's control characters: %q", r.stdout)
	}
	r = runCLI(t, "", "job", "show", "--format", "text", "--data-dir", dir, id)
	for _, want := range []string{
		"0.0 s running (model calls, actions, retry back-offs: what the time limit counts)",
		"  waited 5.0 s for an operator, waited 15.9 s for the requester; 21.1 s from creation to the last update\n",
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("job show --format text: want %q in %s", want, r)
		}
	}
	// The JSON is the stored history, as it was.
	r = runCLI(t, "", "job", "history", "--data-dir", dir, id)
	if r.code != exitOK || strings.Count(r.stdout, `"new_status": "INTERVENTION_REQUIRED"`) != 1 || strings.Contains(r.stdout, "waited") {
		t.Errorf("job history --format json: %s", r)
	}
}

// The text history tells the late lines a worker wrote for past steps,
// skipped during a step, under that step; replay takes them.
func TestJobHistoryTellsLateLines(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, st, j, t0 := newJob(t, dir, "job-late")
	const think = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"THINK","args":{}}`
	for i, late := range [][]int{nil, {0}, {0, 1}} {
		it := &agent.Interaction{Sequence: i, Timestamp: t0.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
			Request:     agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "worker:w"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK", RawResponse: think, LateLines: late, NewStatus: agent.Running},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, Text: "{}"}}
		j.Status, j.NextSeq, j.Steps = agent.Running, i+1, i+1
		if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "text", "--data-dir", dir, "job-late"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"#1 10:00:01 RUNNING → RUNNING: proposal THINK (0.00s)\n    a late line for step 0 was skipped, not run\n",
		"#2 10:00:02 RUNNING → RUNNING: proposal THINK (0.00s)\n    a late line for step 0 was skipped, not run\n    a late line for step 1 was skipped, not run\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("job history --format text:\n%s\nwant %q", s, want)
		}
	}
	if strings.Count(s, "late line") != 3 {
		t.Errorf("job history --format text tells %d late lines; want 3:\n%s", strings.Count(s, "late line"), s)
	}
	out.Reset()
	if code := run([]string{"job", "replay", "--data-dir", dir, "job-late"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job replay: exit %d: %s", code, errOut.String())
	}
}

// The text history tells how many records to cancel work elsewhere (a
// delegate's task) the job's bound dropped: work the node does not
// cancel.
func TestJobHistoryTellsDroppedCancels(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, st, _, t0 := newJob(t, dir, "job-drop")
	if ok, err := st.Claim(ctx, "job-drop", "h1", t0, t0.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	for i := range agent.MaxCancelsPerJob + 2 {
		if err := st.KeepSentCanceling(ctx, "job-drop", "h1", []byte(fmt.Sprint("next ", i)), []byte(fmt.Sprint("work ", i))); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "text", "--data-dir", dir, "job-drop"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	if want := "  2 records to cancel work elsewhere (a delegate's task) dropped past the job's bound of 16: that work is not canceled by the node\n"; !strings.Contains(out.String(), want) {
		t.Errorf("job history --format text:\n%s\nwant %q", out.String(), want)
	}
	if m := historyJSON(t, dir, "job-drop"); m["cancels_dropped"] != float64(2) {
		t.Errorf("cancels_dropped = %v; want 2", m["cancels_dropped"])
	}
}

// historyJSON runs job history --format json on the job id in dir and
// returns the history: it fails the test unless the command succeeds
// with JSON, and reports an error unless the history validates.
func historyJSON(t *testing.T, dir, id string) map[string]any {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "json", "--data-dir", dir, id}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history --format json: exit %d: %s", code, errOut.String())
	}
	var v any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if err := schemas.JobHistory().Validate(v); err != nil {
		t.Errorf("the history does not validate: %v", err)
	}
	m, _ := v.(map[string]any)
	return m
}

// newJob opens the node database of dir and its job store, and makes in
// it a pending job id, created at t0: the database is the caller's to
// close.
func newJob(t *testing.T, dir, id string) (*sqldb.DB, *agent.Store, *agent.Job, time.Time) {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: id, Requester: "bc1p-requester", Description: "x", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	return db, st, j, t0
}

// The text history tells a step the job's cancel gave up (its kind,
// canceled, and what became of the delegate's task, in its error) and how
// many records to cancel work elsewhere were given up after their last
// try: work the node did not cancel. The JSON history validates, and
// replays.
func TestJobHistoryTellsGivenUpCancels(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, st, j, t0 := newJob(t, dir, "job-gu")
	if ok, err := st.Claim(ctx, "job-gu", "h1", t0, t0.Add(time.Hour)); err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if err := st.KeepSentCanceling(ctx, "job-gu", "h1", []byte("next"), []byte("work")); err != nil {
		t.Fatal(err)
	}
	it := &agent.Interaction{Sequence: 0, Timestamp: t0.Add(time.Second), StateBefore: agent.Running,
		Request:  agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "delegate:d"}},
		Response: agent.Response{Status: agent.ResponseError, Kind: agent.KindCanceled, NewStatus: agent.Canceled, Error: "the task was canceled during the call: delegate: context canceled; its task remote-1 on the delegate was canceled (tasks/cancel)"}}
	j.Status, j.Reason = agent.Canceled, "the task was canceled"
	if err := st.Write(ctx, agent.Save{Job: j, Interaction: it, Holder: "h1", Release: true}); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.GiveUpCanceledSent(ctx, "job-gu", []byte("work")); err != nil || !ok {
		t.Fatalf("GiveUpCanceledSent = %v, %v", ok, err)
	}
	db.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "text", "--data-dir", dir, "job-gu"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{
		"  1 record to cancel work elsewhere (a delegate's task) given up after 5 tries the peer did not answer: that work was not canceled by the node, and may still run\n",
		"#0 10:00:01 RUNNING → CANCELED: canceled  (0.00s)\n    error: the task was canceled during the call: delegate: context canceled; its task remote-1 on the delegate was canceled (tasks/cancel)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("job history --format text:\n%s\nwant %q", out.String(), want)
		}
	}
	if m := historyJSON(t, dir, "job-gu"); m["cancels_given_up"] != float64(1) {
		t.Errorf("cancels_given_up = %v; want 1", m["cancels_given_up"])
	}
	out.Reset()
	if code := run([]string{"job", "replay", "--data-dir", dir, "job-gu"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job replay: exit %d: %s", code, errOut.String())
	}
}

// The text history of a step whose held action an operator decided says
// why it was held and who decided, and when: before, it showed only the
// outcome ("approved"), the hold's reason gone.
func TestJobHistoryTellsTheDecision(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, st, j, t0 := newJob(t, dir, "job-decided")
	const del = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"DELETE_FILE","args":{"path":"/sandbox/a.md"}}`
	at := t0.Add(90 * time.Second)
	it := &agent.Interaction{Sequence: 0, Timestamp: t0, StateBefore: agent.Running,
		Request:  agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "DELETE_FILE", RawResponse: del, NewStatus: agent.InterventionRequired},
		Observation: &agent.Observation{Outcome: agent.ObsApproved, ActionID: "act-1", Text: "{}",
			HeldReason: "policy \"destructive\" requires confirmation\nfor DELETE_FILE", DecidedBy: "operator:bc1p-op", DecidedAt: &at}}
	j.Status, j.NextSeq, j.Steps = agent.InterventionRequired, 1, 1
	if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "text", "--data-dir", dir, "job-decided"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	want := "    approved \n    held: policy \"destructive\" requires confirmation⟨U+000A⟩for DELETE_FILE\n    decided by operator:bc1p-op at 10:01:30\n"
	if !strings.Contains(out.String(), want) {
		t.Errorf("job history --format text:\n%s\nwant %q", out.String(), want)
	}
}

// job history prints the history of a job of 1,000 steps one interaction
// at a time: the heap stays far below the history's size. Before, it
// held the whole history (every call's messages rebuilt) and its JSON.
// The printed file replays, as the database's history does.
func TestLongJobHistoryStreamed(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, st, j, t0 := newJob(t, dir, "job-long")
	const steps, size = 1000, 16 << 10
	if err := agenttest.WriteThinking(ctx, st, j, t0, steps, size); err != nil {
		t.Fatal(err)
	}
	db.Close()

	file := filepath.Join(dir, "history.json")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	out := &heapWriter{w: f}
	base := liveHeap()
	var errOut bytes.Buffer
	if code := run([]string{"job", "history", "--data-dir", dir, "job-long"}, strings.NewReader(""), out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if grown := out.peak - min(out.peak, base); grown > uint64(out.n)/8 {
		t.Errorf("job history: the heap grew by %d bytes printing %d", grown, out.n)
	}
	// The agent's tests measure the replays' memory (Replayer, ReplayJSON).
	for _, args := range [][]string{{"--data-dir", dir, "job-long"}, {"--file", file}} {
		var stdout bytes.Buffer
		if code := run(append([]string{"job", "replay"}, args...), strings.NewReader(""), &stdout, &errOut); code != exitOK ||
			!strings.Contains(stdout.String(), "1000 interactions replayed") {
			t.Fatalf("job replay %v: exit %d: %s%s", args, code, stdout.String(), errOut.String())
		}
	}
}

// liveHeap is the heap's size after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// heapWriter writes to w, taking the live heap's size every 256 KiB.
type heapWriter struct {
	w       io.Writer
	n, last int
	peak    uint64
}

func (h *heapWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	if h.n += n; h.n-h.last >= 256<<10 {
		h.last = h.n
		h.peak = max(h.peak, liveHeap())
	}
	return n, err
}
