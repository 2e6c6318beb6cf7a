package sandbox

import (
	"context"
	"testing"
)

// BenchmarkShareChange measures what a promotion adds to keep the count
// shared with the other processes opening the folder: one read of
// CountFile and one write of it (a new file renamed over it), under the
// folder lock the promotion holds.
func BenchmarkShareChange(b *testing.B) {
	s, err := Open(b.TempDir(), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.writeCount(countRecord{Known: true, ID: newCountID()}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s.shareChange(Counts{Bytes: 64, Files: 1}, Counts{Bytes: 64, Files: 1})
	}
	if c, ok := s.sharedCounts(false); !ok || c.Files != int64(b.N) {
		b.Fatalf("shared count %+v (%v) after %d changes", c, ok, b.N)
	}
}

// BenchmarkPromotionCount measures what a growing promotion spends on the
// shared count: the locks taken (exclusive), the room checked under them
// (counts, locked), and the change recorded (shareChange).
func BenchmarkPromotionCount(b *testing.B) {
	s, err := Open(b.TempDir(), Limits{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Recount(ctx); err != nil {
		b.Fatal(err)
	}
	if !s.core.shared.Load() {
		b.Skip("no folder lock here: nothing is shared")
	}
	for b.Loop() {
		ctx, done, err := s.exclusive(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.counts(ctx, true); err != nil {
			b.Fatal(err)
		}
		s.shareChange(Counts{Bytes: 64, Files: 1}, Counts{Bytes: 64, Files: 1})
		done()
	}
	if c, ok := s.sharedCounts(false); !ok || c.Files != int64(b.N) {
		b.Fatalf("shared count %+v (%v) after %d changes", c, ok, b.N)
	}
}
