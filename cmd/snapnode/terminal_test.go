package main

import (
	"os"
	"runtime"
	"testing"
)

// Output sent to /dev/null, a character device but no terminal, is not a
// reader's: send and stream print no summary to stderr for it, and held
// the tab-separated lines a script reads. A pseudo-terminal is one.
func TestIsTerminalNotDevNull(t *testing.T) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if isTerminal(null) {
		t.Errorf("%s is taken for a terminal", os.DevNull)
	}
	if runtime.GOOS != "linux" {
		return
	}
	pt, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to check against: %v", err)
	}
	defer pt.Close()
	if !isTerminal(pt) {
		t.Error("a pseudo-terminal is not taken for a terminal")
	}
}
