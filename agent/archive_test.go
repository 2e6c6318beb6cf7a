package agent

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// heldJob creates the running job "arch", held by "me", and writes its
// interactions 0 to n-1 (storeInteraction, "text SEQ"), calling after,
// when not nil, after each.
func heldJob(t *testing.T, ctx context.Context, s *Store, n int, after func(seq int)) *Job {
	t.Helper()
	j := storeJob("arch", Running, storeT0)
	j.LeaseHolder = "me"
	mustCreate(t, ctx, s, j)
	if _, err := s.Claim(ctx, "arch", "me", storeT0, at(1e12)); err != nil {
		t.Fatal(err)
	}
	for seq := range n {
		j.NextSeq = seq + 1
		if err := s.Write(ctx, Save{Job: j, Interaction: storeInteraction(seq, fmt.Sprintf("text %d", seq)), Holder: "me"}); err != nil {
			t.Fatal(err)
		}
		if after != nil {
			after(seq)
		}
	}
	return j
}

// The store's archives: what Archive moves reads back in place, under the
// lease holder only, sealed segments only with their key, and the chain
// catches segments swapped.
func TestStoreArchive(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		heldJob(t, ctx, s, 6, nil)
		want, err := s.Interactions(ctx, "arch")
		if err != nil {
			t.Fatal(err)
		}
		// Not the holder: nothing moves.
		if _, err := s.Archive(ctx, "arch", "other", 3, false); !errors.Is(err, ErrLeaseLost) {
			t.Fatalf("Archive by another holder: %v", err)
		}
		if n, _ := s.Segments(ctx, "arch"); n != 0 {
			t.Fatalf("%d segments after a refused archive", n)
		}
		// Sealing needs a key.
		if _, err := s.Archive(ctx, "arch", "me", 3, true); !errors.Is(err, ErrArchiveSealed) {
			t.Fatalf("Archive sealed without a key: %v", err)
		}
		before := mustGet(t, ctx, s, "arch").HistoryBytes
		removed, err := s.Archive(ctx, "arch", "me", 2, false)
		if err != nil || removed <= 0 {
			t.Fatalf("Archive = %d, %v", removed, err)
		}
		if got := mustGet(t, ctx, s, "arch").HistoryBytes; got != before-removed {
			t.Fatalf("history bytes %d, want %d", got, before-removed)
		}
		key := bytes.Repeat([]byte{1}, HistoryKeySize)
		sealer, err := NewSealer(key)
		if err != nil {
			t.Fatal(err)
		}
		s.UseKey(sealer)
		if _, err := s.Archive(ctx, "arch", "me", 5, true); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.Segments(ctx, "arch"); n != 2 {
			t.Fatalf("%d segments", n)
		}
		if again, err := s.Archive(ctx, "arch", "me", 5, true); err != nil || again != 0 {
			t.Fatalf("archiving nothing: %d, %v", again, err)
		}
		got, err := s.Interactions(ctx, "arch")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Interactions after archiving: %v\n got  %+v\n want %+v", err, got, want)
		}
		// Another key does not open the sealed segment.
		other, _ := NewSealer(bytes.Repeat([]byte{2}, HistoryKeySize))
		s.UseKey(other)
		if _, err := s.Interactions(ctx, "arch"); !errors.Is(err, ErrArchiveSealed) {
			t.Fatalf("another key: %v", err)
		}
		s.UseKey(sealer)
		// The two segments swapped: the chain breaks.
		if _, err := s.db.W.ExecContext(ctx, s.d.Rebind(`UPDATE agent_history_segments SET idx = 1 - idx + 10 WHERE task_id = ?`), "arch"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.W.ExecContext(ctx, s.d.Rebind(`UPDATE agent_history_segments SET idx = idx - 10 WHERE task_id = ?`), "arch"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Interactions(ctx, "arch"); !errors.Is(err, ErrArchiveTampered) {
			t.Fatalf("swapped segments: %v", err)
		}
	})
}

// The newest segment deleted (interactions 2 to 4 of 0 to 5): the chain
// of the segments left holds, and only the gap to the live interactions
// tells. Before, the history read without them, as 0, 1, 5.
func TestStoreArchiveNewestSegmentDeleted(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		heldJob(t, ctx, s, 6, nil)
		for _, before := range []int{2, 5} {
			if _, err := s.Archive(ctx, "arch", "me", before, false); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Interactions(ctx, "arch"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.W.ExecContext(ctx, s.d.Rebind(`DELETE FROM agent_history_segments WHERE task_id = ? AND idx = 1`), "arch"); err != nil {
			t.Fatal(err)
		}
		if its, err := s.Interactions(ctx, "arch"); !errors.Is(err, ErrArchiveTampered) {
			t.Fatalf("newest segment deleted: %d interactions, %v; want ErrArchiveTampered", len(its), err)
		}
		if _, err := s.RawInteractions(ctx, "arch"); !errors.Is(err, ErrArchiveTampered) {
			t.Fatalf("newest segment deleted, raw: %v; want ErrArchiveTampered", err)
		}
		// Every segment deleted: the live history starts at 5.
		if _, err := s.db.W.ExecContext(ctx, s.d.Rebind(`DELETE FROM agent_history_segments WHERE task_id = ?`), "arch"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Interactions(ctx, "arch"); !errors.Is(err, ErrArchiveTampered) {
			t.Fatalf("every segment deleted: %v; want ErrArchiveTampered", err)
		}
	})
}

// FuzzSegmentLines: a segment body, whatever its bytes, is read without a
// panic, and a gzip of lines reads back as those lines.
func FuzzSegmentLines(f *testing.F) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write([]byte(s))
		w.Close()
		return b.Bytes()
	}
	f.Add(gz("{\"sequence\":0}\n{\"sequence\":1}\n"))
	f.Add(gz(""))
	f.Add([]byte("not gzip"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var lines [][]byte
		n, err := eachLine(body, func(b []byte) error { lines = append(lines, bytes.Clone(b)); return nil })
		if err == nil && n != int64(len(lines)) {
			t.Fatalf("%d lines counted, %d seen", n, len(lines))
		}
		if err != nil {
			return
		}
		// What was read, gzipped again, reads the same.
		var again [][]byte
		if _, err := eachLine(gz(string(bytes.Join(lines, []byte("\n")))+"\n"), func(b []byte) error { again = append(again, bytes.Clone(b)); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(lines) > 0 && !reflect.DeepEqual(lines, again) {
			t.Fatalf("lines %q, again %q", lines, again)
		}
	})
}
