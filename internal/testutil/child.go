package testutil

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Child is the test binary started again to run one of its tests as a
// child process. The child test learns its part from the environment the
// parent gives it (and skips when the variable is absent, so that the
// ordinary run of the package passes over it); it reports to the parent
// in lines on its standard output, one write each.
type Child struct {
	Cmd *exec.Cmd
	// Lines reads the child's standard output.
	Lines  *bufio.Reader
	stderr bytes.Buffer // read only once the process ended
}

// ChildTimeout bounds a child's life: then it stops itself (the test
// binary's -test.timeout), which fails WaitKilled.
const ChildTimeout = 2 * time.Minute

// StartChild starts the test binary running only the test named test
// (its whole name: `^test$`), with env added to the environment. The
// child is killed at the end of the test, and its standard error logged
// if the test failed.
func StartChild(tb testing.TB, test string, env ...string) *Child {
	tb.Helper()
	c := &Child{Cmd: exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout="+ChildTimeout.String())}
	c.Cmd.Env = append(os.Environ(), env...)
	c.Cmd.Stderr = &c.stderr
	out, err := c.Cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := c.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c.Lines = bufio.NewReader(out)
	tb.Cleanup(func() {
		c.kill()
		if tb.Failed() && c.stderr.Len() > 0 {
			tb.Logf("%s's standard error:\n%s", test, c.stderr.String())
		}
	})
	return c
}

// Kill sends SIGKILL without waiting: the parent may read what the child
// wrote before it died until Lines ends, then call WaitKilled.
func (c *Child) Kill(tb testing.TB) {
	tb.Helper()
	if err := c.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		tb.Fatalf("SIGKILL: %v", err)
	}
}

// WaitKilled waits for the child and fails the test unless SIGKILL ended
// it (a child that failed or exited is no crash), naming what did.
func (c *Child) WaitKilled(tb testing.TB) {
	tb.Helper()
	err := c.Cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		tb.Fatalf("the child ended with %v, not SIGKILL; its standard error:\n%s", err, c.stderr.String())
	}
}

// kill ends the child if it still runs.
func (c *Child) kill() {
	if c.Cmd.ProcessState == nil {
		c.Cmd.Process.Signal(syscall.SIGKILL)
		c.Cmd.Wait()
	}
}
