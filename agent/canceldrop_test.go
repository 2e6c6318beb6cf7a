package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A record to cancel that the store drops, the job's oldest past
// MaxCancelsPerJob or one still pending when the job is forgotten, is
// work elsewhere the node will not cancel: the store warns of it, naming
// the job and how many, where before it dropped them without a word.
// Only a write that commits warns: one of another holder gives nothing
// up, and says nothing.
func TestDroppedCancelsAreLogged(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		var logged syncBuffer
		s.SetLogger(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn})))
		mustCreate(t, ctx, s, storeJob("j", Pending, storeT0))
		if ok, err := s.Claim(ctx, "j", "h1", at(0), at(time.Hour)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		for i := range MaxCancelsPerJob {
			if err := s.KeepSentCanceling(ctx, "j", "h1", []byte(fmt.Sprint("next ", i)), []byte(fmt.Sprint("work ", i))); err != nil {
				t.Fatal(err)
			}
		}
		if logged.String() != "" {
			t.Fatalf("logged within the bound: %s", logged.String())
		}
		_ = s.KeepSentCanceling(ctx, "j", "h2", []byte("not h2's"), []byte("h2's work"))
		if logged.String() != "" {
			t.Fatalf("logged for a write that gave nothing up: %s", logged.String())
		}
		if err := s.KeepSentCanceling(ctx, "j", "h1", []byte("next"), []byte("work past the bound")); err != nil {
			t.Fatal(err)
		}
		if l := logged.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "task=j") || !strings.Contains(l, "dropped=1") {
			t.Errorf("past the bound, logged %q; want a warning naming the job and dropped=1", l)
		}
		// Past the bound in the write that ends the job.
		j := mustGet(t, ctx, s, "j")
		j.Status = Canceled
		before := strings.Count(logged.String(), "\n")
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(logged.String(), "\n"); n != before+1 {
			t.Errorf("the end's write past the bound logged %d lines; want 1: %s", n-before, logged.String())
		}
		before = strings.Count(logged.String(), "\n")
		if ok, err := s.Forget(ctx, "j"); err != nil || !ok {
			t.Fatalf("Forget = %v, %v", ok, err)
		}
		l := logged.String()
		if n := strings.Count(l, "\n"); n != before+1 || !strings.Contains(l[strings.LastIndex(l[:len(l)-1], "\n")+1:], fmt.Sprint("dropped=", MaxCancelsPerJob)) {
			t.Errorf("Forget of a job with %d records to cancel logged %q; want one warning, dropped=%d", MaxCancelsPerJob, l, MaxCancelsPerJob)
		}
	})
}

// The records to cancel the store drops past MaxCancelsPerJob are counted
// in the job's history (cancels_dropped), which explains the job without
// its node's log: work elsewhere (a delegate's task) that the node will
// not cancel. Before, only the log said so.
func TestDroppedCancelsInHistory(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		mustCreate(t, ctx, s, storeJob("j", Pending, storeT0))
		if ok, err := s.Claim(ctx, "j", "h1", at(0), at(time.Hour)); err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		dropped := func() int64 {
			t.Helper()
			h, err := s.History(ctx, "j")
			if err != nil {
				t.Fatal(err)
			}
			return h.CancelsDropped
		}
		for i := range MaxCancelsPerJob {
			if err := s.KeepSentCanceling(ctx, "j", "h1", []byte(fmt.Sprint("next ", i)), []byte(fmt.Sprint("work ", i))); err != nil {
				t.Fatal(err)
			}
		}
		if n := dropped(); n != 0 {
			t.Fatalf("within the bound, cancels_dropped = %d; want 0", n)
		}
		_ = s.KeepSentCanceling(ctx, "j", "h2", []byte("not h2's"), []byte("h2's work"))
		if err := s.KeepSentCanceling(ctx, "j", "h1", []byte("next"), []byte("work past the bound")); err != nil {
			t.Fatal(err)
		}
		if n := dropped(); n != 1 {
			t.Errorf("past the bound, cancels_dropped = %d; want 1", n)
		}
		j := mustGet(t, ctx, s, "j")
		j.Status = Canceled
		if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
			t.Fatal(err)
		}
		if n := dropped(); n != 2 {
			t.Errorf("after the end's write past the bound, cancels_dropped = %d; want 2", n)
		}
	})
}
