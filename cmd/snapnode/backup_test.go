package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
)

// backupPeer is a requester of a test node over its embedded relay.
type backupPeer struct {
	client *client.Nostr
	target client.Target
}

func newBackupPeer(t *testing.T, k *identity.Key, n *node.Node) *backupPeer {
	ctx, cancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: n.RelayURLs(), Logger: slog.New(slog.DiscardHandler)})
	pool.Start(ctx)
	t.Cleanup(func() { cancel(); pool.Close() })
	return &backupPeer{client.NewNostr(client.NostrConfig{Key: k, Relays: pool}),
		client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()}}
}

// call sends method with payload and returns the answer's task.
func (p *backupPeer) call(ctx context.Context, method string, payload any) (id, state string, err error) {
	body, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := p.client.Request(ctx, p.target, client.NostrRequest{Method: method, Payload: body})
	if err != nil {
		return "", "", err
	}
	var v struct {
		Task *struct {
			ID     string `json:"id"`
			Status struct{ State string }
		} `json:"task"`
		ID     string `json:"id"`
		Status struct{ State string }
	}
	if err := json.Unmarshal(resp.Payload, &v); err != nil {
		return "", "", err
	}
	if v.Task != nil {
		return v.Task.ID, v.Task.Status.State, nil
	}
	if v.ID == "" {
		return "", "", fmt.Errorf("%s: no task in %s", method, resp.Payload)
	}
	return v.ID, v.Status.State, nil
}

func textMessage(s string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": s}}}}
}

func proposalMessage(action string, args map[string]any) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
			"reasoning": "test", "action": action, "args": args}}}}}
}

// TestBackupAndRestore runs a node, gives it tasks and audited actions,
// backs it up while a peer keeps writing to it, stops it, restores the
// backup into an empty data folder as the operator's guide says (copy the
// files back) and starts a node there: same address, the tasks, and an
// audit log that verifies to the head the manifest recorded.
func TestBackupAndRestore(t *testing.T) {
	noEnvKey(t)
	t.Setenv("SNAPNODE_DATA_DIR", "")
	t.Setenv("SNAPNODE_CONFIG", "")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
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
	k, _ := identity.Generate()
	peer := newBackupPeer(t, k, a)

	// Before the backup: a promoted write, a held delete, a text task.
	before := map[string]string{}
	for _, m := range []map[string]any{
		proposalMessage("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "one\n"}),
		proposalMessage("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"}),
		textMessage("hello"),
	} {
		id, state, err := peer.call(ctx, "message/send", m)
		if err != nil {
			t.Fatal(err)
		}
		before[id] = state
	}
	var held string
	for id, state := range before {
		if state == "input_required" {
			held = id
		}
	}
	if held == "" {
		t.Fatalf("no held action among %v", before)
	}

	// A peer keeps writing (tasks and audited writes) during the backup.
	wctx, stopWriter := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var writes int
	wg.Go(func() {
		for i := 0; wctx.Err() == nil; i++ {
			m := textMessage(fmt.Sprint("busy ", i))
			if i%2 == 1 {
				m = proposalMessage("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/busy-%d.txt", i), "content": "x\n"})
			}
			if _, _, err := peer.call(wctx, "message/send", m); err == nil {
				writes++
			}
		}
	})
	out := filepath.Join(t.TempDir(), "backup")
	r := runCLI(t, "", "backup", "--out", out, "--data-dir", dataDir)
	stopWriter()
	wg.Wait()
	if r.code != exitOK {
		t.Fatalf("backup: %s", r)
	}
	t.Logf("the peer's writes while the test ran the backup: %d", writes)
	var m backup.Manifest
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("backup printed no manifest: %v\n%s", err, r)
	}
	if m.Address != a.Address() || m.Audit.Seq == 0 {
		t.Fatalf("manifest: address %s audit %+v; the node is %s", m.Address, m.Audit, a.Address())
	}
	stopA()
	stoppedA = true
	if err := a.Wait(); err != nil {
		t.Fatal(err)
	}

	// Restore: check the sums, copy every file but the manifest into an
	// empty data folder.
	restored := filepath.Join(t.TempDir(), "restored")
	if err := os.Mkdir(restored, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(out, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Fatalf("%s: the sum differs from the manifest's", f.Name)
		}
		if err := os.WriteFile(filepath.Join(restored, f.Name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dd := []string{"--data-dir", restored}
	want := fmt.Sprintf("head seq %d hash %s", m.Audit.Seq, m.Audit.Hash)
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK || !strings.Contains(r.stdout, want) {
		t.Fatalf("audit verify of the restored folder, want %q: %s", want, r)
	}

	cfg.DataDir = restored
	bctx, stopB := context.WithCancel(context.Background())
	b, err := node.Start(bctx, cfg, logger)
	if err != nil {
		stopB()
		t.Fatal(err)
	}
	t.Cleanup(func() { stopB(); b.Wait() })
	if b.Address() != a.Address() {
		t.Errorf("restored node's address %s, was %s", b.Address(), a.Address())
	}
	list := runCLI(t, "", append([]string{"task", "list"}, dd...)...)
	for id, state := range before {
		if !strings.Contains(list.stdout, `"id":"`+id+`"`) {
			t.Errorf("task %s (%s) is not in the restored node: %s", id, state, list)
		}
	}
	// The requester still reaches its held task through the restored node.
	id, state, err := newBackupPeer(t, k, b).call(bctx, "tasks/get", map[string]any{"taskId": held})
	if err != nil || id != held || state != "input_required" {
		t.Errorf("tasks/get of the held task on the restored node: %s %s %v", id, state, err)
	}
	if r := runCLI(t, "", append([]string{"audit", "verify"}, dd...)...); r.code != exitOK {
		t.Errorf("audit verify with the restored node running: %s", r)
	}
}
