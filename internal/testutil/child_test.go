package testutil_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

const childEnv = "SNAPNODE_TESTUTIL_CHILD"

// TestChildBody is the child of the tests below: it prints a line, then
// waits to be killed or, told so, exits by itself.
func TestChildBody(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("the child process of TestChild")
	case "exit":
		fmt.Println("up")
		os.Exit(0)
	default:
		fmt.Println("up")
		select {} // until SIGKILL
	}
}

// A child runs the one test named, reports in lines, and dies of the
// SIGKILL it is sent.
func TestChild(t *testing.T) {
	c := testutil.StartChild(t, "TestChildBody", childEnv+"=wait")
	if line, err := c.Lines.ReadString('\n'); err != nil || line != "up\n" {
		t.Fatalf("the child said %q, %v", line, err)
	}
	c.Kill(t)
	c.WaitKilled(t)
}

// WaitKilled fails a test whose child ended by itself: that is no crash.
func TestChildExited(t *testing.T) {
	c := testutil.StartChild(t, "TestChildBody", childEnv+"=exit")
	if line, _ := c.Lines.ReadString('\n'); line != "up\n" {
		t.Fatalf("the child said %q", line)
	}
	failed := make(chan bool, 1)
	fake := &fatalRecorder{TB: t, failed: failed}
	func() {
		defer func() { recover() }()
		c.WaitKilled(fake)
	}()
	if len(failed) != 1 {
		t.Fatal("WaitKilled passed a child that exited with status 0")
	}
}

// fatalRecorder is a testing.TB whose Fatalf records the failure and
// stops the calling function, without failing the test.
type fatalRecorder struct {
	testing.TB
	failed chan bool
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.failed <- true
	panic(fmt.Sprintf(format, args...))
}
