package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
)

const thinkAnswer = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"r","action":"THINK","args":{}}`

// writeSteps stores steps THINK steps of the job j, each call sending
// the system prompt, the task and, after the first, its last step with
// an observation of size bytes, and text (when not "") in its answer's
// reasoning, its observation and its last message.
func writeSteps(t *testing.T, st *agent.Store, j *agent.Job, t0 time.Time, steps, size int, text string) {
	t.Helper()
	for i := range steps {
		msgs := []agent.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "task" + text}}
		if i > 0 {
			msgs = append(msgs, agent.ChatMessage{Role: "assistant", Content: thinkAnswer},
				agent.ChatMessage{Role: "user", Content: strings.Repeat(string(rune('a'+i%26)), size) + text})
		}
		it := &agent.Interaction{Sequence: i, Timestamp: t0.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
			Guidance: text,
			Request:  agent.Request{Messages: msgs, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
			Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "THINK", RawResponse: thinkAnswer,
				Reasoning: text, NewStatus: agent.Running},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, Reason: text,
				Text: strings.Repeat(string(rune('a'+(i+1)%26)), size) + text}}
		j.Status, j.NextSeq, j.Steps = agent.Running, i+1, i+1
		if err := st.Write(context.Background(), agent.Save{Job: j, Interaction: it}); err != nil {
			t.Fatal(err)
		}
	}
}

// job history --format text prints the history of a job of 1,000 steps
// one interaction at a time: the heap stays far below the history's
// size. Before, it read the whole history (every call's messages
// rebuilt) to print it.
func TestLongJobHistoryTextStreamed(t *testing.T) {
	dir := t.TempDir()
	db, st, j, t0 := newJob(t, dir, "job-long")
	const steps, size = 1000, 16 << 10
	writeSteps(t, st, j, t0, steps, size, "")
	db.Close()

	out := &eachWriteHeap{}
	base := liveHeap()
	var errOut bytes.Buffer
	if code := run([]string{"job", "history", "--format", "text", "--data-dir", dir, "job-long"}, strings.NewReader(""), out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	if n := strings.Count(out.String(), "\n#"); n != steps {
		t.Fatalf("%d steps printed; want %d:\n%s", n, steps, out.String())
	}
	// The history holds some 2×16 KiB a step: 32 MB.
	if grown := out.peak - min(out.peak, base); grown > 4<<20 {
		t.Errorf("job history --format text: the heap grew by %d bytes printing a history of %d steps of %d bytes", grown, steps, 2*size)
	}
}

// eachWriteHeap keeps what is written, taking the live heap's size at
// each write.
type eachWriteHeap struct {
	bytes.Buffer
	peak uint64
}

func (h *eachWriteHeap) Write(p []byte) (int, error) {
	h.peak = max(h.peak, liveHeap())
	return h.Buffer.Write(p)
}

// job history prints, one interaction at a time, exactly what
// json.MarshalIndent prints of the whole history, whatever the history
// holds: HTML's characters, U+2028 and U+2029, bytes that are not
// UTF-8, text that looks like the members around the interactions, or
// no interaction at all.
func TestJobHistoryJSONIsMarshalIndent(t *testing.T) {
	for _, c := range []struct {
		name  string
		steps int
		text  string
	}{
		{"no interactions", 0, ""},
		{"one", 1, ""},
		{"html", 3, `<script>alert("&")</script>`},
		{"line separators", 3, "a\u2028b\u2029c"},
		{"invalid utf-8", 3, "\xff\xfe\xc3(\xed\xa0\x80"},
		{"members' look", 2, "\n  ],\n  \"interactions\": [],\n  \"recovery_points\": []\n}\\"},
		{"control characters", 2, "\x00\x1b[31m\t\r"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			db, st, j, t0 := newJob(t, dir, "job-odd")
			j.Description = c.text + `"interactions": []`
			writeSteps(t, st, j, t0, c.steps, 8, c.text)
			if c.steps == 0 {
				j.Status = agent.Running
				if err := st.Write(context.Background(), agent.Save{Job: j}); err != nil {
					t.Fatal(err)
				}
			}
			h, err := st.History(context.Background(), "job-odd")
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.MarshalIndent(h, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			db.Close()
			var out, errOut bytes.Buffer
			if code := run([]string{"job", "history", "--data-dir", dir, "job-odd"}, strings.NewReader(""), &out, &errOut); code != exitOK {
				t.Fatalf("job history: exit %d: %s", code, errOut.String())
			}
			if got := out.String(); got != string(want)+"\n" {
				t.Errorf("job history printed\n%q\nwant json.MarshalIndent's\n%q", got, want)
			}
		})
	}
}

// A history printed by an older build carries no messages_sha256 (nor
// held_reason, decided_by, decided_at): job replay --file still replays
// it, and says that its messages were not checked. Before, it said
// "consistent" as of a history whose every call was checked, and a
// history stripped of its hashes hid a changed message that way.
func TestJobReplayOfAnOlderHistory(t *testing.T) {
	dir := t.TempDir()
	db, st, j, t0 := newJob(t, dir, "job-old")
	writeSteps(t, st, j, t0, 3, 8, "")
	db.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"job", "history", "--data-dir", dir, "job-old"}, strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("job history: exit %d: %s", code, errOut.String())
	}
	var lines []string
	for l := range strings.Lines(out.String()) {
		if !strings.Contains(l, `"messages_sha256"`) {
			lines = append(lines, l)
		}
	}
	older := strings.Join(lines, "")
	if older == out.String() {
		t.Fatal("the printed history has no messages_sha256")
	}
	for name, text := range map[string]string{
		"older":               older,
		"older, then changed": strings.Replace(older, `"content": "task"`, `"content": "another task"`, 1),
	} {
		file := filepath.Join(dir, "history.json")
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		if code := run([]string{"job", "replay", "--file", file}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
			t.Fatalf("%s: job replay: exit %d: %s", name, code, stderr.String())
		}
		want := "job job-old: 3 interactions replayed, consistent; 3 carry no messages_sha256 (written by an older build): their messages were not checked\n"
		if stdout.String() != want {
			t.Errorf("%s: job replay printed %q; want %q", name, stdout.String(), want)
		}
	}
	// The history as printed says nothing of it.
	file := filepath.Join(dir, "history.json")
	if err := os.WriteFile(file, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--file", file}, {"--data-dir", dir, "job-old"}} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"job", "replay"}, args...), strings.NewReader(""), &stdout, &stderr); code != exitOK ||
			stdout.String() != "job job-old: 3 interactions replayed, consistent\n" {
			t.Errorf("job replay %v: exit %d: %q %s", args, code, stdout.String(), stderr.String())
		}
	}
}
