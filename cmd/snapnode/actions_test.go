package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
)

// TestActionCommands drives approve, deny, rollback and audit against a
// real node: proposals arrive over its embedded relay, the commands reach
// it through the admin socket in its data folder or read its database.
func TestActionCommands(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
	_, propose := proposalNode(t, cfg)
	sandbox := filepath.Join(dataDir, "sandbox")
	dd := []string{"--data-dir", dataDir}
	decode := func(r result) proposedTask {
		t.Helper()
		var v proposedTask
		if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &v) != nil {
			t.Fatalf("no task printed: %s", r)
		}
		return v
	}

	w := propose("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "one\n"})
	if w.Status.State != "completed" {
		t.Fatalf("write: %+v", w)
	}
	del := propose("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"})
	if del.Status.State != "input_required" {
		t.Fatalf("delete: %+v", del)
	}
	// held lists the action the task holds, by its id, with the sum of
	// its diff; --diff prints the diff too.
	r := runCLI(t, "", append([]string{"held"}, dd...)...)
	cols := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\t")
	if r.code != exitOK || len(cols) != 6 || cols[0] != del.ID || cols[2] != "DELETE_FILE" || len(cols[5]) != 64 || strings.Contains(r.stdout, "-one") {
		t.Fatalf("held: %s", r)
	}
	sum := cols[5]
	if r.stderr != "" {
		t.Errorf("held piped: %s", r)
	}
	if r := runCLI(t, "", append([]string{"held", "--diff"}, dd...)...); r.code != exitOK || !strings.HasPrefix(r.stdout, strings.Join(cols, "\t")+"\n") || !strings.Contains(r.stdout, "\n-one\n") {
		t.Errorf("held --diff: %s", r)
	}
	// On a terminal: aligned columns under a header, the reason last; a
	// pipe (above) gets the tab-separated line alone.
	r = runTerminal(t, "", append([]string{"held"}, dd...)...)
	rows := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != exitOK || len(rows) != 2 || strings.Contains(r.stdout, "\t") || !strings.HasPrefix(rows[0], "TASK ") ||
		!strings.HasPrefix(rows[1], del.ID+" ") || strings.Index(rows[0], "KIND") != strings.Index(rows[1], "DELETE_FILE") ||
		strings.Index(rows[0], "DIFF SHA-256") != strings.Index(rows[1], sum) || !strings.HasSuffix(rows[1], cols[4]) {
		t.Fatalf("held on a terminal: %s", r)
	}
	if r := runTerminal(t, "", append([]string{"held", "--diff"}, dd...)...); r.code != exitOK || !strings.HasPrefix(r.stdout, rows[0]+"\n"+rows[1]+"\n") || !strings.Contains(r.stdout, "\n-one\n") {
		t.Errorf("held --diff on a terminal: %s", r)
	}
	// A sum that is no sum is a usage error; one of another diff is
	// refused, and nothing runs.
	if r := runCLI(t, "", append(append([]string{"approve"}, dd...), "--diff", sum[:40], del.ID)...); r.code != exitUsage || !strings.Contains(r.stderr, "64 hex digits") {
		t.Errorf("approve --diff of a cut sum: %s", r)
	}
	if r := runCLI(t, "", append(append([]string{"approve"}, dd...), "--diff", strings.Repeat("0", 64), del.ID)...); r.code != exitFail || !strings.Contains(r.stderr, "diff changed") {
		t.Errorf("approve of another diff: %s", r)
	}
	if _, err := os.Stat(filepath.Join(sandbox, "a.txt")); err != nil {
		t.Fatalf("a.txt after a refused approval: %v", err)
	}
	if r := runCLI(t, "", append([]string{"approve"}, dd...)...); r.code != exitUsage {
		t.Errorf("approve without a task: %s", r)
	}
	if r := runCLI(t, "", append(append([]string{"approve"}, dd...), "no-such-task")...); r.code != exitFail || !strings.Contains(r.stderr, "no-such-task") {
		t.Errorf("approve of an unknown task: %s", r)
	}
	// On a terminal, approve says on stderr what send says of a task:
	// its state, and the command that reads it again.
	r = runTerminal(t, "", append(append([]string{"approve"}, dd...), "--diff", strings.ToUpper(sum), del.ID)...)
	if v := decode(r); v.Status.State != "completed" {
		t.Fatalf("approved: %+v", v)
	}
	if want := "task " + del.ID + ": completed"; !strings.HasPrefix(r.stderr, want) || !strings.HasSuffix(r.stderr, "\nread it again: snapnode task show --data-dir "+shellWord(dataDir)+" "+del.ID+"\n") {
		t.Errorf("approve on a terminal: stderr %q, want %q and the command that reads it again", r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(sandbox, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a.txt after approve: %v", err)
	}

	propose("WRITE_FILE", map[string]any{"path": "/sandbox/b.md", "content": "# b\n"})
	ren := propose("RENAME_FILE", map[string]any{"source": "/sandbox/b.md", "destination": "/sandbox/c.md"})
	// Two held: a page of one says how many wait, and where the next
	// page starts; that page holds the other.
	propose("WRITE_FILE", map[string]any{"path": "/sandbox/d.txt", "content": "d\n"})
	del2 := propose("DELETE_FILE", map[string]any{"path": "/sandbox/d.txt"})
	r = runCLI(t, "", append([]string{"held", "--limit", "1"}, dd...)...)
	note, next, _ := strings.Cut(strings.TrimSpace(r.stderr), "the next page: ")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, ren.ID+"\t") || strings.Count(r.stdout, "\n") != 1 || note != "listed 1 of the 2 actions held; " || next == "" {
		t.Fatalf("held --limit 1: %s", r)
	}
	// The next page is the command as printed, which names the node's
	// data folder as this one was given it (run from anywhere, the bare
	// command finds no node) and keeps the page's size.
	words := strings.Fields(next)
	if len(words) < 2 || words[0] != "snapnode" || words[1] != "held" || !strings.Contains(next, " --data-dir "+shellWord(dataDir)+" ") || !strings.Contains(next, " --limit 1 ") {
		t.Fatalf("held --limit 1: the next page is %q, want the command with the node's --data-dir and --limit 1", next)
	}
	if r := runCLI(t, "", words[1:]...); r.code != exitOK || !strings.HasPrefix(r.stdout, del2.ID+"\t") || strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("%s: %s", next, r)
	}
	r = runTerminal(t, "", append(append([]string{"deny"}, dd...), "--reason", "keep b", ren.ID)...)
	v := decode(r)
	if v.Status.State != "failed" || !strings.Contains(v.Status.Message, "keep b") {
		t.Fatalf("denied: %+v", v)
	}
	if want := "task " + ren.ID + ": failed — "; !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "keep b") {
		t.Errorf("deny on a terminal: stderr %q, want it to start with %q and give the note", r.stderr, want)
	}

	over := propose("WRITE_FILE", map[string]any{"path": "/sandbox/b.md", "content": "# changed\n"})
	actionID := strings.TrimPrefix(over.Artifacts[0].ArtifactID, "result-")
	if r := runCLI(t, "", append(append([]string{"rollback"}, dd...), actionID)...); r.code != exitOK {
		t.Fatalf("rollback: %s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(sandbox, "b.md")); string(b) != "# b\n" {
		t.Fatalf("b.md after rollback: %q", b)
	}
	if r := runCLI(t, "", append(append([]string{"rollback"}, dd...), actionID)...); r.code != exitFail {
		t.Errorf("a second rollback: %s", r)
	}

	r = runCLI(t, "", append([]string{"audit", "verify"}, dd...)...)
	if r.code != exitOK || !strings.Contains(r.stdout, "audit log intact") {
		t.Fatalf("audit verify: %s", r)
	}
	exp := runCLI(t, "", append([]string{"audit", "export"}, dd...)...)
	lines := strings.Split(strings.TrimSpace(exp.stdout), "\n")
	if exp.code != exitOK || len(lines) < 10 {
		t.Fatalf("audit export: %s", exp)
	}
	file := writeFile(t, t.TempDir(), "audit.jsonl", exp.stdout, 0o600)
	if r := runCLI(t, "", "audit", "verify", "--file", file); r.code != exitOK {
		t.Fatalf("audit verify --file: %s", r)
	}
	if r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-"); r.code != exitOK {
		t.Fatalf("audit verify --file -: %s", r)
	}
	// One entry's decision edited in the export: found and named.
	i := len(lines) / 2
	var entry struct{ Seq int64 }
	if err := json.Unmarshal([]byte(lines[i]), &entry); err != nil || entry.Seq == 0 {
		t.Fatalf("export line %d: %q", i, lines[i])
	}
	lines[i] = strings.Replace(lines[i], `"actor":"`, `"actor":"x`, 1)
	tampered := writeFile(t, t.TempDir(), "tampered.jsonl", strings.Join(lines, "\n")+"\n", 0o600)
	r = runCLI(t, "", "audit", "verify", "--file", tampered)
	if want := "entry " + strconv.FormatInt(entry.Seq, 10) + " edited"; r.code != exitFail || !strings.Contains(r.stdout, want) {
		t.Fatalf("a tampered export: %s", r)
	}
	if r := runCLI(t, "", "audit", "frobnicate"); r.code != exitUsage {
		t.Errorf("audit frobnicate: %s", r)
	}
}

// TestHeldMarksMixedScriptPaths: held names a path whose word mixes
// scripts ("pаssword.txt", its а Cyrillic U+0430, a look-alike of
// password.txt), or is wholly of look-alikes of Latin letters ("ѕсоре.txt",
// all Cyrillic, reads as scope.txt), with those letters spelled out, in
// the reason and the diff's file headers, piped and on a terminal; a path
// in one script (Cyrillic, its extension apart) is shown as it is.
func TestHeldMarksMixedScriptPaths(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
	_, propose := proposalNode(t, cfg)
	dd := []string{"--data-dir", dataDir}
	const mixed, cyrillic, scope = "/sandbox/p\u0430ssword.txt", "/sandbox/итоги.txt", "/sandbox/\u0455\u0441\u043e\u0440\u0435.txt"
	for _, p := range []string{mixed, cyrillic, scope} {
		if w := propose("WRITE_FILE", map[string]any{"path": p, "content": "one\n"}); w.Status.State != "completed" {
			t.Fatalf("write %s: %+v", p, w)
		}
		if d := propose("DELETE_FILE", map[string]any{"path": p}); d.Status.State != "input_required" {
			t.Fatalf("delete %s: %+v", p, d)
		}
	}
	const (
		spelled      = "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"
		scopeSpelled = "/sandbox/⟨U+0455 Cyrillic⟩⟨U+0441 Cyrillic⟩⟨U+043E Cyrillic⟩⟨U+0440 Cyrillic⟩⟨U+0435 Cyrillic⟩.txt"
	)
	for _, run := range []func(*testing.T, string, ...string) result{runCLI, runTerminal} {
		r := run(t, "", append([]string{"held", "--diff"}, dd...)...)
		if r.code != exitOK {
			t.Fatalf("held --diff: %s", r)
		}
		for _, want := range []string{"DELETE_FILE on " + spelled + ";", "\n--- " + spelled + "\n",
			"DELETE_FILE on " + cyrillic + ";", "\n--- " + cyrillic + "\n", "\n-one\n",
			"DELETE_FILE on " + scopeSpelled + ";", "\n--- " + scopeSpelled + "\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("held --diff does not show %q:\n%s", want, r.stdout)
			}
		}
		for _, p := range []string{mixed, scope} {
			if strings.Contains(r.stdout, p) {
				t.Errorf("held --diff shows %s as it reads:\n%s", p, r.stdout)
			}
		}
	}
}

// proposedTask is what the tests read of a task a proposal made.
type proposedTask struct {
	ID     string `json:"id"`
	Status struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string `json:"artifactId"`
	} `json:"artifacts"`
}

// proposalNode starts a node of cfg and returns it with propose, which
// sends it, over its embedded relay from a peer of its own, a proposal of
// action with args and returns the task it made.
func proposalNode(t *testing.T, cfg config.Config) (n *node.Node, propose func(action string, args map[string]any) proposedTask) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); n.Wait() })

	k, _ := identity.Generate()
	pctx, pcancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: n.RelayURLs(), Logger: slog.New(slog.DiscardHandler)})
	pool.Start(pctx)
	t.Cleanup(func() { pcancel(); pool.Close() })
	cl := client.NewNostr(client.NostrConfig{Key: k, Relays: pool})
	return n, func(action string, args map[string]any) proposedTask {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
			"parts": []any{map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
				"reasoning": "test", "action": action, "args": args}}}}})
		rctx, rcancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer rcancel()
		resp, err := cl.Request(rctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
			client.NostrRequest{Method: "message/send", Payload: body})
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Task  proposedTask
			Error struct {
				Data struct {
					TaskID string `json:"taskId"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.Payload, &p); err == nil && p.Task.ID == "" && p.Error.Data.TaskID != "" {
			// The task was made, its answer too long for the relay (a
			// diff of a large file): the ID alone.
			return proposedTask{ID: p.Error.Data.TaskID}
		}
		if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Task.ID == "" {
			t.Fatalf("%s: %s", action, resp.Payload)
		}
		return p.Task
	}
}

// audit verify reports the checkpoint of a pruned log and who signed it,
// and accepts only the node's own signature.
func TestAuditVerifyCheckpoint(t *testing.T) {
	noEnvKey(t)
	for _, c := range []struct {
		name   string
		signer string // "node" or "other"
		code   int
		want   string
	}{
		{"signed by the node", "node", exitOK, "pruned up to seq 3; checkpoint hash "},
		{"signed by another key", "other", exitFail, "audit log signed by another key: audit: entry 4 seal: the seal is signed by "},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			dataDir := filepath.Join(t.TempDir(), "data")
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			cfg := config.Default()
			cfg.DataDir = dataDir
			nodeKey, _ := identity.Generate()
			if err := identity.SaveKeyFile(cfg.KeyPath(), nodeKey); err != nil {
				t.Fatal(err)
			}
			signer := nodeKey
			if c.signer == "other" {
				signer, _ = identity.Generate()
			}
			db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().Add(-40 * 24 * time.Hour)
			opts := node.AuditOptions(cfg, signer, identity.Mainnet)
			opts.Now = func() time.Time { return now }
			l, err := audit.New(ctx, db, opts)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Seal(ctx); err != nil { // as the node seals its log every hour
				t.Fatal(err)
			}
			now = time.Now()
			if n, err := l.Prune(ctx); err != nil || n != 3 {
				t.Fatalf("Prune: %d, %v", n, err)
			}
			l.Close()
			db.Close()

			r := runCLI(t, "", "audit", "verify", "--data-dir", dataDir)
			if r.code != c.code || !strings.Contains(r.stdout, c.want) || !strings.Contains(r.stdout, signer.Address(identity.Mainnet)) {
				t.Fatalf("audit verify: %s\nwant exit %d and %q naming %s", r, c.code, c.want, signer.Address(identity.Mainnet))
			}
		})
	}
}

// The head record lives in the database it vouches for: someone who can
// write it cuts the tail and moves the head back, and audit verify alone
// cannot tell. An anchor kept elsewhere (--anchor SEQ:HASH, the head an
// earlier audit verify printed) can, in the database and in an export.
func TestAuditVerifyAnchor(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	cfg, _, db, l := auditNode(t)
	dataDir := cfg.DataDir
	var es []audit.Entry
	for range 5 {
		e, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	head := "5:" + es[4].Hash
	dd := []string{"--data-dir", dataDir}
	verify := func(args ...string) result {
		return runCLI(t, "", append(append([]string{"audit", "verify"}, dd...), args...)...)
	}
	if r := verify("--anchor", head, "--anchor", "2:"+es[1].Hash); r.code != exitOK || !strings.Contains(r.stdout, "2 anchors checked") {
		t.Fatalf("audit verify of an intact log with anchors: %s", r)
	}
	if r := verify("--anchor", "5:xyz"); r.code != exitUsage || !strings.Contains(r.stderr, "SEQ:HASH") {
		t.Fatalf("audit verify --anchor 5:xyz: %s", r)
	}
	// Cut entries 4 and 5 and move the head back to entry 3: no secret needed.
	if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM audit_log WHERE seq >= 4"); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE audit_head SET last_seq = 3, last_hash = '"+es[2].Hash+"' WHERE id = 1")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	exp := runCLI(t, "", append([]string{"audit", "export"}, dd...)...)
	l.Close()
	db.Close()
	if r := verify(); r.code != exitOK {
		t.Fatalf("the gap this closes is gone? audit verify: %s", r)
	}
	want := "audit log TAMPERED: audit: entry 4 truncated: an anchor records entry 5; the chain ends at 3"
	if r := verify("--anchor", head); r.code != exitFail || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify --anchor %s of a cut log: %s\nwant exit %d and %q", head, r, exitFail, want)
	}
	if r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-", "--anchor", head); r.code != exitFail || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify --file - --anchor %s of a cut log's export: %s", head, r)
	}
}

// What audit verify could not check it says, exit 0 or not: an export
// taken from a later entry (its start taken as given, anchors before it
// out of reach) and, with no key of the node's to hand, a checkpoint
// whose signer was only read, not compared with the node's (one forged
// with another key then verifies). Before, both printed as a log intact.
func TestAuditVerifySaysWhatItDidNotCheck(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir = dataDir
	nodeKey, _ := identity.Generate()
	if err := identity.SaveKeyFile(cfg.KeyPath(), nodeKey); err != nil {
		t.Fatal(err)
	}
	forger, _ := identity.Generate()
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-40 * 24 * time.Hour)
	opts := node.AuditOptions(cfg, forger, identity.Mainnet)
	opts.Now = func() time.Time { return now }
	l, err := audit.New(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Seal(ctx); err != nil { // as the node seals its log every hour
		t.Fatal(err)
	}
	now = time.Now()
	if n, err := l.Prune(ctx); err != nil || n != 3 {
		t.Fatalf("Prune: %d, %v", n, err)
	}
	for range 3 {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	db.Close()
	dd := []string{"--data-dir", dataDir}

	exp := runCLI(t, "", append([]string{"audit", "export", "--from", "6"}, dd...)...)
	if exp.code != exitOK {
		t.Fatalf("audit export --from 6: %s", exp)
	}
	r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-")
	if r.code != exitOK || !strings.Contains(r.stdout, "partial export: it starts at entry 6; its link to entry 5, and the entries before, were not checked") {
		t.Fatalf("audit verify --file of an export from entry 6: %s", r)
	}

	// With the node's key, the forger's seal fails; without it, the signer
	// is only named.
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitFail || !strings.Contains(r.stdout, "entry 4 seal: the seal is signed by "+forger.Address(identity.Mainnet)) {
		t.Fatalf("audit verify with the node's key: %s", r)
	}
	if err := os.Remove(cfg.KeyPath()); err != nil {
		t.Fatal(err)
	}
	want := "signed by " + forger.Address(identity.Mainnet) + ", a signer not compared with the node's key (no key found): compare it with the node's address"
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify without the node's key: %s\nwant %q", r, want)
	}
}

// audit verify reports the seals and the entries after the last one,
// unsealed; --address checks an export's seals against the node's
// address, and another node's fails.
func TestAuditVerifySeals(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	cfg, key, db, l := auditNode(t)
	dataDir := cfg.DataDir
	other, _ := identity.Generate()
	for range 3 {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.Seal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	db.Close()
	dd := []string{"--data-dir", dataDir}
	addr := key.Address(identity.Mainnet)
	want := fmt.Sprintf("1 seal, the last at entry 4 (head seq 3 hash %s, %s), signed by %s; 2 entries after it are unsealed",
		s.Head.Hash, s.Time.Format(time.RFC3339), addr)
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify: %s\nwant %q", r, want)
	}
	exp := runCLI(t, "", append([]string{"audit", "export"}, dd...)...)
	if r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-", "--address", addr); r.code != exitOK || !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "not compared") {
		t.Fatalf("audit verify --file - --address the node's: %s", r)
	}
	if r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-"); r.code != exitOK || !strings.Contains(r.stdout, "a signer not compared with the node's key") {
		t.Fatalf("audit verify --file - without --address: %s", r)
	}
	r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-", "--address", other.Address(identity.Mainnet))
	if want := "audit log signed by another key: audit: entry 4 seal (line 5): the seal is signed by " + addr; r.code != exitFail || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify --address another node's: %s\nwant %q", r, want)
	}
	if r := runCLI(t, exp.stdout, "audit", "verify", "--file", "-", "--address", "bc1pnot"); r.code != exitUsage {
		t.Fatalf("audit verify --address bc1pnot: %s", r)
	}
}

// A chain rewritten while the node is stopped, from after a seal on, with
// the node's last seal deleted, verifies on its own; audit verify, given
// the node's data folder, checks it against the node's record of its last
// seal (audit-seal.json) and reports it as tampering, naming the record
// and the entry it expected. Before, it printed the log intact.
func TestAuditVerifySealRecord(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	cfg, _, db, l := auditNode(t)
	dataDir := cfg.DataDir
	appendN := func(n int) {
		for range n {
			if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(3)
	if _, err := l.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	appendN(3)
	if _, err := l.Seal(ctx); err != nil { // as the node does at a clean stop
		t.Fatal(err)
	}
	es, err := l.Query(ctx, audit.Filter{Limit: audit.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	dd := []string{"--data-dir", dataDir}
	record := cfg.SealRecordPath()
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, "record of the last seal ("+record+"): entry 8, held by the chain") {
		t.Fatalf("audit verify of an intact log: %s", r)
	}
	// Seal 8 deleted, entries 5…7 rewritten, the head moved back.
	if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "DELETE FROM audit_log WHERE seq >= 8"); err != nil {
			return err
		}
		prev := es[3].Hash
		for _, e := range es[4:7] {
			e.Reason, e.Prev = "rewritten", prev
			e.Hash = audit.Hash(e)
			if _, err := tx.ExecContext(ctx, "UPDATE audit_log SET reason = ?, prev = ?, hash = ? WHERE seq = ?", e.Reason, e.Prev, e.Hash, e.Seq); err != nil {
				return err
			}
			prev = e.Hash
		}
		_, err := tx.ExecContext(ctx, "UPDATE audit_head SET last_seq = 7, last_hash = ? WHERE id = 1", prev)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db.Close()
	want := "audit log TAMPERED: audit: entry 8 record: the record of the last seal this node wrote (" + record + ") names entry 8 with hash " + es[7].Hash
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitFail || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify of a chain without the recorded seal: %s\nwant exit %d and %q", r, exitFail, want)
	}
}

// audit verify with a record of the last seal it cannot read (here, half
// a file) says so apart from tampering: not evidence that the log
// changed, with what to do (the file's permissions, a backup), and
// verifies the chain without the record: exit 2 when the chain holds
// ("audit log intact", the record not checked), 1 and TAMPERED when it
// does not. Before, it printed "audit log TAMPERED" for the record alone
// and did not verify the chain.
func TestAuditVerifySealRecordUnreadable(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	cfg, _, db, l := auditNode(t)
	dataDir := cfg.DataDir
	defer db.Close()
	for range 3 {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Seal(ctx); err != nil { // 4, recorded
		t.Fatal(err)
	}
	l.Close()
	record := cfg.SealRecordPath()
	good, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(record, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	dd := []string{"--data-dir", dataDir}
	r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...)
	for _, want := range []string{"record of the last seal (" + record + ") cannot be read", "not evidence that the log was changed", "permissions", "backup", "audit log intact: 4 entries", "not checked against the record"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit verify with a truncated record: %s\nwant %q", r, want)
		}
	}
	if r.code != exitUsage || strings.Contains(r.stdout, "TAMPERED") {
		t.Errorf("audit verify with a truncated record: %s\nwant exit %d, not TAMPERED", r, exitUsage)
	}

	if _, err := db.W.ExecContext(ctx, "UPDATE audit_log SET actor = 'edited' WHERE seq = 2"); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", append([]string{"audit", "verify"}, dd...)...)
	for _, want := range []string{"record of the last seal (" + record + ") cannot be read", "audit log TAMPERED: audit: entry 2 edited"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("audit verify of an edited chain, with a truncated record: %s\nwant %q", r, want)
		}
	}
	if r.code != exitFail {
		t.Errorf("audit verify of an edited chain, with a truncated record: %s\nwant exit %d", r, exitFail)
	}
}

// audit verify of a log sealed by another key than the node's (its key
// file changed, the data kept, the record of the last seal too) says so,
// naming both addresses and --address, rather than TAMPERED: the seals
// hold, under the old key; --address with the old one verifies the log.
func TestAuditVerifyOtherKey(t *testing.T) {
	noEnvKey(t)
	ctx := context.Background()
	cfg, old, db, l := auditNode(t)
	dataDir := cfg.DataDir
	if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Seal(ctx); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db.Close()
	renewed, _ := identity.Generate()
	keyFile := filepath.Join(t.TempDir(), "new.key")
	if err := identity.SaveKeyFile(keyFile, renewed); err != nil {
		t.Fatal(err)
	}
	oldAddr, newAddr := old.Address(identity.Mainnet), renewed.Address(identity.Mainnet)
	r := runCLI(t, "", "audit", "verify", "--data-dir", dataDir, "--key", keyFile)
	want := "audit log signed by another key: audit: entry 2 seal: the seal is signed by " + oldAddr + " (its signature holds), not by " + newAddr
	if r.code != exitFail || !strings.Contains(r.stdout, want) || strings.Contains(r.stdout, "TAMPERED") || !strings.Contains(r.stdout, "--address "+oldAddr) {
		t.Fatalf("audit verify with another key: %s\nwant exit %d, %q and --address %s, not TAMPERED", r, exitFail, want, oldAddr)
	}
	if r := runCLI(t, "", "audit", "verify", "--data-dir", dataDir, "--key", keyFile, "--address", oldAddr); r.code != exitOK || !strings.Contains(r.stdout, "signed by "+oldAddr) {
		t.Fatalf("audit verify --address the old key's: %s", r)
	}
}

// auditNode makes a node's data folder (cfg.DataDir) with its key file
// (key) and database, and opens the audit log on that database as the
// node does. The test closes the log and the database.
func auditNode(t *testing.T) (config.Config, *identity.Key, *sqldb.DB, *audit.Log) {
	t.Helper()
	ctx := context.Background()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(cfg.KeyPath(), key); err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(ctx, db, node.AuditOptions(cfg, key, identity.Mainnet))
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return cfg, key, db, l
}

// A node on a database outside its data folder: approve's "read it
// again" names --database as it was given, and the command works; the
// refusals of a task that does not exist or has ended say what to do,
// and an approved task is not said to have its action withdrawn.
func TestApproveOnAnotherDatabase(t *testing.T) {
	dir := t.TempDir()
	dataDir, db := filepath.Join(dir, "data"), filepath.Join(dir, "tasks-elsewhere.db")
	cfg := config.Default()
	cfg.DataDir, cfg.Database, cfg.RelayListen, cfg.HTTPListen = dataDir, db, "127.0.0.1:0", ""
	_, propose := proposalNode(t, cfg)
	propose("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "one\n"})
	del := propose("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"})
	if del.Status.State != "input_required" {
		t.Fatalf("delete: %+v", del)
	}
	node := []string{"--data-dir", dataDir, "--database", db}

	r := runTerminal(t, "", append(append([]string{"approve"}, node...), del.ID)...)
	_, again, _ := strings.Cut(r.stderr, "read it again: snapnode ")
	if want := "task show --data-dir " + dataDir + " --database " + db + " " + del.ID + "\n"; r.code != exitOK || again != want {
		t.Fatalf("approve on a terminal: %s\nwant it to end: read it again: snapnode %s", r, want)
	}
	if r := runCLI(t, "", strings.Fields(again)...); r.code != exitOK || !strings.Contains(r.stdout, `"state":"completed"`) {
		t.Fatalf("the command approve gave: %s", r)
	}

	for _, op := range []string{"approve", "deny"} {
		r := runCLI(t, "", append(append([]string{op}, node...), del.ID)...)
		if r.code != exitFail || !strings.Contains(r.stderr, "is completed") || strings.Contains(r.stderr, "were withdrawn") ||
			!strings.Contains(r.stderr, "snapnode task show") {
			t.Errorf("%s of an approved task: %s\nwant it to say the task is completed, that nothing of it can be decided, and how to read it, not that its actions were withdrawn", op, r)
		}
	}
	if r := runCLI(t, "", append(append([]string{"approve"}, node...), "no-such-task")...); r.code != exitFail ||
		!strings.Contains(r.stderr, "no-such-task") || !strings.Contains(r.stderr, "snapnode held") {
		t.Errorf("approve of an unknown task: %s\nwant it to name the task and snapnode held", r)
	}
	if r := runCLI(t, "", append(append([]string{"task", "show"}, node...), "no-such-task")...); r.code != exitFail ||
		!strings.Contains(r.stderr, "no-such-task") || !strings.Contains(r.stderr, "snapnode task list") {
		t.Errorf("task show of an unknown task: %s\nwant it to name the task and snapnode task list", r)
	}
}

// held --diff reads diffs up to a budget and no further: a page whose
// diffs, their invisible characters spelled out (twelve bytes for one),
// would pass the admin socket's bound ends at the action that spends the
// budget and says so, with the command that lists the next page. Before,
// the node read every held action's diff (up to 1,000) and spelled them
// out, and only then found the answer too long to send: held --diff
// failed, having done all the work.
func TestHeldDiffBudget(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
	_, propose := proposalNode(t, cfg)
	sandbox := filepath.Join(dataDir, "sandbox")
	dd := []string{"--data-dir", dataDir}
	// Six files of 1 MiB of lines of control characters: their deletes'
	// diffs, spelled out, are 72 MiB.
	line := strings.Repeat("\x01", 1023) + "\n"
	const files = 6
	var ids []string
	for i := range files {
		name := fmt.Sprintf("c%d.txt", i)
		if err := os.WriteFile(filepath.Join(sandbox, name), []byte(strings.Repeat(line, 1024)), 0o600); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, propose("DELETE_FILE", map[string]any{"path": "/sandbox/" + name}).ID)
	}
	r := runCLI(t, "", append([]string{"held", "--diff"}, dd...)...)
	note, next, _ := strings.Cut(strings.TrimSpace(r.stderr), "the next page: ")
	listed := strings.Count(r.stdout, "\t") / 5
	if r.code != exitOK || listed == 0 || listed >= files || !strings.Contains(note, "diffs") || next == "" {
		t.Fatalf("held --diff of %d large diffs: exit %d, %d listed; stderr %q", files, r.code, listed, r.stderr)
	}
	if len(r.stdout) > 64<<20 {
		t.Errorf("held --diff printed %d bytes", len(r.stdout))
	}
	// The next page, run as printed, starts where this one ended.
	words := strings.Fields(next)
	if r := runCLI(t, "", words[1:]...); r.code != exitOK || !strings.HasPrefix(r.stdout, ids[listed]+"\t") {
		t.Fatalf("%s: exit %d, stdout starts %.80q, want %s first", next, r.code, r.stdout, ids[listed])
	}
	// Without --diff the sums alone are sent: every action is listed.
	if r := runCLI(t, "", append([]string{"held"}, dd...)...); r.code != exitOK || strings.Count(r.stdout, "\n") != files {
		t.Errorf("held: %s", r)
	}
}
