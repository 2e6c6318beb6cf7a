package node_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
)

// The node records its last seal in its data folder (audit-seal.json) at
// each seal, the one of a clean stop included. A chain rewritten while
// the node is stopped, from after the seal before on, with the node's
// last seal deleted, verifies on its own; the node refuses to start on
// it, naming the record and the entry it expected, and starts once the
// operator has moved the record aside (the recovery of a database
// restored from an older copy). Before, it started and sealed the
// rewritten chain at its next seal.
func TestAuditSealRecordAtStart(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		dataDir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(dsn, "sqlite:") {
			dsn = filepath.Join(dataDir, "tasks.db")
		}
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if err := identity.SaveKeyFile(filepath.Join(dataDir, "identity.key"), k); err != nil {
			t.Fatal(err)
		}
		db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		signer := audit.IdentitySigner(k, identity.Mainnet)
		// Entries 1…3 and their seal (4), 5…7: the node seals them at its
		// stop (8).
		l, err := audit.New(ctx, db, audit.Options{Signer: signer})
		if err != nil {
			t.Fatal(err)
		}
		appendN := func(n int) {
			for range n {
				if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
					t.Fatal(err)
				}
			}
		}
		appendN(3)
		if _, err := l.Seal(ctx); err != nil {
			t.Fatal(err)
		}
		appendN(3)

		mutate := func(cf *config.Config) {
			cf.DataDir = dataDir
			if !strings.HasSuffix(dsn, "tasks.db") {
				cf.Database = dsn
			}
		}
		_, stop := startNode(t, mutate)
		stop()
		record := filepath.Join(dataDir, "audit-seal.json")
		rec, err := audit.ReadSealRecord(record)
		if err != nil {
			t.Fatalf("the node's record of its last seal: %v", err)
		}
		es, err := l.Query(ctx, audit.Filter{Limit: audit.MaxQueryLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(es) != 8 || es[7].Step != audit.StepSealed || rec.Seq != 8 || rec.Hash != es[7].Hash {
			t.Fatalf("record %+v; want the seal of the stop, entry 8 of %d", rec, len(es))
		}

		// While the node is stopped: its seal deleted, 5…7 rewritten.
		exec := func(q string, args ...any) {
			t.Helper()
			if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(q), args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		exec("DELETE FROM audit_log WHERE seq >= 8")
		prev := es[3].Hash
		for _, e := range es[4:7] {
			e.Reason, e.Prev = "rewritten", prev
			e.Hash = audit.Hash(e)
			exec("UPDATE audit_log SET reason = ?, prev = ?, hash = ? WHERE seq = ?", e.Reason, e.Prev, e.Hash, e.Seq)
			prev = e.Hash
		}
		exec("UPDATE audit_head SET last_seq = 7, last_hash = ? WHERE id = 1", prev)
		if _, err := l.Verify(ctx); err != nil {
			t.Fatalf("the rewritten chain, without the record: %v; want it verified (the gap)", err)
		}

		cfg := config.Default()
		cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
		mutate(&cfg)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		n, err := node.Start(sctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err == nil {
			cancel()
			_ = n.Wait()
			t.Fatal("the node started on a chain without the seal its record names")
		}
		if !errors.Is(err, audit.ErrTampered) || !strings.Contains(err.Error(), record) || !strings.Contains(err.Error(), rec.Hash) || !strings.Contains(err.Error(), "entry 8") {
			t.Fatalf("Start: %v; want audit.ErrTampered naming %s and entry 8 with hash %s", err, record, rec.Hash)
		}

		// The operator's recovery: the record moved aside, kept.
		if err := os.Rename(record, record+".2026-11-25"); err != nil {
			t.Fatal(err)
		}
		_, stop = startNode(t, mutate)
		stop()
		if rec, err := audit.ReadSealRecord(record); err != nil || rec.Seq != 8 {
			t.Fatalf("the new record: %+v, %v; want the seal of the stop, entry 8", rec, err)
		}
	})
}

// A node started with a new key on the old data (another key file): its
// record names a seal the chain holds, signed by the old key. The refusal
// says so, naming both addresses and what the operator can do (the old
// key back, or the new key on a new database), as audit.ErrOtherKey;
// before, it was the refusal of a chain without the recorded seal, which
// told the operator to move the record aside as after a restore (and a
// node so started could then neither seal nor prune its log). With the
// old key back, the node starts.
func TestAuditSealRecordOtherKeyAtStart(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(filepath.Join(dataDir, "identity.key"), old); err != nil {
		t.Fatal(err)
	}
	signedEntry(t, filepath.Join(dataDir, "tasks.db"), old, false)
	_, stop := startNode(t, func(cf *config.Config) { cf.DataDir = dataDir })
	stop() // seals, and records the seal
	record := filepath.Join(dataDir, "audit-seal.json")
	if _, err := audit.ReadSealRecord(record); err != nil {
		t.Fatalf("the node's record of its last seal: %v", err)
	}
	// A database of a build before the record of the node's address
	// (which would refuse the new key first, as node.ErrOtherIdentity):
	// the seal alone tells the key that wrote the log.
	forgetIdentity(t, filepath.Join(dataDir, "tasks.db"))

	renewed, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "new.key")
	if err := identity.SaveKeyFile(keyFile, renewed); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
	cfg.DataDir, cfg.KeyFile = dataDir, keyFile
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, err := node.Start(sctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		cancel()
		_ = n.Wait()
		t.Fatal("the node started with another key than the one that sealed its log")
	}
	msg := err.Error()
	for _, want := range []string{old.Address(identity.Mainnet), renewed.Address(identity.Mainnet), record, "another key", "new database"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start: %v; want it to name %q", err, want)
		}
	}
	if !errors.Is(err, audit.ErrOtherKey) || strings.Contains(msg, "restored from a copy") {
		t.Errorf("Start: %v; want audit.ErrOtherKey, not the advice of a restore", err)
	}

	// The old key back: the node starts.
	_, stop = startNode(t, func(cf *config.Config) { cf.DataDir = dataDir })
	stop()
}

// A node started with a new key on old data whose folder has no record
// of the last seal (a data folder from before the record, or the record
// deleted): the chain's last seal, signed by the old key, is found at
// start, and the node refuses as it does with the record, naming both
// addresses and what to do (audit.ErrOtherKey). Before, it started, and
// logged a seal error every hour: the new key can neither seal nor prune
// a log the old one sealed. With the old key, the node starts.
func TestAuditOtherKeyWithoutRecordAtStart(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(filepath.Join(dataDir, "identity.key"), old); err != nil {
		t.Fatal(err)
	}
	signedEntry(t, filepath.Join(dataDir, "tasks.db"), old, false)
	_, stop := startNode(t, func(cf *config.Config) { cf.DataDir = dataDir })
	stop() // seals with the old key
	record := filepath.Join(dataDir, "audit-seal.json")
	if err := os.Remove(record); err != nil {
		t.Fatalf("the node's record of its last seal: %v", err)
	}
	forgetIdentity(t, filepath.Join(dataDir, "tasks.db")) // as above

	renewed, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "new.key")
	if err := identity.SaveKeyFile(keyFile, renewed); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
	cfg.DataDir, cfg.KeyFile = dataDir, keyFile
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n, err := node.Start(sctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		cancel()
		_ = n.Wait()
		t.Fatal("the node started, without a record, with another key than the one that sealed its log")
	}
	msg := err.Error()
	for _, want := range []string{old.Address(identity.Mainnet), renewed.Address(identity.Mainnet), record, "another key", "new database"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start: %v; want it to name %q", err, want)
		}
	}
	if !errors.Is(err, audit.ErrOtherKey) || strings.Contains(msg, "restored from a copy") {
		t.Errorf("Start: %v; want audit.ErrOtherKey, not the advice of a restore", err)
	}
	if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused start left a record: %v", err)
	}

	// The old key: the node starts.
	_, stop = startNode(t, func(cf *config.Config) { cf.DataDir = dataDir })
	stop()
}

// The console's audit page checks the chain against the node's record of
// its last seal, as `snapnode audit verify` does: on an intact log it
// says the chain holds the recorded seal; a chain cut back, while the
// node runs, to before that seal (entries 4…6, the seal at 4 among them,
// deleted and the head moved back to 3) verifies on its own, and the page
// shows it as tampered, naming the record and entry 4; a record that is
// not one is shown as a record it could not read. Before, the page
// verified the chain without the record and said it was intact.
func TestConsoleAuditPageUsesTheSealRecord(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	k, db := stoppedNode(t, dataDir)
	defer db.Close()
	record := filepath.Join(dataDir, "audit-seal.json")
	l, err := audit.New(ctx, db, audit.Options{Signer: audit.IdentitySigner(k, identity.Mainnet), SealRecord: record})
	if err != nil {
		t.Fatal(err)
	}
	appendN := func(n int) {
		for range n {
			if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(3)
	if _, err := l.Seal(ctx); err != nil { // 4, recorded
		t.Fatal(err)
	}
	appendN(2)
	es, err := l.Query(ctx, audit.Filter{Limit: audit.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()

	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
	})
	defer stop()
	s := consoleLogin(t, n, dataDir)
	// line is the audit page's paragraph of that id, as text.
	line := func(page, id string) string {
		t.Helper()
		m := regexp.MustCompile(`(?s)<p[^>]*id="` + id + `"[^>]*>(.*?)</p>`).FindStringSubmatch(page)
		if m == nil {
			t.Errorf("no %s line on the audit page", id)
			return ""
		}
		return strings.Join(strings.Fields(html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(m[1], ""))), " ")
	}
	auditPage := func() string {
		t.Helper()
		status, page := s.get(t, s.home+"audit")
		if status != http.StatusOK {
			t.Fatalf("audit page: %d\n%s", status, page)
		}
		return page
	}
	page := auditPage()
	if got := line(page, "verify"); !strings.HasPrefix(got, "Intact") {
		t.Errorf("the verification line of an intact log: %q; want intact", got)
	}
	if got := line(page, "record"); !strings.Contains(got, record) || !strings.Contains(got, "entry 4") || !strings.Contains(got, "held by the chain") {
		t.Errorf("the record line of an intact log: %q; want the record (%s) naming entry 4, held by the chain", got, record)
	}

	// While the node runs: the chain cut back to entry 3.
	if len(es) < 6 || es[3].Step != audit.StepSealed {
		t.Fatalf("entries %+v; want 1…3, the seal at 4, 5, 6", es)
	}
	for _, q := range []string{"DELETE FROM audit_log WHERE seq >= 4", "UPDATE audit_head SET last_seq = 3, last_hash = '" + es[2].Hash + "' WHERE id = 1"} {
		if _, err := db.W.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	got := line(auditPage(), "verify")
	for _, want := range []string{"TAMPERED", "entry 4 record", record, es[3].Hash, "the chain ends at entry 3"} {
		if !strings.Contains(got, want) {
			t.Errorf("the verification line of a chain cut back before the recorded seal: %q; want %q", got, want)
		}
	}

	// A record that is not one: not evidence of tampering, said apart
	// with what to do, as audit verify says it; the chain (cut back,
	// which only the record shows) is verified without it, and said to
	// be. Before, the page said TAMPERED for the record alone.
	if err := os.WriteFile(record, []byte("not a record\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	page = auditPage()
	if got := line(page, "verify"); !strings.HasPrefix(got, "Intact") || !strings.Contains(got, "not checked against the record") || strings.Contains(got, "TAMPERED") {
		t.Errorf("the verification line with an unreadable record: %q; want the chain intact, not checked against the record", got)
	}
	got = line(page, "record")
	for _, want := range []string{"Could not read the record of the last seal", record, "not evidence", "permissions", "backup"} {
		if !strings.Contains(got, want) {
			t.Errorf("the record line with an unreadable record: %q; want %q", got, want)
		}
	}
}

// startError starts a node with mutate applied and returns why it did
// not start; it fails the test if the node started.
func startError(t *testing.T, mutate func(*config.Config)) error {
	t.Helper()
	cfg := config.Default()
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
	mutate(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		cancel()
		_ = n.Wait()
		t.Fatal("the node started")
	}
	return err
}

// A record of the last seal the node cannot read (not a record: garbled,
// truncated) stops the start, as before, but as what it is: an error
// that errors.Is audit.ErrSealRecord and not audit.ErrTampered, whose
// advice is to check the file's permissions or restore it from a backup,
// not the advice given for a chain that lacks the recorded seal. Once the
// file is moved aside (it is lost), the node starts. Before, the start's
// error told the operator to treat it as a chain without its seal.
func TestAuditSealRecordUnreadableAtStart(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	mutate := func(cf *config.Config) { cf.DataDir = dataDir }
	appendEntries(t, dataDir, 2)
	_, stop := startNode(t, mutate)
	stop() // seals, and records the seal
	record := filepath.Join(dataDir, "audit-seal.json")
	good, err := os.ReadFile(record)
	if err != nil {
		t.Fatalf("the node's record of its last seal: %v", err)
	}
	if err := os.WriteFile(record, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	err = startError(t, mutate)
	msg := err.Error()
	if !errors.Is(err, audit.ErrSealRecord) || errors.Is(err, audit.ErrTampered) {
		t.Errorf("Start with a truncated record: %v; want audit.ErrSealRecord, not audit.ErrTampered", err)
	}
	for _, want := range []string{record, "cannot be read", "not evidence", "permissions", "backup", "snapnode audit verify"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start with a truncated record: %v; want it to say %q", err, want)
		}
	}
	if strings.Contains(msg, "restored from a copy") {
		t.Errorf("Start with a truncated record: %v; want not the advice of a chain without its seal", err)
	}

	// The record lost: moved aside, the node starts (the chain's last
	// seal holds).
	if err := os.Rename(record, record+".broken"); err != nil {
		t.Fatal(err)
	}
	_, stop = startNode(t, mutate)
	stop()
}

// Without a record of the last seal (none written, or moved aside), a
// chain rewritten below its last seal, every hash after recomputed,
// stops the start as it does with the record (there, as a chain without
// the recorded seal): audit.ErrTampered, naming the seal and `snapnode
// audit verify`, and saying that moving the record does not help. Before,
// the node started on it, and its sealer failed every hour (no seal can
// follow a seal that does not hold). A first start on an empty database,
// which has no seal, starts (every startNode).
func TestAuditLastSealBrokenWithoutRecordAtStart(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	mutate := func(cf *config.Config) { cf.DataDir = dataDir }
	appendEntries(t, dataDir, 2)
	_, stop := startNode(t, mutate)
	stop() // seals the two entries
	db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	es, err := l.Query(ctx, audit.Filter{Limit: audit.MaxQueryLimit})
	if err != nil {
		t.Fatal(err)
	}
	last := es[len(es)-1]
	if last.Step != audit.StepSealed || es[len(es)-2].Step != audit.StepCompleted {
		t.Fatalf("entries %+v; want the two appended, then a seal", es)
	}
	record := filepath.Join(dataDir, "audit-seal.json")
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	// The entry below the seal rewritten, the seal rehashed onto it.
	prev := es[len(es)-3].Hash
	for _, e := range es[len(es)-2:] {
		if e.Step != audit.StepSealed {
			e.Reason = "rewritten"
		}
		e.Prev = prev
		e.Hash = audit.Hash(e)
		if _, err := db.W.ExecContext(ctx, "UPDATE audit_log SET reason = ?, prev = ?, hash = ? WHERE seq = ?", e.Reason, e.Prev, e.Hash, e.Seq); err != nil {
			t.Fatal(err)
		}
		prev = e.Hash
	}
	if _, err := db.W.ExecContext(ctx, "UPDATE audit_head SET last_hash = ? WHERE id = 1", prev); err != nil {
		t.Fatal(err)
	}

	err = startError(t, mutate)
	msg := err.Error()
	if !errors.Is(err, audit.ErrTampered) || errors.Is(err, audit.ErrOtherKey) || errors.Is(err, audit.ErrSealRecord) {
		t.Errorf("Start on a chain rewritten below its last seal: %v; want audit.ErrTampered alone", err)
	}
	for _, want := range []string{fmt.Sprintf("entry %d seal", last.Seq), "the chain's last seal", "snapnode audit verify", "does not help"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Start on a chain rewritten below its last seal: %v; want it to say %q", err, want)
		}
	}
	if _, err := os.Stat(record); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused start wrote a record: %v", err)
	}
}

// stoppedNode makes the data folder dataDir of a node that is not
// running: its key file and its SQLite database, opened; the caller
// closes it before a node starts on the folder.
func stoppedNode(t *testing.T, dataDir string) (*identity.Key, *sqldb.DB) {
	t.Helper()
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(filepath.Join(dataDir, "identity.key"), k); err != nil {
		t.Fatal(err)
	}
	db, err := sqldb.Open(context.Background(), filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return k, db
}

// appendEntries makes the data folder dataDir of a node, with a key
// file and n entries in its audit log.
func appendEntries(t *testing.T, dataDir string, n int) {
	t.Helper()
	ctx := context.Background()
	_, db := stoppedNode(t, dataDir)
	defer db.Close()
	l, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for range n {
		if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
			t.Fatal(err)
		}
	}
}

// A node's first start, on a new audit log, has no record of a last seal
// and needs none: it says so at debug level only, as a first start, where
// an operator's log had an info line a newcomer read as a problem. On a
// log with entries and no record (the record lost, or no seal yet) the
// info line stays.
func TestNoSealRecordAtFirstStart(t *testing.T) {
	start := func(dataDir string) string {
		t.Helper()
		var logs testutil.LockedBuffer
		cfg := config.Default()
		cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
		_, stop := startConfigured(t, cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
		stop()
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "no record of a last seal") {
				return l
			}
		}
		t.Fatalf("no line about the seal record:\n%s", logs.String())
		return ""
	}
	if l := start(filepath.Join(t.TempDir(), "data")); !strings.Contains(l, "level=DEBUG") || !strings.Contains(l, "first start") {
		t.Errorf("first start: %s; want a debug line saying it is a first start", l)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	appendEntries(t, dataDir, 3)
	if l := start(dataDir); !strings.Contains(l, "level=INFO") || strings.Contains(l, "first start") {
		t.Errorf("a log with entries: %s; want the info line", l)
	}
}

// Entries after the last seal deleted while the node was stopped, the
// head record left as it was: the start refuses, naming the cut, where
// it started and appended after the gap (every later verification then
// failed at the first missing entry, and no seal could follow).
func TestAuditTailCutAtStart(t *testing.T) {
	ctx := context.Background()
	dataDir := filepath.Join(t.TempDir(), "data")
	mutate := func(cf *config.Config) { cf.DataDir = dataDir }
	appendEntries(t, dataDir, 2)
	_, stop := startNode(t, mutate)
	stop() // seals the two entries
	// Three unsealed entries, the last two deleted, the head left.
	db, err := sqldb.Open(ctx, filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var kept audit.Entry
	for i := range 3 {
		e, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			kept = e
		}
	}
	if _, err := db.W.ExecContext(ctx, "DELETE FROM audit_log WHERE seq > ?", kept.Seq); err != nil {
		t.Fatal(err)
	}
	l.Close()
	db.Close()
	first := kept.Seq + 1

	err = startError(t, mutate)
	if !errors.Is(err, audit.ErrTampered) {
		t.Fatalf("Start on a log whose tail was cut: %v; want audit.ErrTampered", err)
	}
	for _, want := range []string{fmt.Sprintf("entry %d truncated", first), "does not end where its head record says", "snapnode audit verify"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start on a log whose tail was cut: %v; want it to say %q", err, want)
		}
	}
}
