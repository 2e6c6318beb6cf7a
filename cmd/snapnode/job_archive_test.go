package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// archiveJobDir makes a node data folder whose database holds one finished
// agent job of twelve steps, written through the job store as the runtime
// writes it; after the steps in archiveAt the history written so far is
// archived (sealed with key, when given), as the runtime does once it
// passes agent.max_history_bytes.
func archiveJobDir(t *testing.T, archiveAt []int, key []byte) (dir, id string) {
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
	if key != nil {
		sealer, err := agent.NewSealer(key)
		if err != nil {
			t.Fatal(err)
		}
		st.UseKey(sealer)
	}
	id = "job-archived"
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: id, Requester: "bc1p-requester", Description: "write the chapters", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, ReviewSeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	const steps = 12
	for i := range steps {
		action, args, next := "WRITE_FILE", fmt.Sprintf(`{"path":"/sandbox/ch%d.md","content":"chapter %d: %s\n"}`, i, i, strings.Repeat("words ", 20)), agent.Running
		if i == steps-1 {
			action, args, next = "FINISH", `{"response":"the chapters are written"}`, agent.Success
		}
		raw := fmt.Sprintf(`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-%012d","reasoning":"step %d","action":%q,"args":%s}`, i, i, action, args)
		it := &agent.Interaction{Sequence: i, Timestamp: t0.Add(time.Duration(i) * time.Second), StateBefore: agent.Running,
			Request: agent.Request{Messages: []agent.ChatMessage{{Role: "system", Content: "s"}, {Role: "user", Content: "write the chapters; the secret plan is X"}},
				Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work", Model: "m"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: action, RawResponse: raw, NewStatus: next, ExecutionTimeSeconds: 0.25},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, ActionID: fmt.Sprintf("act-%d", i), Text: `{"outcome":"completed"}`}}
		j.Status, j.NextSeq, j.Steps = next, i+1, i+1
		if err := st.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
			t.Fatal(err)
		}
		for _, at := range archiveAt {
			if at == i {
				removed, err := st.Archive(ctx, id, "", i, key != nil)
				if err != nil || removed == 0 {
					t.Fatalf("archive at %d: %d bytes, %v", i, removed, err)
				}
				j.HistoryBytes -= removed
			}
		}
	}
	return dir, id
}

// TestJobHistoryArchived: a history rotated into archive segments prints
// exactly as the same history unrotated (testdata/job-history-archived.golden,
// -update to accept a change), replays, and fails replay once a segment
// is tampered with or missing; a sealed archive needs its key.
func TestJobHistoryArchived(t *testing.T) {
	cmd := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(args, strings.NewReader(""), &out, &errOut)
		return code, out.String(), errOut.String()
	}
	history := func(dir, id string, extra ...string) string {
		t.Helper()
		code, out, errOut := cmd(append(append([]string{"job", "history", "--data-dir", dir}, extra...), id)...)
		if code != exitOK {
			t.Fatalf("job history: exit %d: %s", code, errOut)
		}
		return out
	}
	plainDir, id := archiveJobDir(t, nil, nil)
	want := history(plainDir, id)
	golden := filepath.Join("testdata", "job-history-archived.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(golden); err != nil || string(b) != want {
		t.Fatalf("the unrotated history differs from %s (-update to accept): %v\n%s", golden, err, want)
	}

	key := bytes.Repeat([]byte{7}, agent.HistoryKeySize)
	keyPath := filepath.Join(t.TempDir(), "history.key")
	if err := os.WriteFile(keyPath, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		key  []byte
		args []string
	}{
		{"gzip", nil, nil},
		{"sealed", key, []string{"--config", writeFile(t, t.TempDir(), "node.toml", fmt.Sprintf("[agent]\nhistory_key_file = %q\n", keyPath), 0o600)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, id := archiveJobDir(t, []int{3, 7}, c.key)
			if got := history(dir, id, c.args...); got != want {
				t.Fatalf("the rotated history differs from the unrotated one:\n%s", got)
			}
			if got, wantText := history(dir, id, append(c.args, "--format", "text")...), history(plainDir, id, "--format", "text"); got != wantText {
				t.Fatalf("text: %s\nwant %s", got, wantText)
			}
			args := append(append([]string{"job", "replay", "--data-dir", dir}, c.args...), id)
			if code, out, errOut := cmd(args...); code != exitOK || !strings.Contains(out, "12 interactions replayed") {
				t.Fatalf("job replay: exit %d: %s%s", code, out, errOut)
			}
			db := openDB(t, dir)
			var n int
			var body []byte
			if err := db.R.QueryRow(`SELECT COUNT(*) FROM agent_history_segments WHERE task_id = ?`, id).Scan(&n); err != nil || n != 2 {
				t.Fatalf("%d segments, %v", n, err)
			}
			if err := db.R.QueryRow(`SELECT body FROM agent_history_segments WHERE task_id = ? AND idx = 0`, id).Scan(&body); err != nil {
				t.Fatal(err)
			}
			if c.key != nil {
				// Without the key the sealed archive is not read.
				if code, _, errOut := cmd("job", "history", "--data-dir", dir, id); code != exitFail || !strings.Contains(errOut, "history_key_file") {
					t.Fatalf("sealed, no key: exit %d: %s", code, errOut)
				}
				if bytes.Contains(body, []byte("secret plan")) {
					t.Fatal("the sealed segment holds the prompt in clear")
				}
			}
			// One byte of the first segment changed: replay fails, naming
			// the archive.
			body[len(body)/2] ^= 1
			if _, err := db.W.Exec(`UPDATE agent_history_segments SET body = ? WHERE task_id = ? AND idx = 0`, body, id); err != nil {
				t.Fatal(err)
			}
			if code, _, errOut := cmd(args...); code != exitFail || !strings.Contains(errOut, "segment 0: its content does not match its hash") {
				t.Fatalf("a tampered segment: exit %d: %s", code, errOut)
			}
			// The segment gone: the chain is broken.
			if _, err := db.W.Exec(`DELETE FROM agent_history_segments WHERE task_id = ? AND idx = 0`, id); err != nil {
				t.Fatal(err)
			}
			if code, _, errOut := cmd(args...); code != exitFail || !strings.Contains(errOut, "segment 0 is missing") {
				t.Fatalf("a missing segment: exit %d: %s", code, errOut)
			}
		})
	}
}

// openDB opens the node database in dir, closed at the test's end.
func openDB(t *testing.T, dir string) *sqldb.DB {
	t.Helper()
	db, err := sqldb.Open(context.Background(), "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
