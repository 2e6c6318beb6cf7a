package node_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

var (
	chaosHeldTasks = flag.Int("chaos.held-tasks", 24, "the agent tasks TestChaosHeldSIGKILL sends")
	chaosHeldKills = flag.Int("chaos.held-kills", 8, "the SIGKILLs (and restarts) of TestChaosHeldSIGKILL")
)

// chaosHeld is one agent task of TestChaosHeldSIGKILL: its model proposes
// to delete held-N.md, which the policy holds for the operator.
type chaosHeld struct {
	n       int
	approve bool // the operator's decision on every action the task holds
	cli     bool // decided through `snapnode approve|deny`, else the admin socket
	token   string
	client  *client.HTTP
	msg     *snap.Message // signed at the first send; every later send is a retry

	// Guarded by the test's mutex.
	id      string
	decided int // decisions of its actions the node answered
}

func (h *chaosHeld) file() string { return fmt.Sprintf("held-%d.md", h.n) }

// TestChaosHeldSIGKILL runs `snapnode run` as a child process on a SQLite
// data folder with an agent (a scripted model server) whose every task
// has the model propose a DELETE_FILE, which the policy holds for the
// operator. An operator loop approves or denies each held action (the
// task's plan, chosen at random) through the admin socket or the
// `snapnode approve|deny` command, while the node is killed with SIGKILL
// at random moments: before the hold, while it waits, as a decision is
// being sent or carried out (the promotion of an approved delete), and
// once it was answered but before the job went on. The node restarts on
// the same folder each time; requests without an answer are retried and
// held actions decided again. After the last restart every task must
// complete with the model's answer as its message: an approved delete
// ran exactly once (its file gone, one promotion recorded and audited,
// listed once in the task's changes, the model never told of a failed
// delete other than one a crash cut and undid), a denied one never ran
// (the file as it was seeded), no task holds two actions at once, no
// action or job is left half-way, and `snapnode audit verify` passes.
//
// It runs 24 tasks and 8 kills (-chaos.held-tasks, -chaos.held-kills);
// the seed is logged, and -chaos.seed repeats a run's choices.
func TestChaosHeldSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	total, kills := *chaosHeldTasks, *chaosHeldKills
	seed := chaosRunSeed(*chaosSeed)
	t.Logf("chaos held: %d tasks, %d kills, seed %d (-run TestChaosHeldSIGKILL -chaos.seed=%d repeats it)", total, kills, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	var rngMu sync.Mutex
	intN := func(n int) int { rngMu.Lock(); defer rngMu.Unlock(); return rng.IntN(max(n, 1)) }

	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	sandboxDir := filepath.Join(dataDir, "sandbox")
	if err := os.MkdirAll(sandboxDir, 0o700); err != nil {
		t.Fatal(err)
	}
	clients := chaosClients(t, 2)
	all := make([]*chaosHeld, total)
	byFile := map[string]*chaosHeld{}
	for i := range all {
		h := &chaosHeld{n: i, approve: rng.IntN(2) == 0, cli: rng.IntN(3) == 0,
			token: fmt.Sprintf("token-%d-%016x", i, rng.Uint64()), client: clients[rng.IntN(len(clients))]}
		all[i], byFile[h.file()] = h, h
		if err := os.WriteFile(filepath.Join(sandboxDir, h.file()), []byte(h.token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex // guards the tasks' answers and what the model and the operator saw
	var problems []string
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 50 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}

	// The model deletes the file its task names, proposing it again when
	// a crash cut and undid the delete, and finishes once the delete was
	// carried out or denied. Any other failure it is told of is a
	// problem: an approved delete that failed (run twice, say).
	jobFile := regexp.MustCompile(`chaos held job: delete (held-\d+\.md)`)
	d := startChaosNode(t, dir, dataDir, "2s", jobFile, func(all string, m []string) llmtest.Reply {
		var reply llmtest.Reply
		failed := strings.Count(all, `"outcome":"failed"`)
		switch {
		case strings.Contains(all, `"outcome":"completed"`):
			reply = finish("deleted " + m[1])
		case strings.Contains(all, "The operator denied action"):
			reply = finish("kept " + m[1])
		case failed > strings.Count(all, `"reason":"`+executor.ReasonInterrupted+`"`):
			problem("%s: the model was told of a failure other than an interrupted promotion: %s", m[1], all)
			reply = finish("failed on " + m[1])
		default:
			reply = llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/" + m[1]}))
		}
		reply.Delay = time.Duration(intN(30)) * time.Millisecond // kills land during model calls too
		return reply
	})

	// events tells the kill what happens: a task's answer, a decision
	// sent, a decision answered.
	events := make(chan struct{}, 16*total)
	event := func() {
		select {
		case events <- struct{}{}:
		default:
		}
	}
	send := func(d *testutil.Daemon, h *chaosHeld) {
		if h.msg == nil {
			payload := text(fmt.Sprintf("chaos held job: delete %s", h.file()))
			payload["message"].(map[string]any)["messageId"] = uuid.NewString()
			body, _ := json.Marshal(payload)
			h.msg = &snap.Message{To: d.Address, Method: "message/send", Payload: body}
		}
		v, err := chaosSend(t, d, h.client, h.msg)
		if err != nil {
			return
		}
		event()
		mu.Lock()
		defer mu.Unlock()
		if h.id != "" && v.ID != h.id {
			t.Errorf("task %d: a retry answered task %s, the first answer %s", h.n, v.ID, h.id)
		}
		if h.id == "" {
			h.id = v.ID
		}
	}
	decide := func(ctx context.Context, d *testutil.Daemon, h *chaosHeld, id, action string) error {
		op := "deny"
		if h.approve {
			op = "approve"
		}
		if h.cli {
			args := []string{op, "--data-dir", d.DataDir, "--action", action}
			if !h.approve {
				args = append(args, "--reason", "chaos: keep "+h.file())
			}
			out, err := exec.CommandContext(ctx, testutil.Binary(t), append(args, id)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		}
		_, err := admin.Call(ctx, admin.Path(d.DataDir), admin.Request{Op: op, Task: id, Action: action, Reason: "chaos: keep " + h.file()})
		return err
	}
	// operate is the operator until ctx ends: it lists the held actions
	// and decides each of a task of the test, as the task's plan says.
	byID := func(id string) *chaosHeld {
		mu.Lock()
		defer mu.Unlock()
		for _, h := range all {
			if h.id == id {
				return h
			}
		}
		return nil
	}
	operate := func(ctx context.Context, d *testutil.Daemon) {
		var wg sync.WaitGroup
		defer wg.Wait()
		var inMu sync.Mutex
		inflight := map[string]bool{} // the actions being decided
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if raw, err := admin.Call(ctx, admin.Path(d.DataDir), admin.Request{Op: "held"}); err == nil {
				var list struct {
					Actions []struct{ Task, Action, Kind string }
				}
				if err := json.Unmarshal(raw, &list); err != nil {
					t.Errorf("held: %v: %s", err, raw)
					return
				}
				perTask := map[string][]string{}
				for _, a := range list.Actions {
					perTask[a.Task] = append(perTask[a.Task], a.Action+" ("+a.Kind+")")
					h := byID(a.Task)
					if h == nil {
						continue // its send's answer is on its way
					}
					inMu.Lock()
					busy := inflight[a.Action]
					inflight[a.Action] = true
					inMu.Unlock()
					if busy {
						continue
					}
					wg.Go(func() {
						event()
						dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
						defer cancel()
						err := decide(dctx, d, h, a.Task, a.Action)
						if err == nil {
							event()
							mu.Lock()
							h.decided++
							mu.Unlock()
							return // decided: not listed again
						}
						inMu.Lock()
						delete(inflight, a.Action) // listed again: decided again
						inMu.Unlock()
					})
				}
				for task, acts := range perTask {
					if len(acts) > 1 {
						problem("task %s holds %d actions at once: %v", task, len(acts), acts)
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}
	unanswered := func(batch []*chaosHeld) []*chaosHeld {
		mu.Lock()
		defer mu.Unlock()
		var out []*chaosHeld
		for _, h := range batch {
			if h.id == "" {
				out = append(out, h)
			}
		}
		return out
	}

	per := (total + kills - 1) / kills
	for k := range kills {
		batch := all[:min(total, (k+1)*per)]
		for len(events) > 0 {
			<-events
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		toSend := unanswered(batch)
		for _, h := range toSend {
			wg.Go(func() { send(d, h) })
		}
		wg.Go(func() { operate(ctx, d) })
		// The kill lands after a random number of this round's events:
		// answers, decisions sent and decisions answered (about three a
		// task); or once nothing happened for a while.
		after := intN(len(toSend) + 3*len(batch)/2)
		idle := time.NewTimer(2 * time.Second)
		seen := 0
	wait:
		for seen < after {
			select {
			case <-events:
				seen++
			case <-idle.C:
				break wait
			}
		}
		idle.Stop()
		d.Kill(t)
		stop()
		wg.Wait()
		t.Logf("kill %d after %d events (of %d drawn), %d requests sent", k+1, seen, after, len(toSend))
		d = d.Restart(t)
	}

	// After the last restart: every request is answered, every held
	// action decided, and every task settles.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, h := range unanswered(all) {
		wg.Go(func() { send(d, h) })
	}
	wg.Go(func() { operate(ctx, d) })
	settled := time.Now()
	deadline := settled.Add(90 * time.Second)
	views := map[string]taskView{}
	for _, h := range all {
		for {
			mu.Lock()
			id := h.id
			mu.Unlock()
			if id != "" {
				v := chaosGet(t, d, &chaosTask{n: h.n, kind: "held", client: h.client, id: id})
				views[id] = v
				if st := v.Status.State; st == "completed" || st == "failed" || st == "canceled" || st == "rejected" {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Errorf("task %d %s is still %q %q after the last restart", h.n, id, views[id].Status.State, views[id].Status.Message)
				break
			}
			time.Sleep(50 * time.Millisecond) // the agent and the operator work on it
		}
	}
	stop()
	wg.Wait()
	t.Logf("the tasks settled %v after the last restart", time.Since(settled).Round(time.Millisecond))
	for _, p := range problems {
		t.Error(p)
	}

	db, err := sqldb.Open(context.Background(), "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	acts := chaosHeldActions(t, db)
	_, audited := chaosRecords(t, context.Background(), db)
	steps := chaosSteps(t, db)
	counts := map[string]int{}
	for _, h := range all {
		b, ferr := os.ReadFile(filepath.Join(sandboxDir, h.file()))
		if h.id == "" {
			counts["never stored"]++
			if ferr != nil || string(b) != h.token+"\n" {
				t.Errorf("task %d, never stored: %s is %q (%v)", h.n, h.file(), b, ferr)
			}
			continue
		}
		v := views[h.id]
		what := fmt.Sprintf("task %d %s (approve %v, cli %v), %s %q, actions %v", h.n, h.id, h.approve, h.cli, v.Status.State, v.Status.Message, acts[h.id])
		counts[fmt.Sprintf("approve=%v %s, %d decisions answered", h.approve, v.Status.State, h.decided)]++
		counts[fmt.Sprintf("%d actions held", len(acts[h.id]))]++
		if v.Status.State != "completed" {
			t.Errorf("%s: not completed", what)
		}
		promoted, denied := 0, 0
		for _, a := range acts[h.id] {
			switch {
			case a.state == "promoted" || a.state == "completed":
				promoted++
				if a.audited != 1 {
					t.Errorf("%s: action %s promoted, %d promotions audited", what, a.id, a.audited)
				}
			case a.state == "denied":
				denied++
			case a.state == "failed" && a.reason == executor.ReasonInterrupted:
				counts["actions interrupted mid-promotion"]++
			default:
				t.Errorf("%s: action %s is %s %q", what, a.id, a.state, a.reason)
			}
			if a.audited > 0 && a.state != "promoted" && a.state != "completed" {
				t.Errorf("%s: action %s is %s, yet %d promotions audited", what, a.id, a.state, a.audited)
			}
		}
		// What the job recorded of each action agrees with the executor:
		// a step approved or completed was carried out, one failed or
		// denied was not.
		for _, o := range steps[h.id] {
			var state string
			for _, a := range acts[h.id] {
				if a.id == o.ActionID {
					state = a.state
				}
			}
			if state == "" {
				continue // not the executor's (FINISH)
			}
			carried := state == "promoted" || state == "completed"
			if (o.Outcome == "approved" || o.Outcome == "completed") != carried || (o.Outcome == "needs_confirmation") {
				t.Errorf("%s: the job records action %s %s, the executor %s", what, o.ActionID, o.Outcome, state)
			}
		}
		// The task's message and answer are the model's, never the note
		// of the action it held, and its changes list the delete once
		// when it was carried out, none when not: a task the restart's
		// reconcile completed (the node killed between the job's success
		// and its task's write) as well.
		answer := "deleted " + h.file()
		if !h.approve {
			answer = "kept " + h.file()
		}
		if got, _, _ := v.artifact("agent-response"); v.Status.Message != answer || got != answer {
			t.Errorf("%s: the task's message %q and answer %q; want %q", what, v.Status.Message, got, answer)
		}
		listings := 0
		for _, a := range v.Artifacts {
			if a.ArtifactID == "changes" {
				listings++
			}
		}
		changes, _, _ := v.artifact("changes")
		if n := strings.Count(changes, "-"+h.token); (promoted > 0 && (listings != 1 || n != 1)) || (promoted == 0 && listings != 0) {
			t.Errorf("%s: %d promoted, %d changes listings, listing the delete %d times: %q", what, promoted, listings, n, changes)
		}
		if audited[h.id] != promoted {
			t.Errorf("%s: %d promotions audited for the task, %d actions promoted", what, audited[h.id], promoted)
		}
		if h.approve {
			if promoted != 1 || denied != 0 || ferr == nil {
				t.Errorf("%s: approved: %d promoted, %d denied, %s present %v", what, promoted, denied, h.file(), ferr == nil)
			}
		} else if promoted != 0 || denied != 1 || ferr != nil || string(b) != h.token+"\n" {
			t.Errorf("%s: denied: %d promoted, %d denied, %s is %q (%v)", what, promoted, denied, h.file(), b, ferr)
		}
	}
	t.Logf("after %d kills: %v", kills, counts)
	states := map[string]string{}
	for id, v := range views {
		states[id] = v.Status.State
	}
	chaosAuditTrails(t, db, states)
	var jobs []string
	rows, err := db.R.QueryContext(context.Background(), `SELECT task_id, status FROM agent_jobs WHERE status <> 'SUCCESS'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, id+" "+st)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(jobs) > 0 {
		t.Errorf("jobs not ended in success: %v", jobs)
	}
	for _, e := range workspaceEntries(t, sandboxDir) {
		if byFile[e.Name()] == nil {
			t.Errorf("the sandbox holds %s, which no task seeded", e.Name())
		}
	}

	d.Kill(t)
	chaosAuditVerify(t, "--data-dir", dataDir)
	chaosJobReplay(t, dataDir)
	if t.Failed() {
		t.Logf("seed %d: -run TestChaosHeldSIGKILL -chaos.seed=%d repeats the run's choices", seed, seed)
	}
}

// chaosHeldAction is an action of the executor's records, with the promotions
// the audit log holds for it.
type chaosHeldAction struct {
	id, state, reason string
	audited           int
}

func (a chaosHeldAction) String() string { return a.state + ":" + a.id[:8] }

// chaosHeldActions reads the executor's effectful actions per task, oldest
// first, each with its promotions audited.
func chaosHeldActions(t *testing.T, db *sqldb.DB) map[string][]chaosHeldAction {
	t.Helper()
	ctx := context.Background()
	rows, err := db.R.QueryContext(ctx, `SELECT a.task, a.action_id, a.state, a.reason,
		(SELECT COUNT(*) FROM audit_log l WHERE l.action = a.action_id AND l.step = 'promoted')
		FROM executor_actions a WHERE a.task <> '' ORDER BY a.created_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]chaosHeldAction{}
	for rows.Next() {
		var task string
		var a chaosHeldAction
		if err := rows.Scan(&task, &a.id, &a.state, &a.reason, &a.audited); err != nil {
			t.Fatal(err)
		}
		out[task] = append(out[task], a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// chaosSteps reads, per task, the observations of the agent's steps that
// name an executor action.
func chaosSteps(t *testing.T, db *sqldb.DB) map[string][]agent.Observation {
	t.Helper()
	rows, err := db.R.QueryContext(context.Background(), `SELECT task_id, body FROM agent_interactions ORDER BY task_id, seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]agent.Observation{}
	for rows.Next() {
		var task, body string
		if err := rows.Scan(&task, &body); err != nil {
			t.Fatal(err)
		}
		var it agent.Interaction
		if err := json.Unmarshal([]byte(body), &it); err != nil {
			t.Fatalf("task %s: interaction %s: %v", task, body, err)
		}
		if it.Observation != nil && it.Observation.ActionID != "" {
			out[task] = append(out[task], *it.Observation)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
