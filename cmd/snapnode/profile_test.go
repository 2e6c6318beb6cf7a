package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// TestRunMemProfile checks that `snapnode run --memprofile FILE` writes a
// heap profile when it is interrupted: a gzipped pprof profile whose
// samples include the memory in use.
func TestRunMemProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node")
	}
	path := filepath.Join(t.TempDir(), "heap.pprof")
	d := testutil.StartDaemon(t, testutil.DaemonOptions{Args: []string{"--memprofile", path}})
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the profile is written before the node is told to stop")
	}
	if err := d.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := d.Cmd.Wait(); err != nil {
		t.Fatalf("snapnode run: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no heap profile: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	// The profile's string table names its sample types.
	if !bytes.Contains(raw, []byte("inuse_space")) {
		t.Errorf("heap profile of %d bytes has no inuse_space samples", len(raw))
	}
}
