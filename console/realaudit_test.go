package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// realAudit is fakeSource whose audit entries come from a real audit log
// (SQLite), counting the entries its reads return.
type realAudit struct {
	fakeSource
	log  *audit.Log
	read *atomic.Int64
}

func (s realAudit) Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error) {
	es, err := s.log.Query(ctx, f)
	s.read.Add(int64(len(es)))
	return es, err
}

func (s realAudit) VerifyAudit(ctx context.Context) (audit.Report, error) {
	return s.log.Verify(ctx)
}

func (s realAudit) AuditCount(ctx context.Context, f audit.Filter) (int64, error) {
	return s.log.Count(ctx, f)
}

// A task page with a trail of thousands of entries shows the newest
// MaxAuditEntries and counts the earlier ones, reading the shown entries
// only: before, it read the whole trail, MaxQueryLimit at a time, on every
// view.
func TestTaskPageAuditTrailReadsNewestOnly(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	l, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	// 4,000 entries, three in four of task t1 (3,001), the others of
	// another task; t1's last is act-1's hold.
	var last, t1 int64
	for b := range 4 {
		batch := make([]audit.Entry, audit.MaxBatch)
		for i := range batch {
			task := "t1"
			if i%4 == 3 {
				task = "t2"
			}
			batch[i] = audit.Entry{Actor: "bc1palice", Task: task, Action: fmt.Sprintf("early-%d-%d", b, i/5), Step: audit.StepReceived}
		}
		if b == 3 {
			batch[len(batch)-1] = audit.Entry{Actor: "bc1palice", Task: "t1", Action: "act-1", Step: audit.StepHeld}
		}
		out, err := l.AppendBatch(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		last = out[len(out)-1].Seq
		for _, e := range out {
			if e.Task == "t1" {
				t1++
			}
		}
	}
	read := new(atomic.Int64)
	body := taskPage(t, realAudit{fakeSource{}, l, read})
	seqs := regexp.MustCompile(`<td>(\d+)</td>`).FindAllStringSubmatch(body, -1)
	if len(seqs) < console.MaxAuditEntries {
		t.Fatalf("%d audit rows on the page, want %d", len(seqs), console.MaxAuditEntries)
	}
	if got := seqs[len(seqs)-1][1]; got != fmt.Sprint(last) {
		t.Errorf("the trail ends at seq %s, want %d (the hold)", got, last)
	}
	if want := fmt.Sprintf("%d earlier entries are not shown", t1-console.MaxAuditEntries); !strings.Contains(body, want) {
		t.Errorf("want the note %q", want)
	}
	// The trail's newest 200 and act-1's own entries (one).
	if n := read.Load(); n > console.MaxAuditEntries+1 {
		t.Errorf("the page read %d audit entries to show %d", n, console.MaxAuditEntries)
	}
}

// sealRE is the audit page's line about the seals.
var sealRE = regexp.MustCompile(`(?s)<p[^>]*id="seal"[^>]*>(.*?)</p>`)

// The audit page shows the log's last seal (its entry, time and signer,
// valid or not) and the entries after it, unsealed, as audit verify
// does (audit.SealStatusOf): a log without a seal, a sealed one, and one
// whose seal another key signed (the node's key changed), shown not
// valid, naming both keys. Before, the page said nothing of seals.
func TestAuditPageShowsTheLastSeal(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	signer := func(b string) audit.Signer {
		k, err := identity.FromHex(strings.Repeat(b, 32))
		if err != nil {
			t.Fatal(err)
		}
		return audit.IdentitySigner(k, identity.Mainnet)
	}
	old, now := signer("11"), signer("22")
	sealedAt := time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC)
	l, err := audit.New(ctx, db, audit.Options{Signer: old, Now: func() time.Time { return sealedAt }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	appendN := func(n int) {
		for range n {
			if _, err := l.Append(ctx, audit.Entry{Actor: "host", Step: audit.StepCompleted, Decision: "done"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	page := func(l *audit.Log) string {
		t.Helper()
		r := newRig(t, func(c *console.Config) { c.Source = realAudit{fakeSource{}, l, new(atomic.Int64)} })
		ck := r.login(t)
		w := r.do("GET", at(ck, "audit"), nil, ck, nil)
		m := sealRE.FindStringSubmatch(w.Body.String())
		if w.Code != http.StatusOK || m == nil {
			t.Fatalf("audit page: %d, no seal line in\n%s", w.Code, w.Body)
		}
		return strings.Join(strings.Fields(m[1]), " ")
	}

	appendN(3)
	if got := page(l); !strings.Contains(got, "No seal") || !strings.Contains(got, "3 entries") {
		t.Errorf("the seal line of a log never sealed: %q; want no seal, 3 entries unsealed", got)
	}

	if _, err := l.Seal(ctx); err != nil { // entry 4
		t.Fatal(err)
	}
	appendN(2)
	got := page(l)
	for _, want := range []string{"entry 4", "2026-05-01 13:00:00Z", old.Address(), "valid", "2 entries after it"} {
		if !strings.Contains(got, want) {
			t.Errorf("the seal line: %q; want %q", got, want)
		}
	}
	if strings.Contains(got, "not valid") {
		t.Errorf("the seal line: %q; want it valid", got)
	}

	// The node's key changed: the same log, verified against another.
	renewed, err := audit.New(ctx, db, audit.Options{Signer: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = renewed.Close() })
	got = page(renewed)
	for _, want := range []string{"entry 4", "2026-05-01 13:00:00Z", old.Address(), now.Address(), "not valid", "another key", "2 entries after it"} {
		if !strings.Contains(got, want) {
			t.Errorf("the seal line under another key: %q; want %q", got, want)
		}
	}
}
