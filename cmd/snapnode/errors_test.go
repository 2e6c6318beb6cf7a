package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/flock"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestErrorMessages: what a person sees after the common mistakes, compared
// with testdata/errors/NAME.golden (run with -update to accept a change).
// Each message names what was wrong and what to do, once, without the
// list of every flag; the temporary folder is written $TMP.
func TestErrorMessages(t *testing.T) {
	noEnvKey(t)
	t.Setenv("SNAPNODE_DATA_DIR", "")
	t.Setenv("SNAPNODE_CONFIG", "")
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	badConfig := writeFile(t, dir, "bad.toml", "data_dir = \"x\"\nlog_levle = \"debug\"\n", 0o600)
	wrongValue := writeFile(t, dir, "value.toml", "log_level = \"loud\"\n", 0o600)
	const peer = "bc1pnl7eeyeujrj5dj3sylpkx4jnq5rgtunu66la2kyjg2anarn2sn9skwqymj"
	otherNode := otherNodesFolder(t, filepath.Join(dir, "other-node"), peer)
	busy := busyBackupFolder(t, filepath.Join(dir, "busy"))
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"unknown-command", []string{"rnu"}, 2},
		{"unknown-flag", []string{"run", "--data-dri", dir}, 2},
		{"flag-value", []string{"task", "list", "--limit", "many"}, 2},
		{"config-unknown-key", []string{"run", "--config", badConfig}, 2},
		{"config-bad-value", []string{"run", "--config", wrongValue}, 2},
		{"agent-reasoning-effort", []string{"run", "--agent-reasoning-effort", "off"}, 2},
		{"missing-key", []string{"run", "--data-dir", filepath.Join(dir, "node"), "--key", filepath.Join(dir, "nope.key"), "--relay", "ws://127.0.0.1:1", "--http-listen", "off"}, 1},
		{"other-nodes-database", []string{"run", "--data-dir", otherNode, "--key", key, "--relay-listen", "127.0.0.1:0", "--http-listen", "off", "--log-level", "warn"}, 1},
		{"wrong-folder-task-list", []string{"task", "list", "--data-dir", filepath.Join(dir, "elsewhere")}, 1},
		{"wrong-folder-audit", []string{"audit", "verify", "--data-dir", filepath.Join(dir, "elsewhere")}, 1},
		{"wrong-folder-job", []string{"job", "list", "--data-dir", filepath.Join(dir, "elsewhere")}, 1},
		{"backup-no-out", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere")}, 2},
		{"backup-wrong-folder", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere"), "--out", filepath.Join(dir, "b1")}, 1},
		{"backup-postgres", []string{"backup", "--database", "postgres://snapnode@127.0.0.1:1/snapnode", "--out", filepath.Join(dir, "b2")}, 2},
		{"backup-not-empty", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere"), "--out", dir}, 2},
		{"backup-out-and-check", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere"), "--out", filepath.Join(dir, "b3"), "--check", dir}, 2},
		{"backup-check-no-manifest", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere"), "--check", dir}, 1},
		{"backup-check-busy", []string{"backup", "--data-dir", filepath.Join(dir, "elsewhere"), "--check", busy}, 1},
		{"backup-restore-busy", []string{"backup", "--data-dir", filepath.Join(dir, "restored-node"), "--restore", busy}, 1},
		{"unreachable-relay", []string{"send", "--key", key, "--to", peer, "--relay", "ws://127.0.0.1:1", "--timeout", "5s", "hello"}, 3},
		{"unreachable-relay-discover", []string{"discover", "--identity", peer, "--relay", "ws://127.0.0.1:1", "--timeout", "3s"}, 1},
		{"missing-key-sign", []string{"sign", "--key", filepath.Join(dir, "nope.key")}, 2},
		{"missing-key-send", []string{"send", "--key", filepath.Join(dir, "nope.key"), "--to", peer, "hello"}, 2},
		{"unknown-sub-command", []string{"job", "lsit"}, 2},
		{"task-list-negative-limit", []string{"task", "list", "--data-dir", filepath.Join(dir, "elsewhere"), "--limit", "-1"}, 2},
		{"task-list-bad-from", []string{"task", "list", "--data-dir", filepath.Join(dir, "elsewhere"), "--from", "alice"}, 2},
		{"timeout-zero", []string{"send", "--key", key, "--to", peer, "--timeout", "0s", "hello"}, 2},
		{"timeout-negative-discover", []string{"discover", "--identity", peer, "--timeout", "-1s"}, 2},
		{"relay-bad-share", []string{"relay", "--listen", "127.0.0.1:0", "--db", ":memory:", "--store-peer-share", "2"}, 2},
		{"relay-negative-rate", []string{"relay", "--listen", "127.0.0.1:0", "--db", ":memory:", "--event-rate", "-1"}, 2},
		{"relay-negative-max-events", []string{"relay", "--listen", "127.0.0.1:0", "--db", ":memory:", "--store-max-events", "-1"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if strings.HasSuffix(tt.name, "-busy") && busy == "" {
				t.Skip("no lock can be taken on the temporary folder")
			}
			r := runCLI(t, "", tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d\n%s", r.code, tt.code, r)
			}
			got := "exit " + strconv.Itoa(r.code) + "\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr
			got = strings.ReplaceAll(got, dir, "$TMP")
			golden := filepath.Join("testdata", "errors", tt.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("differs from %s (-update to accept):\n%s", golden, got)
			}
			if strings.Contains(r.stderr, "-agent-max-jobs") {
				t.Error("the message dumps the list of every flag")
			}
			if strings.Contains(r.stderr, "snapnode snapnode") {
				t.Error("the program's name is doubled")
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "elsewhere")); !os.IsNotExist(err) {
		t.Errorf("an operator command created the folder it did not find: %v", err)
	}
}

// busyBackupFolder makes the folder dir and holds the lock a backup
// being written into it holds (snapnode backup --out), until the test
// ends; it returns dir, or "" where no lock can be taken.
func busyBackupFolder(t *testing.T, dir string) string {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := flock.TryExclusive(f); err != nil {
		return "" // no locks here: the cases that need one are skipped
	}
	return dir
}

// otherNodesFolder makes the data folder dir with a task database that
// records owner as the node it belongs to, and returns dir.
func otherNodesFolder(t *testing.T, dir, owner string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := sqldb.Open(ctx, filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlstore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got, err := st.RecordIdentity(ctx, owner); err != nil || got != owner {
		t.Fatalf("RecordIdentity = %q, %v", got, err)
	}
	return dir
}
