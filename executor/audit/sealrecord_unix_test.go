//go:build unix

package audit

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A FIFO in the record's place is refused at once, not waited on (an
// open of a FIFO waits for a writer, and the node reads the record as it
// starts).
func TestSealRecordFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "audit-seal.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := ReadSealRecord(fifo); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrSealRecord) {
			t.Errorf("a FIFO read as a record: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadSealRecord waits on a FIFO")
	}
}
