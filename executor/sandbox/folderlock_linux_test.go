package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLockFileOpenForWriting: the folder lock's file is open for writing.
// NFS emulates flock with POSIX locks, and an exclusive one on a file
// open only for reading fails with EBADF, which tryLockFolder takes for a
// file system without locks: on the shared storage the operator's guide
// names (NFS), two replicas' promotions would not be serialized at all.
func TestLockFileOpenForWriting(t *testing.T) {
	if !folderLocks {
		t.Skip("no folder lock on this platform")
	}
	s, err := Open(t.TempDir(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.openLock()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "flags:"); ok {
			flags, err := strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			if err != nil {
				t.Fatal(err)
			}
			if flags&syscall.O_ACCMODE != syscall.O_RDWR {
				t.Fatalf("lock file open with flags %o: want it open for writing (O_RDWR), as NFS's flock needs", flags)
			}
			return
		}
	}
	t.Fatalf("no flags in fdinfo: %s", b)
}
