package sandbox

import "testing"

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
	if c, ok := s.sharedCounts(); !ok || c.Files != int64(b.N) {
		b.Fatalf("shared count %+v (%v) after %d changes", c, ok, b.N)
	}
}
