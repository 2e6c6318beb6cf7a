package audit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
)

// crashEnv makes the test binary the appender of TestCrashSIGKILL: it
// holds the DSN to append to.
const crashEnv = "SNAPNODE_AUDIT_CRASH_WRITER"

// TestCrashWriter is the child process of TestCrashSIGKILL; it skips
// unless started by it. Eight workers append entries and print
// "ack SEQ HASH" once each Append has returned, until the process is
// killed.
func TestCrashWriter(t *testing.T) {
	dsn := os.Getenv(crashEnv)
	if dsn == "" {
		t.Skip("the writer process of TestCrashSIGKILL")
	}
	ctx := context.Background()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(3)
	}
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		fail(err)
	}
	l, err := New(ctx, db, Options{})
	if err != nil {
		fail(err)
	}
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				e := sample(i)
				e.Actor = fmt.Sprintf("writer-%d", w)
				got, err := l.Append(ctx, e)
				if err != nil {
					fail(err)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %s\n", got.Seq, got.Hash) // unbuffered: one write each
				out.Unlock()
			}
		})
	}
	wg.Wait() // never: the parent kills the process
}

// TestCrashSIGKILL kills an appending process with SIGKILL and checks,
// after reopening the database it never closed, that every entry it saw
// appended is there with its hash and that the chain verifies and goes on.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a writer process")
	}
	testdb.Each(t, func(t *testing.T, dsn string) {
		child := testutil.StartChild(t, "TestCrashWriter", crashEnv+"="+dsn)
		const killAfter = 600
		acked := map[int64]string{}
		sc := bufio.NewScanner(child.Lines)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 3 || f[0] != "ack" {
				continue
			}
			seq, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("writer said %q", sc.Text())
			}
			acked[seq] = f[2]
			if len(acked) == killAfter {
				child.Kill(t)
			}
		}
		child.WaitKilled(t)
		if len(acked) < killAfter {
			t.Fatalf("writer acknowledged %d appends", len(acked))
		}

		ctx := context.Background()
		l := openLog(t, openDB(t, dsn), Options{})
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatalf("Verify after the crash: %v", err)
		}
		for seq, hash := range acked {
			got, err := l.Query(ctx, Filter{AfterSeq: seq - 1, Limit: 1})
			if err != nil || len(got) != 1 || got[0].Seq != seq || got[0].Hash != hash {
				t.Errorf("entry %d (acknowledged, hash %s) lost: %+v, %v", seq, hash, got, err)
			}
		}
		t.Logf("writer killed after %d acknowledged appends; %d entries stored", len(acked), rep.Entries)
		if e, err := l.Append(ctx, sample(0)); err != nil || e.Seq != rep.Last+1 {
			t.Fatalf("Append after the crash: seq %d, %v", e.Seq, err)
		}
		if _, err := l.Verify(ctx); err != nil {
			t.Fatal(err)
		}
	})
}
