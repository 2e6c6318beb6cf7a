package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/snap"
)

// httpPeer posts signed SNAP messages to a node's HTTP endpoint.
type httpPeer struct {
	k    *identity.Key
	from string
}

// message signs a request of method with payload to the node at to.
func (p *httpPeer) message(t testing.TB, to, method string, payload any) []byte {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: p.from, To: to,
		Type: snap.TypeRequest, Method: method, Payload: body, Timestamp: time.Now().Unix()}
	if err := m.Sign(p.k); err != nil {
		t.Fatal(err)
	}
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends raw to n and returns the response's payload.
func (p *httpPeer) post(ctx context.Context, n *node.Node, raw []byte) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.HTTPURL()+"/snap", bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var m struct{ Payload map[string]any }
	if err := json.Unmarshal(body, &m); err != nil || m.Payload == nil {
		return nil, fmt.Errorf("HTTP %d: %.300s: %v", resp.StatusCode, body, err)
	}
	return m.Payload, nil
}

// code is the SNAP error code of a payload, 0 for a result.
func code(p map[string]any) int {
	e, ok := p["error"].(map[string]any)
	if !ok {
		return 0
	}
	c, _ := e["code"].(float64)
	return int(c)
}

// taskID is the id of the task a payload carries ("" for none).
func taskID(p map[string]any) string {
	if t, ok := p["task"].(map[string]any); ok {
		p = t
	}
	id, _ := p["id"].(string)
	return id
}

// TestRestoreAsTheGuideSays follows operator.md's "Backup and restore"
// step by step on a node that is busy while it is backed up: requests
// over HTTP (tasks, promoted writes, agent jobs) go on during `snapnode
// backup`; then the node is stopped, `backup --restore` puts each file of
// the backup where the manifest's source says (the workspace left as it
// is), `audit verify` is run and the node started again. The restored node has the same
// address, the tasks of the backup, an audit log that verifies to the
// manifest's head, and the replay records of the requests it had
// handled: the same signed message/send again creates no task (the kept
// answer, deduplicated) and a tasks/get again is refused 2006. Every
// file of the backup is 0600 in a 0700 folder (it holds the key). The
// backup's tasks.db put alone in the data folder, under the record of a
// later seal, is refused at start, naming the record.
func TestRestoreAsTheGuideSays(t *testing.T) {
	noEnvKey(t)
	t.Setenv("SNAPNODE_DATA_DIR", "")
	t.Setenv("SNAPNODE_CONFIG", "")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	llm := llmtest.New(t)
	var jobs sync.Map
	llm.SetHandler(func(r llmtest.Request) llmtest.Reply {
		// A job writes one file, then finishes.
		for _, m := range r.Messages {
			if m.Role == "assistant" {
				return llmtest.Text(agentProp("FINISH", map[string]any{"response": "done"}))
			}
		}
		n := uuid.NewString()
		jobs.Store(n, true)
		return llmtest.Text(agentProp("WRITE_FILE", map[string]any{"path": "/sandbox/job-" + n + ".txt", "content": "job\n"}))
	})
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	cfg.Agent.LLMURL, cfg.Agent.LLMModel = llm.URL(), llmtest.DefaultModel
	ctx, stopA := context.WithCancel(context.Background())
	a, err := node.Start(ctx, cfg, logger)
	if err != nil {
		stopA()
		t.Fatal(err)
	}
	stoppedA := false
	t.Cleanup(func() {
		if !stoppedA {
			stopA()
			a.Wait()
		}
	})
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer := &httpPeer{k: k, from: k.Address(identity.Mainnet)}

	// Before the backup: a promoted write, whose request and a tasks/get
	// of its task are kept to be sent again to the restored node.
	send := peer.message(t, a.Address(), "message/send",
		proposalMessage("WRITE_FILE", map[string]any{"path": "/sandbox/kept.txt", "content": "kept\n"}))
	p, err := peer.post(ctx, a, send)
	if err != nil || code(p) != 0 || taskID(p) == "" {
		t.Fatalf("message/send: %v %v", p, err)
	}
	kept := taskID(p)
	get := peer.message(t, a.Address(), "tasks/get", map[string]any{"taskId": kept})
	if p, err := peer.post(ctx, a, get); err != nil || taskID(p) != kept {
		t.Fatalf("tasks/get: %v %v", p, err)
	}

	// Writers during the backup: promoted writes, reads, agent jobs.
	wctx, stopWriters := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	writes := 0
	tick := make(chan struct{}, 1) // every 10th write answered
	for w := range 3 {
		wg.Go(func() {
			for i := 0; wctx.Err() == nil; i++ {
				var m map[string]any
				// Each write to a file of its own: a write the copy
				// caught promoting is undone at the restored node's
				// start only if its file is still as it left it (see
				// operator.md, "What the restored node knows").
				switch (w + i) % 2 {
				case 0:
					m = proposalMessage("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/busy-%d-%d.txt", w, i), "content": "x\n"})
				default:
					m = textMessage(fmt.Sprint("job ", w, i))
				}
				if p, err := peer.post(wctx, a, peer.message(t, a.Address(), "message/send", m)); err == nil && code(p) == 0 {
					mu.Lock()
					writes++
					if writes%10 == 0 {
						select {
						case tick <- struct{}{}:
						default:
						}
					}
					mu.Unlock()
				}
			}
		})
	}
	backups := filepath.Join(t.TempDir(), "backups")
	if err := os.Mkdir(backups, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(backups, "2026-11-25")
	<-tick // the writers are busy
	r := runCLI(t, "", "backup", "--data-dir", dataDir, "--out", out)
	backupOut := r.stdout
	<-tick
	stopWriters()
	wg.Wait()
	if r.code != exitOK {
		t.Fatalf("backup: %s", r)
	}
	t.Logf("requests answered while the test ran: %d; model calls: %d", writes, llm.Calls())
	var m backup.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("backup printed no manifest: %v\n%s", err, r)
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the backup folder: %v %v; want 0700", fi.Mode(), err)
	}
	sawKey := false
	for _, f := range append(m.Files, backup.File{Name: backup.ManifestName}) {
		fi, err := os.Stat(filepath.Join(out, f.Name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s in the backup: %v %v; want 0600", f.Name, fi.Mode(), err)
		}
		sawKey = sawKey || f.Kind == backup.KindKey
	}
	if !sawKey {
		t.Errorf("no key in the backup: %+v", m.Files)
	}
	// The guide checks the backup before it stops the node: the check
	// prints the same manifest. A copy of the backup whose manifest was
	// edited to restore tasks.db elsewhere (its sums made again) fails
	// the check, naming the file and where it would have gone.
	if r := runCLI(t, "", "backup", "--check", out, "--data-dir", dataDir); r.code != exitOK {
		t.Fatalf("backup --check of the backup: %s", r)
	} else if strings.TrimSpace(r.stdout) != strings.TrimSpace(backupOut) {
		t.Errorf("backup --check printed\n%s\nthe backup printed\n%s", r.stdout, backupOut)
	}
	edited := filepath.Join(backups, "edited")
	if err := os.CopyFS(edited, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.db")
	em := m
	em.Files = slices.Clone(m.Files)
	for i := range em.Files {
		if em.Files[i].Name == "tasks.db" {
			em.Files[i].Source = elsewhere
		}
	}
	if b, err := json.Marshal(em); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(edited, backup.ManifestName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "backup", "--check", edited, "--data-dir", dataDir); r.code != exitFail || !strings.Contains(r.stderr, "tasks.db (database) would be restored to "+elsewhere) {
		t.Errorf("backup --check of a backup restoring tasks.db to %s: %s", elsewhere, r)
	}
	stopA()
	stoppedA = true
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}

	// The wrong way first: the backup's tasks.db alone over the data
	// folder, whose record of the last seal names the seal of the stop,
	// newer than the copy. The node refuses, naming the record.
	tasksDB := filepath.Join(dataDir, "tasks.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(tasksDB+suffix, tasksDB+suffix+".newer"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "tasks.db")); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(tasksDB, b, 0o600); err != nil {
		t.Fatal(err)
	}
	record := filepath.Join(dataDir, "audit-seal.json")
	if n, err := node.Start(context.Background(), cfg, logger); err == nil {
		n.Wait()
		t.Fatal("the node started on the backup's tasks.db under a newer record of its last seal")
	} else if !errors.Is(err, audit.ErrTampered) || !strings.Contains(err.Error(), record) {
		t.Fatalf("Start on the backup's tasks.db alone: %v; want audit.ErrTampered naming %s", err, record)
	}

	// The guide: stop (done), restore, audit verify, start. The restore
	// replaces the files the failed start left, the newer record among
	// them, and leaves the workspace alone.
	r = runCLI(t, "", "backup", "--restore", out, "--data-dir", dataDir)
	if r.code != exitOK {
		t.Fatalf("backup --restore: %s", r)
	}
	for _, f := range m.Files {
		if b, err := os.ReadFile(f.Source); err != nil || sha256Hex(b) != f.SHA256 {
			t.Fatalf("%s is not the backup's %s after the restore: %v", f.Source, f.Name, err)
		}
	}
	dd := []string{"--data-dir", dataDir}
	want := fmt.Sprintf("head seq %d hash %s", m.Audit.Seq, m.Audit.Hash)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("backup --restore printed no %q: %s", want, r)
	}
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify of the restored folder, want %q: %s", want, r)
	}
	bctx, stopB := context.WithCancel(context.Background())
	b, err := node.Start(bctx, cfg, logger)
	if err != nil {
		stopB()
		t.Fatalf("the restored node does not start: %v", err)
	}
	t.Cleanup(func() { stopB(); b.Wait() })
	if b.Address() != a.Address() {
		t.Errorf("restored node's address %s, was %s", b.Address(), a.Address())
	}
	if r := runCLI(t, "", append([]string{"task", "list"}, dd...)...); !strings.Contains(r.stdout, `"id":"`+kept+`"`) {
		t.Errorf("task %s is not in the restored node: %s", kept, r)
	}
	// The replays of requests the node handled before the backup.
	if p, err := peer.post(bctx, b, send); err != nil || p["deduplicated"] != true || taskID(p) != kept {
		t.Errorf("the message/send again to the restored node: %v %v; want task %s, deduplicated", p, err, kept)
	}
	if p, err := peer.post(bctx, b, get); err != nil || code(p) != int(snap.CodeDuplicateMessage) {
		t.Errorf("the tasks/get again to the restored node: %v %v; want %d", p, err, snap.CodeDuplicateMessage)
	}
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK {
		t.Errorf("audit verify with the restored node running: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "sandbox", "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("the workspace left alone: kept.txt %q, %v", b, err)
	}
}

func agentProp(action string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
		"reasoning": "to do " + action, "action": action, "args": args})
	return string(b)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestBackupRestoreCommand: `snapnode backup --restore DIR` puts a backup
// back over a node's changed data folder. While the node runs it is
// refused; a damaged copy of the backup is refused with nothing changed;
// then, the node stopped, it replaces the files (the old ones kept
// aside), leaves the workspace as it is and prints the audit head, which
// `audit verify` prints too; the node started again has the backup's
// tasks, not the one made after it. A data folder a restore left half
// done (its journal there) is refused by the node and by a restore of
// another backup.
func TestBackupRestoreCommand(t *testing.T) {
	noEnvKey(t)
	t.Setenv("SNAPNODE_DATA_DIR", "")
	t.Setenv("SNAPNODE_CONFIG", "")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	start := func() (*node.Node, func()) {
		t.Helper()
		ctx, stop := context.WithCancel(context.Background())
		n, err := node.Start(ctx, cfg, logger)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		var once sync.Once
		halt := func() {
			once.Do(func() {
				stop()
				if err := n.Wait(); err != nil {
					t.Error(err)
				}
			})
		}
		t.Cleanup(halt)
		return n, halt
	}
	a, stopA := start()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer := &httpPeer{k: k, from: k.Address(identity.Mainnet)}
	send := func(n *node.Node, path string) string {
		t.Helper()
		p, err := peer.post(context.Background(), n, peer.message(t, n.Address(), "message/send",
			proposalMessage("WRITE_FILE", map[string]any{"path": path, "content": "x\n"})))
		if err != nil || code(p) != 0 || taskID(p) == "" {
			t.Fatalf("message/send: %v %v", p, err)
		}
		return taskID(p)
	}
	kept := send(a, "/sandbox/kept.txt")
	dd := []string{"--data-dir", dataDir}
	out := filepath.Join(t.TempDir(), "backup")
	r := runCLI(t, "", append([]string{"backup", "--out", out}, dd...)...)
	if r.code != exitOK {
		t.Fatalf("backup: %s", r)
	}
	var m backup.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatal(err)
	}
	later := send(a, "/sandbox/later.txt")

	if r := runCLI(t, "", append([]string{"backup", "--restore", out}, dd...)...); r.code != exitFail || !strings.Contains(r.stderr, "a node runs with this data folder") || !strings.Contains(r.stderr, "nothing was restored") {
		t.Errorf("restore while the node runs: %s", r)
	}
	stopA()

	damaged := filepath.Join(t.TempDir(), "damaged")
	if err := os.CopyFS(damaged, os.DirFS(out)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(damaged, "tasks.db"))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(filepath.Join(damaged, "tasks.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	before := tree(t, dataDir)
	if r := runCLI(t, "", append([]string{"backup", "--restore", damaged}, dd...)...); r.code != exitFail || !strings.Contains(r.stderr, "tasks.db has SHA-256") || !strings.Contains(r.stderr, "nothing was restored") {
		t.Errorf("restore of a damaged backup: %s", r)
	}
	if after := tree(t, dataDir); !slices.Equal(before, after) {
		t.Errorf("a refused restore changed the data folder:\n%v\n%v", before, after)
	}

	r = runCLI(t, "", append([]string{"backup", "--restore", out}, dd...)...)
	if r.code != exitOK {
		t.Fatalf("restore: %s", r)
	}
	head := fmt.Sprintf("head seq %d hash %s", m.Audit.Seq, m.Audit.Hash)
	tasksDB := filepath.Join(dataDir, "tasks.db")
	for _, want := range []string{head, "replaced  " + tasksDB + " (database); kept the old as " + tasksDB + ".before-restore-",
		"unchanged " + filepath.Join(dataDir, "identity.key"), "the workspace " + filepath.Join(dataDir, "sandbox") + " is not in the backup: left as it is"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("restore printed no %q: %s", want, r)
		}
	}
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, head) {
		t.Errorf("audit verify after the restore, want %q: %s", head, r)
	}
	for _, f := range []string{"kept.txt", "later.txt"} {
		if _, err := os.Stat(filepath.Join(dataDir, "sandbox", f)); err != nil {
			t.Errorf("the workspace's %s: %v", f, err)
		}
	}
	bn, stopB := start()
	if bn.Address() != a.Address() {
		t.Errorf("restored node's address %s, was %s", bn.Address(), a.Address())
	}
	list := runCLI(t, "", append([]string{"task", "list"}, dd...)...)
	if !strings.Contains(list.stdout, `"id":"`+kept+`"`) || strings.Contains(list.stdout, later) {
		t.Errorf("the restored node's tasks, want %s and not %s: %s", kept, later, list)
	}
	stopB()

	// A restore stopped midway leaves its journal.
	journal := filepath.Join(dataDir, backup.JournalName)
	if err := os.WriteFile(journal, []byte(`{"backup":"/elsewhere/backup","startedAt":"2026-11-25T10:00:00Z","stamp":"20261125T100000Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := node.Start(context.Background(), cfg, logger); err == nil {
		n.Wait()
		t.Error("the node started on a data folder a restore left half done")
	} else if !strings.Contains(err.Error(), journal) {
		t.Errorf("start with the journal there: %v; want it named", err)
	}
	// Nor is a log some of whose files may be the backup's, others not,
	// verified (a database and a record of the last seal of two times
	// would read as tampering); nor read by the other commands.
	for _, args := range [][]string{{"audit", "verify"}, {"audit", "export"}, {"task", "list"}} {
		r := runCLI(t, "", append(args, dd...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, journal) || !strings.Contains(r.stderr, "Run the same restore again") || r.stdout != "" {
			t.Errorf("%s with the journal there: %s; want exit %d naming it and saying to run the restore again", strings.Join(args, " "), r, exitUsage)
		}
	}
	if r := runCLI(t, "", append([]string{"backup", "--restore", out}, dd...)...); r.code != exitFail || !strings.Contains(r.stderr, "/elsewhere/backup") {
		t.Errorf("restore of another backup than the one interrupted: %s", r)
	}
}

// tree lists the files below dir with their sizes and times.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var l []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		l = append(l, fmt.Sprint(path, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
