package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/agenttest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// longJob stores a job of steps interactions, each call sending the
// system prompt, the task and its last step (two messages of size
// bytes): a history of about steps×2×size bytes, read back whole.
func longJob(t *testing.T, steps, size int) (*agent.Store, string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	j := &agent.Job{TaskID: "long", Requester: "bc1p-requester", Description: "x", Status: agent.Pending, Phase: "work",
		RecoverySeq: -1, CreatedAt: t0, UpdatedAt: t0}
	if _, err := st.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := agenttest.WriteThinking(ctx, st, j, t0, steps, size); err != nil {
		t.Fatal(err)
	}
	return st, j.TaskID
}

// The history of a job of 1,000 steps is read and replayed one
// interaction at a time: once replayed, the interactions read are
// garbage but the newest two, where Interactions and History hold them
// all.
func TestLongHistoryReplaysStreamed(t *testing.T) {
	const steps = 1000
	st, id := longJob(t, steps, 1024)
	ctx := context.Background()
	r := agent.NewReplayer(64 << 10)
	var seen []weak.Pointer[agent.Interaction]
	err := st.EachInteraction(ctx, id, func(it *agent.Interaction) error {
		seen = append(seen, weak.Make(it))
		return r.Add(it)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != steps {
		t.Fatalf("%d interactions read; want %d", len(seen), steps)
	}
	runtime.GC()
	live := 0
	for _, p := range seen {
		if p.Value() != nil {
			live++
		}
	}
	if live > 2 {
		t.Errorf("%d of %d interactions still held after the replay; want at most 2", live, steps)
	}
	if err := r.End(&agent.History{JobID: id, Status: agent.Running}); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(r)
	r = agent.NewReplayer(64 << 10)
	if err := st.ReplayJob(ctx, id, r); err != nil || r.N() != steps {
		t.Fatalf("ReplayJob: %d, %v; want %d replayed", r.N(), err, steps)
	}
}

// The history printed as JSON replays from its file one interaction at a
// time: the heap stays far below the file's size throughout.
func TestLongHistoryFileReplaysStreamed(t *testing.T) {
	const steps, size = 1000, 16 << 10
	st, id := longJob(t, steps, size)
	h, err := st.History(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "history.json")
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fileSize := len(b)
	b, h = nil, nil
	runtime.GC()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mr := &heapReader{r: f}
	base := ms.HeapAlloc
	r := agent.NewReplayer(64 << 10)
	gotID, err := agent.ReplayJSON(bufio.NewReader(mr), r)
	if n := r.N(); err != nil || gotID != id || n != steps {
		t.Fatalf("ReplayJSON: %s, %d, %v; want %s, %d replayed", gotID, r.N(), err, id, steps)
	}
	if grown := mr.peak - min(mr.peak, base); grown > uint64(fileSize)/8 {
		t.Errorf("the heap grew by %d bytes replaying a file of %d", grown, fileSize)
	}
	t.Logf("the heap grew by %d bytes (from %d) replaying a file of %d", mr.peak-min(mr.peak, base), base, fileSize)
}

// heapReader reads r at most 64 KiB at a time, taking the live heap's
// size (after a collection) every 256 KiB and at the end.
type heapReader struct {
	r    *os.File
	read int
	peak uint64
}

func (h *heapReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p[:min(len(p), 64<<10)])
	if h.read += n; h.read >= 256<<10 || err != nil {
		h.read = 0
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		h.peak = max(h.peak, ms.HeapAlloc)
	}
	return n, err
}
