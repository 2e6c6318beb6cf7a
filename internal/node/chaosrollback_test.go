package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// TestChaosRollbackSIGKILL runs `snapnode run` as a child process on a
// SQLite data folder, has it promote writes (half of them over files the
// test seeded, half new files), and then rolls every one back through the
// admin socket while the node is killed with SIGKILL at random moments,
// restarting it on the same folder each time; rollbacks without an answer
// are asked again. Afterwards each file holds what it held before its
// write (the seeded content, or no file), each action is rolled back and
// audited rolled back exactly once, and `snapnode audit verify` passes.
func TestChaosRollbackSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	const total, kills = 40, 8
	seed := chaosRunSeed(*chaosSeed)
	t.Logf("chaos rollback: %d writes, %d kills, seed %d (-chaos.seed=%d repeats it)", total, kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 2))

	dataDir := filepath.Join(t.TempDir(), "data")
	sandboxDir := filepath.Join(dataDir, "sandbox")
	if err := os.MkdirAll(sandboxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	seeded := func(i int) bool { return i%2 == 0 }
	file := func(i int) string { return fmt.Sprintf("rb-%d.md", i) }
	for i := range total {
		if seeded(i) {
			if err := os.WriteFile(filepath.Join(sandboxDir, file(i)), fmt.Appendf(nil, "before %d\n", i), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := func() *testutil.Daemon {
		return testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: dataDir, Args: []string{
			"--http-listen", "127.0.0.1:0", "--http-rate", "0", "--identity-rate", "0",
		}})
	}
	d := start()

	// The writes, promoted at once (no kill yet).
	clients := chaosClients(t, 4)
	tasks := make([]string, total)
	var wg sync.WaitGroup
	for i := range total {
		wg.Go(func() {
			body, _ := json.Marshal(proposal("WRITE_FILE", map[string]any{"path": "/sandbox/" + file(i), "content": fmt.Sprintf("written %d\n", i)}))
			v, err := chaosSend(t, d, clients[i%len(clients)], &snap.Message{To: d.Address, Method: "message/send", Payload: body})
			if err != nil || v.Status.State != "completed" {
				t.Errorf("write %d: %s %q, %v", i, v.Status.State, v.Status.Message, err)
				return
			}
			tasks[i] = v.ID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	defer db.Close()
	actions := make([]string, total)
	for i, id := range tasks {
		if err := db.R.QueryRowContext(ctx, `SELECT action_id FROM executor_actions WHERE task = ?`, id).Scan(&actions[i]); err != nil {
			t.Fatalf("write %d (task %s): its action: %v", i, id, err)
		}
	}

	// The rollbacks, asked again until answered, while the node is killed.
	var mu sync.Mutex
	answered := make([]bool, total)
	replies := make(chan struct{}, total)
	slots := make(chan struct{}, 8) // well under the admin socket's 32 connections
	round := func(d *testutil.Daemon) {
		var wg sync.WaitGroup
		for i := range total {
			mu.Lock()
			done := answered[i]
			mu.Unlock()
			if done {
				continue
			}
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				_, err := admin.Call(cctx, admin.Path(d.DataDir), admin.Request{Op: "rollback", Action: actions[i]})
				select {
				case replies <- struct{}{}:
				default:
				}
				// Rolled back by an earlier try whose answer a kill cut.
				if err == nil || strings.Contains(err.Error(), "rolled back already") {
					mu.Lock()
					answered[i] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	for k := range kills {
		for len(replies) > 0 {
			<-replies
		}
		mu.Lock()
		left := 0
		for _, a := range answered {
			if !a {
				left++
			}
		}
		mu.Unlock()
		// The kill lands after a random number of this round's answers,
		// while the other rollbacks are on their way.
		after := rng.IntN(max(left/2, 1))
		done := make(chan struct{})
		go func() { round(d); close(done) }()
	wait:
		for range after {
			select {
			case <-replies:
			case <-done:
				break wait
			}
		}
		d.Kill(t)
		<-done
		d = d.Restart(t)
		t.Logf("kill %d after %d answers, %d rollbacks unanswered before it", k+1, after, left)
	}
	// After the last restart, what was never answered is asked again
	// until it is: an action rolled back before a kill cut its answer is
	// refused now, as rolled back already.
	for try := 0; ; try++ {
		round(d)
		mu.Lock()
		left := slices.Contains(answered, false)
		mu.Unlock()
		if !left {
			break
		}
		if try == 10 {
			t.Fatalf("rollbacks still unanswered after the last restart: %v", answered)
		}
	}
	d.Kill(t)

	for i := range total {
		b, err := os.ReadFile(filepath.Join(sandboxDir, file(i)))
		switch {
		case seeded(i) && (err != nil || string(b) != fmt.Sprintf("before %d\n", i)):
			t.Errorf("write %d over a seeded file, rolled back: the file is %q (%v)", i, b, err)
		case !seeded(i) && err == nil:
			t.Errorf("write %d of a new file, rolled back: the file is still there: %q", i, b)
		}
		var state string
		if err := db.R.QueryRowContext(ctx, `SELECT state FROM executor_actions WHERE action_id = ?`, actions[i]).Scan(&state); err != nil {
			t.Fatal(err)
		}
		var rolled int
		if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log WHERE action = ? AND step = 'rolled_back'`, actions[i]).Scan(&rolled); err != nil {
			t.Fatal(err)
		}
		if state != "rolled_back" || rolled != 1 {
			t.Errorf("write %d, action %s: state %s, %d rollbacks audited; want rolled_back, 1", i, actions[i], state, rolled)
		}
	}
	chaosAuditVerify(t, "--data-dir", dataDir)
	if t.Failed() {
		t.Logf("seed %d: -run TestChaosRollbackSIGKILL -chaos.seed=%d repeats the run's choices", seed, seed)
	}
}
