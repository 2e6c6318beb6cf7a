//go:build unix

package config

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO named as the model server's API key file is refused at once, as
// a directory is, not waited on for a writer.
func TestSecretFileFIFORefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "api.key")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() { _, err := readSecretFile("agent.llm_api_key_file", "an API key", fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "want a regular file") {
			t.Errorf("a FIFO as a key file: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO as a key file waits for a writer")
	}
}
