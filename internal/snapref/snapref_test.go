package snapref

import "testing"

// TestDirFromEnv checks that SNAPNODE_SNAP_REFERENCE, when set, names the
// folder Dir returns.
func TestDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvDir, dir)
	if got := Dir(t); got != dir {
		t.Fatalf("Dir = %q, want %q", got, dir)
	}
}
