package node_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

var (
	chaosTasks = flag.Int("chaos.tasks", 200, "the tasks TestChaosSIGKILL sends")
	chaosKills = flag.Int("chaos.kills", 10, "the SIGKILLs (and restarts) of TestChaosSIGKILL")
	chaosSeed  = flag.Uint64("chaos.seed", 0, "the seed of TestChaosSIGKILL's random kills (0: a new one, logged)")
)

// chaosKind is what a task of the chaos test asks of the node.
type chaosKind string

const (
	chaosWrite  chaosKind = "write"  // WRITE_FILE of a new file, promoted at once
	chaosRead   chaosKind = "read"   // READ_FILE of a seeded file
	chaosRename chaosKind = "rename" // RENAME_FILE of a seeded file, held for the operator
	chaosDelete chaosKind = "delete" // DELETE_FILE of a seeded file, held for the operator
	chaosAgent  chaosKind = "agent"  // free text: the agent has the model write a new file
)

// chaosTask is one task of the chaos test and what the test saw of it.
type chaosTask struct {
	n      int
	kind   chaosKind
	token  string // in the content of the file the task writes or reads
	client *client.HTTP
	msg    *snap.Message // signed at the first send; every later send is a retry

	id       string // the task id of the first answer
	state    string // the state of the last answer
	approved bool   // an approval of its held action was answered
}

// file is the name, in the sandbox, of the file the task works on, and
// moved the destination of a rename.
func (c *chaosTask) file() string  { return fmt.Sprintf("%s-%d.md", c.kind, c.n) }
func (c *chaosTask) moved() string { return fmt.Sprintf("%s-%d-moved.md", c.kind, c.n) }

// TestChaosSIGKILL runs `snapnode run` as a child process on a SQLite data
// folder with an agent (a scripted model server) and kills it with
// SIGKILL at random moments while proposal tasks (writes, reads, renames
// and deletes, the last two held and approved through the admin socket)
// and agent jobs are in flight; it restarts the node on the same folder
// each time, retries every request that got no answer and approves held
// actions. After the last restart and the node's reconciliation: every
// task accepted is found by tasks/get under the id first answered; none is
// left submitted or working (input_required only with its held action
// still pending); the sandbox, the executor's records and the audit log
// agree for each task (a change present is recorded promoted once and the
// task completed, a change recorded as not applied is absent, no write was
// applied twice); and `snapnode audit verify` passes.
//
// It runs 200 tasks and 10 kills (-chaos.tasks and -chaos.kills change
// them; a run takes seconds). The seed is logged: -chaos.seed repeats a
// run's choices.
func TestChaosSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	total, kills := *chaosTasks, *chaosKills
	seed := chaosRunSeed(*chaosSeed)
	t.Logf("chaos: %d tasks, %d kills, seed %d (-chaos.seed=%d repeats it)", total, kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	sandboxDir := filepath.Join(dataDir, "sandbox")
	if err := os.MkdirAll(sandboxDir, 0o700); err != nil {
		t.Fatal(err)
	}

	// The tasks, their requesters and the files they find in the sandbox.
	clients := chaosClients(t, 4)
	kinds := []chaosKind{chaosWrite, chaosWrite, chaosWrite, chaosRead, chaosRename, chaosDelete, chaosAgent, chaosAgent}
	all := make([]*chaosTask, total)
	byFile := map[string]*chaosTask{}
	for i := range all {
		c := &chaosTask{n: i, kind: kinds[rng.IntN(len(kinds))], token: fmt.Sprintf("token-%d-%016x", i, rng.Uint64()), client: clients[rng.IntN(len(clients))]}
		all[i] = c
		byFile[c.file()] = c
		if c.kind == chaosRead || c.kind == chaosRename || c.kind == chaosDelete {
			if err := os.WriteFile(filepath.Join(sandboxDir, c.file()), []byte(c.token+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The model writes the file its task names, then finishes once it is
	// told the write was done.
	jobFile := regexp.MustCompile(`chaos job: write (agent-\d+\.md) with (\S+)`)
	d := startChaosNode(t, dir, dataDir, "1m", jobFile, func(all string, m []string) llmtest.Reply {
		var reply llmtest.Reply
		if strings.Contains(all, `"action":"WRITE_FILE"`) && strings.Contains(all, `"outcome":"completed"`) {
			reply = finish("wrote " + m[1])
		} else {
			reply = llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/" + m[1], "content": m[2] + "\n"}))
		}
		reply.Delay = 20 * time.Millisecond // so that kills land during model calls too
		return reply
	})

	// send sends (or sends again) a task's request, notes the answer and
	// tells answers.
	var mu sync.Mutex // guards the answers noted in the tasks
	answers := make(chan struct{}, total)
	send := func(d *testutil.Daemon, c *chaosTask) error {
		if c.msg == nil {
			var payload map[string]any
			switch c.kind {
			case chaosWrite:
				payload = proposal("WRITE_FILE", map[string]any{"path": "/sandbox/" + c.file(), "content": c.token + "\n"})
			case chaosRead:
				payload = proposal("READ_FILE", map[string]any{"path": "/sandbox/" + c.file()})
			case chaosRename:
				payload = proposal("RENAME_FILE", map[string]any{"source": "/sandbox/" + c.file(), "destination": "/sandbox/" + c.moved()})
			case chaosDelete:
				payload = proposal("DELETE_FILE", map[string]any{"path": "/sandbox/" + c.file()})
			case chaosAgent:
				payload = text(fmt.Sprintf("chaos job: write %s with %s", c.file(), c.token))
				payload["message"].(map[string]any)["messageId"] = uuid.NewString()
			}
			body, _ := json.Marshal(payload)
			c.msg = &snap.Message{To: d.Address, Method: "message/send", Payload: body}
		}
		v, err := chaosSend(t, d, c.client, c.msg)
		if err != nil {
			return err
		}
		select {
		case answers <- struct{}{}:
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if c.id != "" && v.ID != c.id {
			t.Errorf("task %d (%s): a retry answered task %s, the first answer %s", c.n, c.kind, v.ID, c.id)
		}
		if c.id == "" {
			c.id = v.ID
		}
		c.state = v.Status.State
		return nil
	}
	approve := func(d *testutil.Daemon, c *chaosTask) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := admin.Call(ctx, admin.Path(d.DataDir), admin.Request{Op: "approve", Task: c.id}); err == nil {
			mu.Lock()
			c.approved = true
			mu.Unlock()
		}
	}
	// round sends every task of batch that has no answer yet and approves
	// the held actions the answers named, each in its own goroutine, and
	// returns how many requests it sends.
	round := func(d *testutil.Daemon, batch []*chaosTask, approveHeld func() bool) (*sync.WaitGroup, int) {
		var wg sync.WaitGroup
		sent := 0
		for _, c := range batch {
			mu.Lock()
			id, state, approved := c.id, c.state, c.approved
			mu.Unlock()
			switch {
			case id == "" || state == "submitted" || state == "working":
				sent++
				wg.Go(func() {
					if send(d, c) != nil {
						return
					}
					mu.Lock()
					held := c.state == "input_required"
					mu.Unlock()
					if held && approveHeld() {
						approve(d, c)
					}
				})
			case state == "input_required" && !approved && approveHeld():
				wg.Go(func() { approve(d, c) })
			}
		}
		return &wg, sent
	}
	var rngMu sync.Mutex
	coin := func() bool { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(2) == 0 }

	per := (total + kills - 1) / kills
	for k := range kills {
		batch := all[:min(total, (k+1)*per)]
		for len(answers) > 0 {
			<-answers
		}
		wg, sent := round(d, batch, coin)
		// The kill lands after a random number of this round's answers,
		// while the other requests are on their way.
		rngMu.Lock()
		after := rng.IntN(max(sent, 1))
		rngMu.Unlock()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		for range after {
			select {
			case <-answers:
			case <-done:
			}
		}
		d.Kill(t)
		<-done
		mu.Lock()
		answered := 0
		for _, c := range batch {
			if c.id != "" {
				answered++
			}
		}
		mu.Unlock()
		t.Logf("kill %d after %d answers of %d requests: %d of %d tasks sent have had an answer", k+1, after, sent, answered, len(batch))
		d = d.Restart(t)
	}

	// After the last restart: every request is answered (a retry at
	// most), the held actions approved or left held at random, and every
	// task settles.
	wg, _ := round(d, all, coin)
	wg.Wait()
	stored := 0 // the requests answered with a task: all of them
	for _, c := range all {
		if c.id == "" {
			t.Errorf("task %d (%s): no answer after the last restart", c.n, c.kind)
			continue
		}
		stored++
	}
	if t.Failed() {
		t.FailNow()
	}
	views := map[string]taskView{}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range all {
		for c.id != "" {
			v := chaosGet(t, d, c)
			views[c.id] = v
			if v.Status.State != "submitted" && v.Status.State != "working" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("task %d (%s) %s is still %s %q after the last restart", c.n, c.kind, c.id, v.Status.State, v.Status.Message)
				break
			}
			time.Sleep(50 * time.Millisecond) // the agent works on it
		}
	}

	// The executor's records and the audit log, per task.
	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	defer db.Close()
	records, promoted := chaosRecords(t, ctx, db)

	// Each task the node holds was answered to its requester: none was
	// created by a request whose retry was then refused.
	var inStore int
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks`).Scan(&inStore); err != nil {
		t.Fatal(err)
	}
	if inStore != stored {
		t.Errorf("the node holds %d tasks; %d were answered to their requesters", inStore, stored)
	}

	counts := map[string]int{}
	for _, c := range all {
		if c.id == "" { // nothing of it may have run
			counts[string(c.kind)+" never stored"]++
			b, err := os.ReadFile(filepath.Join(sandboxDir, c.file()))
			seeded := c.kind == chaosRead || c.kind == chaosRename || c.kind == chaosDelete
			if seeded != (err == nil) || (seeded && string(b) != c.token+"\n") {
				t.Errorf("task %d (%s), never stored: its file %s is %q (%v)", c.n, c.kind, c.file(), b, err)
			}
			continue
		}
		v := views[c.id]
		if st := v.Status.State; st == "failed" {
			counts[fmt.Sprintf("%s failed (%s)", c.kind, v.Status.Message)]++
		} else {
			counts[string(c.kind)+" "+st]++
		}
		checkChaosTask(t, sandboxDir, c, v, records[c.id], promoted[c.id])
	}
	t.Logf("after %d kills: %v", kills, counts)
	states := map[string]string{}
	for id, v := range views {
		states[id] = v.Status.State
	}
	chaosAuditTrails(t, db, states)

	// Nothing else appeared in the sandbox.
	for _, e := range workspaceEntries(t, sandboxDir) {
		name := strings.TrimSuffix(e.Name(), "-moved.md")
		if name != e.Name() {
			name += ".md"
		}
		if byFile[name] == nil {
			t.Errorf("the sandbox holds %s, which no task wrote", e.Name())
		}
	}

	d.Kill(t)
	chaosAuditVerify(t, "--data-dir", dataDir)
	chaosJobReplay(t, dataDir)
}

// chaosGet is tasks/get of the task, by its requester.
func chaosGet(t *testing.T, d *testutil.Daemon, c *chaosTask) taskView {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"taskId": c.id})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := c.client.Send(ctx, d.HTTPURL, &snap.Message{To: d.Address, Method: "tasks/get", Payload: body})
	if err != nil {
		t.Fatalf("tasks/get of task %d: %v", c.n, err)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p["error"] != nil {
		t.Fatalf("task %d (%s) %s, accepted, is lost: tasks/get answered %v", c.n, c.kind, c.id, p["error"])
	}
	return taskOf(t, p)
}

// checkChaosTask checks that the task's state, the sandbox, the executor's
// records of the task's actions (ACTION:STATE) and the number of promotions
// the audit log holds for it agree.
func checkChaosTask(t *testing.T, sandboxDir string, c *chaosTask, v taskView, records []string, promotions int) {
	t.Helper()
	what := fmt.Sprintf("task %d (%s) %s, %s %q, records %v, %d promotions audited", c.n, c.kind, c.id, v.Status.State, v.Status.Message, records, promotions)
	content := func(name string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(sandboxDir, name))
		return string(b), err == nil
	}
	applied, pending := 0, 0
	for _, r := range records {
		switch r[strings.IndexByte(r, ':')+1:] {
		case "promoted", "completed":
			applied++
		case "pending", "approving":
			pending++
		}
	}
	if promotions > 1 || applied > 1 {
		t.Errorf("%s: applied more than once", what)
	}
	if applied != promotions {
		t.Errorf("%s: the executor's records and the audit log disagree", what)
	}
	switch v.Status.State {
	case "completed", "failed", "canceled", "rejected":
	case "input_required":
		if pending != 1 {
			t.Errorf("%s: waits for an operator, but no action of it is held", what)
		}
	default:
		t.Errorf("%s: not settled", what)
	}

	switch c.kind {
	case chaosWrite, chaosAgent:
		got, ok := content(c.file())
		if ok != (applied == 1) {
			t.Errorf("%s: the file exists = %v (%q)", what, ok, got)
		}
		if ok && got != c.token+"\n" {
			t.Errorf("%s: the file holds %q", what, got)
		}
		if v.Status.State == "completed" && !ok {
			t.Errorf("%s: completed, yet its file is absent", what)
		}
		if c.kind == chaosWrite && v.Status.State != "completed" && ok {
			t.Errorf("%s: its write was applied, yet the task is not completed", what)
		}
	case chaosRead:
		if got, ok := content(c.file()); !ok || got != c.token+"\n" {
			t.Errorf("%s: the file read holds %q (%v)", what, got, ok)
		}
		if v.Status.State != "completed" {
			t.Errorf("%s: a read did not complete", what)
		} else if res, data, _ := v.artifact("result-"); !strings.Contains(res+string(data), c.token) {
			t.Errorf("%s: the result does not hold the file's content: %q %s", what, res, data)
		}
		if len(records) != 0 {
			t.Errorf("%s: a read has effectful records", what)
		}
	case chaosRename:
		src, srcOK := content(c.file())
		dst, dstOK := content(c.moved())
		if srcOK == dstOK || (applied == 1) != dstOK {
			t.Errorf("%s: source present %v, destination present %v", what, srcOK, dstOK)
		}
		if got := src + dst; got != c.token+"\n" {
			t.Errorf("%s: the file holds %q", what, got)
		}
		if (v.Status.State == "completed") != dstOK {
			t.Errorf("%s: renamed = %v", what, dstOK)
		}
	case chaosDelete:
		_, ok := content(c.file())
		if (applied == 1) == ok || (v.Status.State == "completed") == ok {
			t.Errorf("%s: the file exists = %v", what, ok)
		}
	}
}

// chaosRecords reads, per task, the executor's effectful actions as
// "action:state" in the order they were created, and the promotions the
// audit log holds.
func chaosRecords(t *testing.T, ctx context.Context, db *sqldb.DB) (records map[string][]string, promoted map[string]int) {
	t.Helper()
	records = map[string][]string{} // task → the states of its effectful actions
	rows, err := db.R.QueryContext(ctx, `SELECT task, action, state FROM executor_actions WHERE task <> '' ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var task, action, state string
		if err := rows.Scan(&task, &action, &state); err != nil {
			t.Fatal(err)
		}
		records[task] = append(records[task], action+":"+state)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	promoted = map[string]int{}
	rows, err = db.R.QueryContext(ctx, `SELECT task, COUNT(*) FROM audit_log WHERE step = 'promoted' GROUP BY task`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var task string
		var n int
		if err := rows.Scan(&task, &n); err != nil {
			t.Fatal(err)
		}
		promoted[task] = n
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	return records, promoted
}

// workspaceEntries lists the sandbox folder dir as a requester sees it:
// without the sandbox's folder lock (sandbox.LockFile) and count
// (sandbox.CountFile), which the node keeps there for the processes that
// share it.
func workspaceEntries(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(ents, func(e os.DirEntry) bool { return e.Name() == sandbox.LockFile || e.Name() == sandbox.CountFile })
}
