package admin_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
)

// A failed accept that passes (the process out of file descriptors for a
// moment: EMFILE) does not end the socket for the rest of the node's
// life: once descriptors are free again, the operator's commands are
// answered, as net/http's server retries such errors.
func TestAdminSocketOutlivesEMFILE(t *testing.T) {
	dir := private(t)
	path := filepath.Join(dir, admin.SocketName)
	srv, err := admin.Listen(path, &handler{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-served })
	call := func() error {
		cctx, ccancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer ccancel()
		_, err := admin.Call(cctx, path, admin.Request{Op: "console-url"})
		return err
	}
	if err := call(); err != nil {
		t.Fatalf("before: %v", err)
	}

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	low := lim
	low.Cur = uint64(len(fds) + 16)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	var filler []*os.File
	release := func() {
		for _, f := range filler {
			f.Close()
		}
		filler = nil
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatal(err)
			}
			break
		}
		filler = append(filler, f)
	}
	// One descriptor for the client: the server's accept finds none.
	filler[len(filler)-1].Close()
	filler = filler[:len(filler)-1]
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	time.Sleep(200 * time.Millisecond) // the server tries to accept
	c.Close()
	release()

	select {
	case err := <-served:
		served <- err // for the cleanup
		t.Fatalf("Serve returned after one EMFILE: %v; the admin socket is gone until a restart", err)
	default:
	}
	if err := call(); err != nil {
		t.Fatalf("after the descriptors were freed: %v", err)
	}
}
