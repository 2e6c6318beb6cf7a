package testutil

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
)

// binary is the snapnode binary built for this test binary by Main's
// first Binary call, and the folder Main removes at the end.
var binary struct {
	sync.Mutex
	main bool   // Main runs the tests: a build may be shared
	dir  string // where the shared build is, once made
	path string
	err  error
}

// Main runs the tests of m and returns their exit code, having removed the
// snapnode binary Binary built for them. Call it from TestMain so that the
// binary is built once per test binary; without it each test builds its
// own.
func Main(m *testing.M) int {
	binary.Lock()
	binary.main = true
	binary.Unlock()
	code := m.Run()
	binary.Lock()
	defer binary.Unlock()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	return code
}

// Binary returns the path of the snapnode command built from this
// module: built at the first call and shared by every later one when the
// tests run under Main, built into the test's temporary folder otherwise.
func Binary(tb testing.TB) string {
	tb.Helper()
	binary.Lock()
	defer binary.Unlock()
	if !binary.main {
		return build(tb, tb.TempDir())
	}
	if binary.path == "" && binary.err == nil {
		binary.dir, binary.err = os.MkdirTemp("", "snapnode-test-bin-")
		if binary.err == nil {
			binary.path = filepath.Join(binary.dir, "snapnode")
			if out, err := exec.Command("go", buildArgs(binary.path)...).CombinedOutput(); err != nil {
				binary.err = errors.Join(err, errors.New(string(out)))
			}
		}
	}
	if binary.err != nil {
		tb.Fatalf("build snapnode: %v", binary.err)
	}
	return binary.path
}

func build(tb testing.TB, dir string) string {
	tb.Helper()
	bin := filepath.Join(dir, "snapnode")
	if out, err := exec.Command("go", buildArgs(bin)...).CombinedOutput(); err != nil {
		tb.Fatalf("build snapnode: %v\n%s", err, out)
	}
	return bin
}

// buildArgs are go's arguments to build the snapnode command into out,
// with the secp256k1 implementation of the test binary: a test built with
// -tags libsecp256k1 runs a node built with it.
func buildArgs(out string) []string {
	args := []string{"build", "-o", out}
	if secp.Implementation == "libsecp256k1" {
		args = append(args, "-tags", "libsecp256k1")
	}
	return append(args, "github.com/snapnode/snapnode/cmd/snapnode")
}

// DaemonOptions says how to start `snapnode run`.
type DaemonOptions struct {
	// DataDir is the node's data folder; "" for a new temporary one.
	DataDir string
	// Args are further arguments of `snapnode run` (after --data-dir,
	// --relay-listen 127.0.0.1:0 and --log-level warn, which they may
	// override).
	Args []string
	// Env is added to the test's environment.
	Env []string
	// Stderr receives the node's log; nil for os.Stderr.
	Stderr io.Writer
	// Via runs the command through another (such as prlimit and its
	// options) when not empty.
	Via []string
}

// Daemon is `snapnode run` in a child process.
type Daemon struct {
	Cmd *exec.Cmd
	// From the ready line: the node's SNAP address, its Nostr public key,
	// its embedded relay's URL, and its /snap endpoint ("" when HTTP is off).
	Address, NostrPub, RelayURL, HTTPURL string
	// DataDir is the node's data folder.
	DataDir string

	opts DaemonOptions
}

var readyLine = regexp.MustCompile(`^snapnode ready address=(\S+) nostr=(\S+) relay=(\S+)(?: http=(\S+))?`)

// StartDaemon starts `snapnode run` with opts and returns once it printed
// its ready line. It is interrupted (SIGINT) and waited for at the end of
// the test unless it was killed before.
func StartDaemon(tb testing.TB, opts DaemonOptions) *Daemon {
	tb.Helper()
	if opts.DataDir == "" {
		opts.DataDir = filepath.Join(tb.TempDir(), "data")
	}
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	args := append([]string{"run", "--data-dir", opts.DataDir, "--relay-listen", "127.0.0.1:0", "--log-level", "warn"}, opts.Args...)
	argv := append(append(slices.Clone(opts.Via), Binary(tb)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), opts.Env...)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	d := &Daemon{Cmd: cmd, DataDir: opts.DataDir, opts: opts}
	tb.Cleanup(func() { d.stop(os.Interrupt) })
	lines := bufio.NewReader(stdout)
	line, err := lines.ReadString('\n')
	if err != nil {
		d.stop(syscall.SIGKILL)
		tb.Fatalf("snapnode run: no ready line: %v", err)
	}
	m := readyLine.FindStringSubmatch(line)
	if m == nil {
		d.stop(syscall.SIGKILL)
		tb.Fatalf("snapnode run: ready line %q", line)
	}
	d.Address, d.NostrPub, d.RelayURL, d.HTTPURL = m[1], m[2], m[3], m[4]
	go io.Copy(io.Discard, lines) // until the process ends
	return d
}

// stop signals the process unless it has ended, and waits for it.
func (d *Daemon) stop(sig os.Signal) {
	if d.Cmd.ProcessState != nil {
		return
	}
	d.Cmd.Process.Signal(sig)
	d.Cmd.Wait()
}

// Kill sends SIGKILL and waits for the process to end.
func (d *Daemon) Kill(tb testing.TB) {
	tb.Helper()
	if d.Cmd.ProcessState != nil {
		tb.Fatalf("snapnode run ended before it was killed: %v", d.Cmd.ProcessState)
	}
	d.stop(syscall.SIGKILL)
}

// Restart starts the node again with the same options (and data folder)
// once this process has ended; kill it first.
func (d *Daemon) Restart(tb testing.TB) *Daemon {
	tb.Helper()
	if d.Cmd.ProcessState == nil {
		tb.Fatal("Restart of a node still running: Kill it first")
	}
	return StartDaemon(tb, d.opts)
}
