package node_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
)

var (
	replicasTasks  = flag.Int("replicas.tasks", 120, "the tasks TestReplicasSIGKILL sends")
	replicasRounds = flag.Int("replicas.rounds", 8, "the rounds of TestReplicasSIGKILL, each ending with a SIGKILL (and restart) of one replica")
	replicasSeed   = flag.Uint64("replicas.seed", 0, "the seed of TestReplicasSIGKILL's random kills (0: a new one, logged)")
)

// TestReplicasSIGKILL runs two `snapnode run` child processes on one
// PostgreSQL database, sharing one identity (one key file) and one
// sandbox folder, each with its own data folder, HTTP listener and
// embedded relay (unused: the requests go over HTTP). Four requesters
// send WRITE_FILE proposals, each of a file of its own holding a unique
// token, and every request goes to both replicas: the same signed message,
// so that a task made twice would show. In each round one replica
// (alternating) is killed with SIGKILL after a random number of the
// round's answers, while the other requests are on their way, and
// restarted; requests without an answer are sent again (to both) in the
// next round. Operators see a replica killed every 30 s; here the kills
// come once a round, scaled to the test's seconds.
//
// After the last round both replicas are stopped and the tasks and
// actions they left interrupted are aged by proposals.InterruptedAfter
// (what a replica waits before it takes up work another may be doing),
// then both start again and reconcile. Then: no task is doubled (each
// message makes at most one task, and both replicas answer it with the
// same one); none is lost (every task id answered is found by tasks/get,
// and every task stored was answered); none is left submitted or working;
// each token is written exactly once, by its task, in the shared sandbox,
// with the executor's records and the audit log agreeing; and `snapnode
// audit verify` passes.
//
// It runs 120 tasks and 8 rounds (-replicas.tasks and -replicas.rounds
// change them). The seed is logged: -replicas.seed repeats a run's choices.
func TestReplicasSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dsn := testdb.Postgres(t) // skips, saying how to run it, without SNAPNODE_TEST_POSTGRES
	total, rounds := *replicasTasks, *replicasRounds
	seed := chaosRunSeed(*replicasSeed)
	t.Logf("replicas: %d tasks, %d rounds, seed %d (-replicas.seed=%d repeats it)", total, rounds, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	dir := t.TempDir()
	sandboxDir := filepath.Join(dir, "sandbox")
	if err := os.MkdirAll(sandboxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	keyFile, _ := sharedKeyFile(t, dir)
	var replicas [2]*testutil.Daemon
	for i := range replicas {
		replicas[i] = testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: filepath.Join(dir, fmt.Sprintf("replica-%d", i)), Args: []string{
			"--key", keyFile, "--database", dsn, "--sandbox-dir", sandboxDir, "--http-listen", "127.0.0.1:0",
			"--http-rate", "0", "--identity-rate", "0",
		}})
	}
	if replicas[0].Address != replicas[1].Address {
		t.Fatalf("replicas have two identities: %s, %s", replicas[0].Address, replicas[1].Address)
	}
	addr, err := identity.ParseAddress(replicas[0].Address)
	if err != nil {
		t.Fatal(err)
	}

	// The tasks and their requesters. Each message is signed once, here:
	// every send, to either replica, carries the same one.
	var keys []*identity.Key
	var clients []*client.HTTP
	for range 4 {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
		clients = append(clients, newHTTPClientWith(t, k))
	}
	all := make([]*chaosTask, total)
	messageIDs := make([]string, total) // the A2A messageId of each task's message
	for i := range all {
		r := rng.IntN(len(clients))
		c := &chaosTask{n: i, kind: chaosWrite, token: fmt.Sprintf("token-%d-%016x", i, rng.Uint64()), client: clients[r]}
		payload := proposal("WRITE_FILE", map[string]any{"path": "/sandbox/" + c.file(), "content": c.token + "\n"})
		messageIDs[i] = payload["message"].(map[string]any)["messageId"].(string)
		body, _ := json.Marshal(payload)
		c.msg = &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest,
			From: keys[r].Address(addr.Network), To: replicas[0].Address, Method: "message/send", Payload: body,
			Timestamp: time.Now().Unix()}
		if err := c.msg.Sign(keys[r]); err != nil {
			t.Fatal(err)
		}
		all[i] = c
	}

	// send sends a task's message to one replica and notes the answer.
	var mu sync.Mutex // guards the answers noted in the tasks, and refused
	// refused holds the tasks a copy of whose message was answered 2006: the
	// other replica held the message (its answer not kept yet, or never: it
	// was killed before storing it).
	refused := map[*chaosTask]bool{}
	answers := make(chan struct{}, 2*total)
	send := func(d *testutil.Daemon, c *chaosTask) {
		m := *c.msg // the same signed message, sent again
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := c.client.Send(ctx, d.HTTPURL, &m)
		if err != nil {
			return // killed on its way: sent again next round
		}
		var p map[string]any
		if err := json.Unmarshal(resp.Payload, &p); err != nil {
			t.Errorf("task %d: answer %s: %v", c.n, resp.Payload, err)
			return
		}
		if p["error"] != nil {
			if code, _ := p["error"].(map[string]any)["code"].(float64); int(code) == int(snap.CodeDuplicateMessage) {
				mu.Lock()
				refused[c] = true
				mu.Unlock()
			}
			return
		}
		v := taskOf(t, p)
		select {
		case answers <- struct{}{}:
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if c.id != "" && v.ID != c.id {
			t.Errorf("task %d: doubled: answered as task %s and as task %s", c.n, c.id, v.ID)
		}
		if c.id == "" {
			c.id = v.ID
		}
		c.state = v.Status.State
	}
	// round sends every task of batch without a settled answer to both
	// replicas at once, and returns how many tasks it sends.
	round := func(batch []*chaosTask) (*sync.WaitGroup, int) {
		var wg sync.WaitGroup
		sent := 0
		for _, c := range batch {
			mu.Lock()
			again := c.id == "" || c.state == "submitted" || c.state == "working"
			mu.Unlock()
			if !again {
				continue
			}
			sent++
			for _, d := range replicas {
				wg.Go(func() { send(d, c) })
			}
		}
		return &wg, sent
	}

	per := (total + rounds - 1) / rounds
	for k := range rounds {
		batch := all[:min(total, (k+1)*per)]
		for len(answers) > 0 {
			<-answers
		}
		wg, sent := round(batch)
		after := rng.IntN(max(sent, 1))
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for range after {
			select {
			case <-answers:
			case <-done:
			}
		}
		victim := k % 2
		replicas[victim].Kill(t)
		<-done
		mu.Lock()
		answered := 0
		for _, c := range batch {
			if c.id != "" {
				answered++
			}
		}
		mu.Unlock()
		t.Logf("round %d: replica %d killed after %d answers of %d tasks sent: %d of %d tasks have had an answer", k+1, victim, after, sent, answered, len(batch))
		replicas[victim] = replicas[victim].Restart(t)
	}
	wg, _ := round(all)
	wg.Wait()

	// Both stop; what they left interrupted is aged past what a replica
	// leaves to another, and both start again and take it up.
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, d := range replicas {
		d.Kill(t)
	}
	age := (proposals.InterruptedAfter + time.Minute).Microseconds()
	res, err := db.W.ExecContext(ctx, `UPDATE tasks SET status_ts = status_ts - $1 WHERE state IN ('submitted', 'working', 'input_required')`, age)
	if err != nil {
		t.Fatal(err)
	}
	agedTasks, _ := res.RowsAffected()
	res, err = db.W.ExecContext(ctx, `UPDATE executor_actions SET updated_at = updated_at - $1 WHERE state IN ('pending', 'approving', 'promoting', 'rolling_back')`, age)
	if err != nil {
		t.Fatal(err)
	}
	agedActions, _ := res.RowsAffected()
	t.Logf("after the last round: %d tasks and %d actions left interrupted", agedTasks, agedActions)
	for i, d := range replicas {
		replicas[i] = d.Restart(t)
	}
	wg, _ = round(all) // the answers the kills lost
	wg.Wait()

	stored := 0 // the messages answered with a task; the others got 2006 only
	for _, c := range all {
		switch {
		case c.id != "":
			stored++
		case !refused[c]:
			t.Errorf("task %d: no answer after the last restart", c.n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// 0 lost: every task answered is found, by either replica, and settles.
	views := map[string]taskView{}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range all {
		for i := 0; c.id != ""; i++ {
			v := chaosGet(t, replicas[i%2], c)
			views[c.id] = v
			if v.Status.State != "submitted" && v.Status.State != "working" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("task %d %s is still %s %q after both replicas reconciled", c.n, c.id, v.Status.State, v.Status.Message)
				break
			}
			time.Sleep(50 * time.Millisecond) // a replica works on it
		}
	}

	// 0 doubled: each message made at most one task, the one answered.
	var inStore int
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&inStore); err != nil {
		t.Fatal(err)
	}
	if inStore != stored {
		t.Errorf("the database holds %d tasks; %d messages were answered with a task, the %d others only with 2006", inStore, stored, total-stored)
	}
	for i, c := range all {
		rows, err := db.R.QueryContext(ctx, `SELECT id FROM tasks WHERE position($1 in history) > 0`, messageIDs[i])
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		switch {
		case len(ids) > 1:
			t.Errorf("task %d: doubled: its message made tasks %v", c.n, ids)
		case c.id == "" && len(ids) != 0:
			t.Errorf("task %d: never answered with a task, yet stored as %v", c.n, ids)
		case c.id != "" && (len(ids) != 1 || ids[0] != c.id):
			t.Errorf("task %d: answered as task %s, stored as %v", c.n, c.id, ids)
		}
	}

	// Each token written once, by its task: the sandbox, the executor's
	// records and the audit log agree.
	records, promoted := chaosRecords(t, ctx, db)
	counts := map[string]int{}
	byFile := map[string]bool{}
	for _, c := range all {
		byFile[c.file()] = true
		if c.id == "" {
			counts["never stored"]++
			if b, err := os.ReadFile(filepath.Join(sandboxDir, c.file())); err == nil {
				t.Errorf("task %d, never stored: its file %s holds %q", c.n, c.file(), b)
			}
			continue
		}
		v := views[c.id]
		counts[v.Status.State]++
		checkChaosTask(t, sandboxDir, c, v, records[c.id], promoted[c.id])
	}
	t.Logf("after %d rounds: %v", rounds, counts)
	for _, e := range workspaceEntries(t, sandboxDir) {
		if !byFile[e.Name()] {
			t.Errorf("the sandbox holds %s, which no task wrote", e.Name())
		}
	}

	for _, d := range replicas {
		d.Kill(t)
	}
	chaosAuditVerify(t, "--data-dir", replicas[0].DataDir, "--key", keyFile, "--database", dsn)
}
