package sqlstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/tasks"
)

// crashEnv makes the test binary the writer of TestCrashSIGKILL: it holds
// the path of the SQLite file to write to.
const crashEnv = "SNAPNODE_SQLSTORE_CRASH_WRITER"

// The life of a task in the crash test, one version per step:
//
//	v1 Create with message 0 · v2 and v3 AppendHistory of messages 1 and 2 ·
//	v4 Update to working · v5 AppendArtifact
const crashSteps = 5

// TestCrashWriter is the child process of TestCrashSIGKILL; it skips
// unless started by it. Workers drive tasks through crashSteps and print
// "ack ID VERSION" once each call has returned, and "ack-replay ID" once a
// replay record is remembered, until the process is killed.
func TestCrashWriter(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("the writer process of TestCrashSIGKILL")
	}
	ctx := context.Background()
	s, err := Open(ctx, "sqlite:"+path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		os.Exit(2)
	}
	var out sync.Mutex
	ack := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...) // unbuffered: one write each
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(3)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				cur, err := s.Create(ctx, crashTask(id))
				if err != nil {
					fail(err)
				}
				ack("ack %s %d", id, cur.Version)
				for k := 1; k <= 2; k++ {
					if cur, err = s.AppendHistory(ctx, id, cur.Version, crashMessage(id, k)); err != nil {
						fail(err)
					}
					ack("ack %s %d", id, cur.Version)
				}
				next := cur.Clone()
				next.Status = tasks.Status{State: tasks.StateWorking, Timestamp: time.Now()}
				if cur, err = s.Update(ctx, next, cur.Version); err != nil {
					fail(err)
				}
				ack("ack %s %d", id, cur.Version)
				if cur, err = s.AppendArtifact(ctx, id, cur.Version, tasks.Artifact{ArtifactID: "out", Parts: []tasks.Part{tasks.TextPart(id)}}); err != nil {
					fail(err)
				}
				ack("ack %s %d", id, cur.Version)
				now := time.Now()
				if _, _, err := s.ReplayStore().Remember(ctx, "bc1pcrash", id, record(now, time.Hour, 7)); err != nil {
					fail(err)
				}
				ack("ack-replay %s", id)
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

func crashTask(id string) *tasks.Task {
	now := time.Now()
	return &tasks.Task{
		ID: id, ContextID: "ctx-" + id, Owner: "bc1powner",
		Status:    tasks.Status{State: tasks.StateSubmitted, Timestamp: now},
		History:   []tasks.Message{crashMessage(id, 0)},
		CreatedAt: now,
	}
}

func crashMessage(id string, k int) tasks.Message {
	return tasks.Message{MessageID: fmt.Sprintf("%s/%d", id, k), Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart(strings.Repeat("x", 200))}}
}

// TestCrashSIGKILL runs a writer process (this test binary, as
// TestCrashWriter), kills it with SIGKILL while eight workers are writing,
// reopens the file it never closed and checks that every write the writer
// saw return is there, and that every task is in a state its steps allow:
// no task, history entry, artifact or replay record lost or duplicated.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a writer process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	child := testutil.StartChild(t, "TestCrashWriter", crashEnv+"="+path)

	// Kill once enough writes returned, whatever is in flight.
	const killAfter = 600
	acked := map[string]int{} // id → highest version the writer saw
	replayed := map[string]bool{}
	sc := bufio.NewScanner(child.Lines)
	n := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 3 && f[0] == "ack":
			v, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("writer said %q", sc.Text())
			}
			acked[f[1]] = max(acked[f[1]], v)
		case len(f) == 2 && f[0] == "ack-replay":
			replayed[f[1]] = true
		default:
			continue
		}
		if n++; n == killAfter {
			child.Kill(t)
		}
	}
	child.WaitKilled(t)
	if n < killAfter {
		t.Fatalf("writer acknowledged %d writes before dying", n)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() == 0 {
		t.Logf("no WAL left behind (%v)", err)
	}

	// Reopen without the writer ever having closed the file.
	ctx := context.Background()
	s := open(t, "sqlite:"+path, Options{})
	var integrity string
	if err := s.r.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q, %v", integrity, err)
	}
	all, err := s.List(ctx, tasks.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]*tasks.Task{}
	for _, tk := range all {
		stored[tk.ID] = tk
		checkCrashTask(t, tk)
	}
	for id, v := range acked {
		tk, ok := stored[id]
		if !ok {
			t.Errorf("task %s (acknowledged at v%d) lost", id, v)
			continue
		}
		if tk.Version < int64(v) {
			t.Errorf("task %s at v%d, the writer saw v%d", id, tk.Version, v)
		}
		// tasks/get answers for each.
		if _, err := s.Get(ctx, id); err != nil {
			t.Errorf("Get %s: %v", id, err)
		}
	}
	for id := range replayed {
		if _, ok, err := s.ReplayStore().Lookup(ctx, "bc1pcrash", id, time.Now()); !ok || err != nil {
			t.Errorf("replay record of %s lost (%v)", id, err)
		}
	}
	t.Logf("writer killed after %d acknowledged writes: %d tasks acknowledged, %d stored, %d replay records acknowledged",
		n, len(acked), len(stored), len(replayed))
	if t.Failed() {
		return
	}
	// The store goes on working on the recovered file.
	if _, err := s.Create(ctx, crashTask("after")); err != nil {
		t.Fatal(err)
	}
}

// checkCrashTask checks a task against crashSteps: its version says how
// many steps it went through, and its contents must be exactly those.
func checkCrashTask(t *testing.T, tk *tasks.Task) {
	t.Helper()
	v := int(tk.Version)
	if v < 1 || v > crashSteps {
		t.Errorf("task %s at v%d", tk.ID, v)
		return
	}
	if want := min(v, 3); len(tk.History) != want {
		t.Errorf("task %s v%d: %d messages, want %d", tk.ID, v, len(tk.History), want)
	}
	for k, m := range tk.History {
		if want := fmt.Sprintf("%s/%d", tk.ID, k); m.MessageID != want {
			t.Errorf("task %s: message %d is %s, want %s", tk.ID, k, m.MessageID, want)
		}
	}
	wantState := tasks.StateSubmitted
	if v >= 4 {
		wantState = tasks.StateWorking
	}
	if tk.Status.State != wantState {
		t.Errorf("task %s v%d: %s, want %s", tk.ID, v, tk.Status.State, wantState)
	}
	if want := v / 5; len(tk.Artifacts) != want {
		t.Errorf("task %s v%d: %d artifacts, want %d", tk.ID, v, len(tk.Artifacts), want)
	}
}
