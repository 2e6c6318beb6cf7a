package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestWorkspaceCap: the node-wide caps of the workspace (the sandbox's
// MaxTotalEntries and MaxTotalBytes) hold for every requester together,
// each requester within its own quotas: an action past one fails with
// LIMIT_EXCEEDED naming it and saying it is the workspace's, changes
// nothing and counts nothing in its requester's ledger.
func TestWorkspaceCap(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		v := newEnv(t, dsn)
		v.limits = sandbox.Limits{MaxTotalEntries: 3, MaxTotalBytes: 10}
		v.reopen()
		for _, s := range []struct{ who, action, path, content string }{
			{agent, "WRITE_FILE", "/sandbox/a.txt", "aaaa"},
			{other, "WRITE_FILE", "/sandbox/b.txt", "bbbb"},
			{agent, "CREATE_DIRECTORY", "/sandbox/d", ""},
		} {
			args := map[string]string{"path": s.path}
			if s.action == "WRITE_FILE" {
				args["content"] = s.content
			}
			if res := v.run(s.who, prop(s.action, args)); res.Outcome != executor.Completed {
				t.Fatalf("%s %s: %s %s", s.action, s.path, res.Outcome, res.Output)
			}
		}
		for _, c := range []struct {
			who, action, path, content string
			limit                      sandbox.Limit
			max, got                   int64
			words                      string
		}{
			{other, "CREATE_DIRECTORY", "/sandbox/e", "", sandbox.LimitTotalEntries, 3, 4, "3 files and folders"},
			{other, "WRITE_FILE", "/sandbox/b.txt", "bbbbbbb", sandbox.LimitTotalBytes, 10, 11, "10 bytes"},
		} {
			args := map[string]string{"path": c.path}
			if c.content != "" {
				args["content"] = c.content
			}
			res := v.run(c.who, prop(c.action, args))
			var f executor.Failure
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != executor.Failed || f.Code != executor.CodeLimitExceeded || f.Limit != string(c.limit) || f.Max != c.max || f.Got != c.got {
				t.Fatalf("%s: %s %s, want LIMIT_EXCEEDED %s max %d got %d", c.path, res.Outcome, res.Output, c.limit, c.max, c.got)
			}
			if !strings.Contains(f.Message, "workspace") || !strings.Contains(f.Message, c.words) {
				t.Errorf("%s: message %q does not name the workspace's cap of %s", c.path, f.Message, c.words)
			}
		}
		if _, err := os.Stat(filepath.Join(v.dir, "e")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("e after the refusal: %v", err)
		}
		if b, err := os.ReadFile(filepath.Join(v.dir, "b.txt")); err != nil || string(b) != "bbbb" {
			t.Errorf("b.txt after the refusal: %q, %v", b, err)
		}
		if got, err := v.ex.Usage(ctx, other); err != nil || got != (sandbox.Counts{Bytes: 4, Files: 1}) {
			t.Errorf("usage of the refused requester: %+v, %v", got, err)
		}
		v.verify()
	})
}
