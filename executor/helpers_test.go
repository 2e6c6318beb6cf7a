package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testclock"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// The identities of the tests: P2TR addresses, opaque to the executor.
const (
	agent    = "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
	operator = "bc1pqqqsyqcyq5rqwzqfpg9scrgwpugpzysnzs23v9ccrydpk8qarc0jqq0cxzg"
	other    = "bc1pxwww0ct9ue7e8tdnlmug5m2tamfn7q06sahstg39ys4c9f3340qqxrdu9k"
)

// clock is the tests' settable clock.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)) }

// env is an Executor on real parts: a database (SQLite or PostgreSQL), a
// sandbox in a temporary folder, the default policy, an audit log.
type env struct {
	t      testing.TB
	dsn    string
	dir    string
	clock  *clock
	holder *policy.Holder
	// cooldown is Config.RollbackCooldown.
	cooldown time.Duration
	// snapAge and snapBytes are Config.SnapshotMaxAge and
	// Config.SnapshotMaxBytes; set them, then reopen.
	snapAge   time.Duration
	snapBytes int64
	// facts and defaults are Config.Facts and Config.Defaults; set them,
	// then reopen.
	facts    executor.Facts
	defaults proposal.Defaults
	// levels is Config.AuditLevels (nil: the defaults).
	levels executor.AuditLevels
	// quotas is Config.Quotas (zero: the defaults).
	quotas executor.Quotas
	// limits are the sandbox's caps (zero fields: the defaults); set
	// them, then reopen.
	limits sandbox.Limits
	// retain is the audit log's Options.Retain (0 keeps every entry).
	retain time.Duration
	// signer is the audit log's Options.Signer (nil: none, no seals).
	signer audit.Signer
	// logger is Config.Logger (nil: discarded); set it, then reopen.
	logger *slog.Logger

	db  *sqldb.DB
	sb  *sandbox.Sandbox
	log *audit.Log
	ex  *executor.Executor
}

func newEnv(t testing.TB, dsn string) *env {
	t.Helper()
	v := &env{t: t, dsn: dsn, dir: t.TempDir(), clock: newClock(), holder: operatorHolder(policy.Default()),
		cooldown: 10 * time.Minute, defaults: proposal.NewDefaults()}
	v.open()
	t.Cleanup(v.close)
	return v
}

// open opens the database, the sandbox, the log and the executor.
func (v *env) open() {
	v.t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, v.dsn, sqldb.Options{})
	if err != nil {
		v.t.Fatal(err)
	}
	sb, err := sandbox.Open(v.dir, v.limits)
	if err != nil {
		v.t.Fatal(err)
	}
	log, err := audit.New(ctx, db, audit.Options{Now: v.clock.Now, Retain: v.retain, Signer: v.signer})
	if err != nil {
		v.t.Fatal(err)
	}
	ex, err := executor.New(ctx, executor.Config{
		DB: db, Sandbox: sb, Policy: v.holder, Audit: log,
		Defaults:         v.defaults,
		Facts:            v.facts,
		AuditLevels:      v.levels,
		Quotas:           v.quotas,
		RollbackCooldown: v.cooldown,
		SnapshotMaxAge:   v.snapAge,
		SnapshotMaxBytes: v.snapBytes,
		Now:              v.clock.Now,
		Logger:           v.logger,
	})
	if err != nil {
		v.t.Fatal(err)
	}
	v.db, v.sb, v.log, v.ex = db, sb, log, ex
}

func (v *env) close() {
	if v.db == nil {
		return
	}
	_ = v.log.Close()
	_ = v.sb.Close()
	_ = v.db.Close()
	v.db = nil
}

// reopen closes everything and opens it again on the same database and
// folder, as a restarted node would.
func (v *env) reopen() {
	v.t.Helper()
	v.close()
	v.open()
}

// file writes a file of the workspace directly, as something other than
// the executor would.
func (v *env) file(p, content string) {
	v.t.Helper()
	full := filepath.Join(v.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		v.t.Fatal(err)
	}
}

// content returns a workspace file's content and whether it exists.
func (v *env) content(p string) (string, bool) {
	v.t.Helper()
	b, err := os.ReadFile(filepath.Join(v.dir, filepath.FromSlash(p)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		v.t.Fatal(err)
	}
	return string(b), true
}

func (v *env) run(requester string, data []byte) *executor.Result {
	v.t.Helper()
	res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: requester, Data: data})
	if err != nil {
		v.t.Fatalf("Run: %v", err)
	}
	return res
}

// steps are the audit steps of an action, in order.
func (v *env) steps(actionID string) []string {
	v.t.Helper()
	es, err := v.log.Query(context.Background(), audit.Filter{Action: actionID})
	if err != nil {
		v.t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, string(e.Step))
	}
	return out
}

// entries are the audit entries of an action.
func (v *env) entries(actionID string) []audit.Entry {
	v.t.Helper()
	es, err := v.log.Query(context.Background(), audit.Filter{Action: actionID})
	if err != nil {
		v.t.Fatal(err)
	}
	return es
}

func (v *env) verify() {
	v.t.Helper()
	if _, err := v.log.Verify(context.Background()); err != nil {
		v.t.Fatalf("audit Verify: %v", err)
	}
}

func wantSteps(t testing.TB, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("audit steps = %v, want %v", got, want)
	}
}

func wantOutcome(t testing.TB, res *executor.Result, want executor.Outcome) {
	t.Helper()
	if res.Outcome != want {
		t.Fatalf("outcome = %s, want %s (output %s, reason %q)", res.Outcome, want, res.Output, res.Reason)
	}
}

// prop builds a proposal of schemas/proposal.v1.json's shape.
func prop(action string, args map[string]string) []byte {
	if args == nil {
		args = map[string]string{}
	}
	b, err := json.Marshal(map[string]any{
		"schema_version": "1.0.0",
		"id":             "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",
		"reasoning":      "a test proposal",
		"action":         action,
		"args":           args,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// errorCode returns the error_code of a structured error output.
func errorCode(t testing.TB, out []byte) string {
	t.Helper()
	var v struct {
		Code string `json:"error_code"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return v.Code
}

// stagedRewrite writes a.txt ("before") and stages its rewrite ("after")
// without promoting it; it returns the staged change and its snapshot as
// the executor stores it.
func (v *env) stagedRewrite(ctx context.Context) (*sandbox.Staged, []byte) {
	v.t.Helper()
	v.file("a.txt", "before\n")
	st, err := v.sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("after\n")}})
	if err != nil {
		v.t.Fatal(err)
	}
	snap, err := json.Marshal(st.Snapshot())
	if err != nil {
		v.t.Fatal(err)
	}
	return st, snap
}

// operatorHolder holds e with one operator, operator.
func operatorHolder(e *policy.Engine) *policy.Holder {
	h := &policy.Holder{}
	h.Set(policy.InForce{Engine: e, Operator: func(addr string) bool { return addr == operator }})
	return h
}
