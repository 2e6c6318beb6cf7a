package loadgen

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (snap (node) x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
	got, err := parseStatCPU(stat)
	if err != nil || got != 3250*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v; want 3.25s (250+75 ticks)", got, err)
	}
	for _, bad := range []string{"4242 snapnode S 1", "4242 (snapnode) S 1 2 3", "4242 (x) S 1 1 1 0 -1 1 1 0 0 0 abc 75"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tsnapnode\nVmPeak:\t  900000 kB\nVmHWM:\t   53248 kB\nVmRSS:\t   40960 kB\nThreads:\t12\n"
	rss, peak, err := parseStatusMemory(status)
	if err != nil || rss != 40<<20 || peak != 52<<20 {
		t.Fatalf("parseStatusMemory = %d, %d, %v; want 40 MiB, 52 MiB", rss, peak, err)
	}
	if _, _, err := parseStatusMemory("Name:\tx\nVmRSS:\t1 kB\n"); err == nil {
		t.Error("no VmHWM: no error")
	}
}

func TestReadProcSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	st, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS <= 0 || st.PeakRSS < st.RSS {
		t.Errorf("RSS %d, peak %d", st.RSS, st.PeakRSS)
	}
	if _, err := ReadProc(-1); err == nil {
		t.Error("ReadProc(-1): no error")
	}
}

// TestSocketPID checks that the pid of the process serving a Unix socket
// is found from it: here the test's own.
func TestSocketPID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peer credentials are read on Linux")
	}
	path := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	pid, err := SocketPID(context.Background(), path)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("SocketPID = %d, %v; want %d", pid, err, os.Getpid())
	}
	if _, err := SocketPID(context.Background(), filepath.Join(t.TempDir(), "none.sock")); err == nil {
		t.Error("SocketPID of no socket: no error")
	}
}
