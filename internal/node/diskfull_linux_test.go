package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// The node's data folder (its database and the sandbox) is a small tmpfs
// that fills up while the node runs (needs the right to mount, as root:
// skipped otherwise). Writes sent meanwhile are refused (5003, nothing
// stored) or accepted with their run cut short (the task answered as it
// stands); none is applied. The node is stopped cleanly on the full disk
// (its seal at stop fails) and once more with SIGKILL, the room is freed,
// and it restarts: the tasks accepted are taken up and complete, the
// refused requests sent again complete, each write is applied and audited
// exactly once, the audit log tells every action to its end, and
// `snapnode audit verify` passes against the record of the last seal.
func TestDiskFullThenRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dataDir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dataDir, syscall.MNT_DETACH) })
	var logs testutil.LockedBuffer
	d := testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: dataDir, Stderr: &logs, Args: []string{
		"--http-listen", "127.0.0.1:0", "--http-rate", "0", "--identity-rate", "0",
	}})
	cl := chaosClients(t, 1)[0]
	write := func(i int) *snap.Message {
		body, _ := json.Marshal(proposal("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/full-%d.md", i), "content": fmt.Sprintf("full %d\n", i)}))
		return &snap.Message{To: d.Address, Method: "message/send", Payload: body}
	}
	msgs := []*snap.Message{write(0)}
	if v, err := chaosSend(t, d, cl, msgs[0]); err != nil || v.Status.State != "completed" {
		t.Fatalf("write before the disk is full: %s %q, %v", v.Status.State, v.Status.Message, err)
	}

	// Fill the folder's file system.
	filler := filepath.Join(dataDir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()

	accepted := map[int]string{} // the writes answered with a task, by number
	for i := 1; i <= 8; i++ {
		m := write(i)
		msgs = append(msgs, m)
		v, err := chaosSend(t, d, cl, m)
		if err != nil {
			continue // refused: nothing of it stored
		}
		accepted[i] = v.ID
		if v.Status.State == "completed" {
			t.Errorf("write %d completed on a full disk", i)
		}
	}
	for i := 1; i <= 8; i++ {
		if _, err := os.Stat(filepath.Join(dataDir, "sandbox", fmt.Sprintf("full-%d.md", i))); err == nil {
			t.Errorf("write %d applied on a full disk", i)
		}
	}
	t.Logf("on the full disk: %d of 8 writes accepted", len(accepted))

	// A clean stop on the full disk, a restart, a kill.
	d.Cmd.Process.Signal(os.Interrupt)
	d.Cmd.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	d = d.Restart(t)
	d.Kill(t)
	d = d.Restart(t)

	for i, m := range msgs {
		v, err := chaosSend(t, d, cl, m) // a retry: the task, or processed anew
		if err != nil {
			t.Fatalf("write %d after the restart: %v", i, err)
		}
		if id, ok := accepted[i]; ok && v.ID != id {
			t.Errorf("write %d: the retry answered task %s; the first answer was %s", i, v.ID, id)
		}
		if v.Status.State != "completed" {
			t.Errorf("write %d after the restart: %s %q", i, v.Status.State, v.Status.Message)
		}
		accepted[i] = v.ID
		if b, err := os.ReadFile(filepath.Join(dataDir, "sandbox", fmt.Sprintf("full-%d.md", i))); err != nil || string(b) != fmt.Sprintf("full %d\n", i) {
			t.Errorf("write %d: the file is %q, %v", i, b, err)
		}
	}
	d.Kill(t)

	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	defer db.Close()
	states := map[string]string{}
	for i, id := range accepted {
		states[id] = "completed"
		var promoted int
		if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`, id).Scan(&promoted); err != nil {
			t.Fatal(err)
		}
		if promoted != 1 {
			t.Errorf("write %d (task %s): %d promotions audited; want 1", i, id, promoted)
		}
	}
	chaosAuditTrails(t, db, states)
	chaosAuditVerify(t, "--data-dir", dataDir)
	if t.Failed() {
		t.Logf("the node's log:\n%s", logs.String())
	}
}
