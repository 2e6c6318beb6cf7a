package jsinterop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/internal/testutil"
)

// Exit codes of client.mjs.
const (
	ExitOK      = 0 // a verified response arrived (or the command succeeded)
	ExitFail    = 1 // a reply failed verification, or a check failed
	ExitUsage   = 2 // bad flags
	ExitTimeout = 3 // no reply before --timeout-ms
	ExitRelay   = 4 // no relay reachable, or none accepted the event
)

// DefaultRunTimeout bounds Run when ctx has no deadline.
const DefaultRunTimeout = 2 * time.Minute

const installHint = "run npm ci in interop/js"

// Dir returns the interop/js folder of the module the test runs in.
func Dir(t testing.TB) string {
	t.Helper()
	return filepath.Join(snapref.ModuleRoot(t), "interop", "js")
}

// unavailable skips the test, or fails it when the CI environment variable
// is set.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// Node returns the path of the node binary after checking that
// interop/js/node_modules exists. When either is missing the test is
// skipped with "run npm ci in interop/js", or fails with it when the CI
// environment variable is set.
func Node(t testing.TB) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		unavailable(t, "jsinterop: node not found on PATH; install Node.js 20+ and %s", installHint)
	}
	dir := Dir(t)
	for _, p := range []string{"node_modules", filepath.Join("node_modules", "nostr-tools"), filepath.Join("node_modules", "@nostr-relay", "core")} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			unavailable(t, "jsinterop: %s is missing: %s", filepath.Join(dir, p), installHint)
		}
	}
	return node
}

// Run runs `node client.mjs args…` in interop/js and returns its standard
// output and exit code. ctx bounds it (DefaultRunTimeout when ctx has no
// deadline); a run that ctx cuts short fails the test. Standard error is
// logged.
func Run(t testing.TB, ctx context.Context, args ...string) (stdout []byte, exitCode int) {
	t.Helper()
	return RunInput(t, ctx, nil, args...)
}

// RunInput is Run with stdin as the process's standard input (for flags
// given the value "-").
func RunInput(t testing.TB, ctx context.Context, stdin []byte, args ...string) (stdout []byte, exitCode int) {
	t.Helper()
	node := Node(t)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultRunTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = Dir(t)
	cmd.WaitDelay = 5 * time.Second
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	if errb.Len() > 0 {
		t.Logf("client.mjs %s: stderr:\n%s", firstArg(args), strings.TrimRight(errb.String(), "\n"))
	}
	if ctx.Err() != nil {
		t.Fatalf("client.mjs %s: %v (stdout so far: %s)", firstArg(args), ctx.Err(), out.Bytes())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.Bytes(), 0
	case errors.As(err, &ee) && ee.Exited():
		return out.Bytes(), ee.ExitCode()
	default:
		t.Fatalf("client.mjs %s: %v", firstArg(args), err)
		return nil, -1
	}
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// EventSummary is the part of a Nostr event client.mjs prints.
type EventSummary struct {
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	ID        string     `json:"id"`
}

// Reply is one reply line of `client.mjs request`.
type Reply struct {
	Attempt  int               `json:"attempt"`
	Event    EventSummary      `json:"event"`
	Response json.RawMessage   `json:"response"`
	Verified bool              `json:"verified"`
	Checks   map[string]bool   `json:"checks"`
	Failures []string          `json:"failures"`
	Reasons  map[string]string `json:"reasons"`
	Extra    bool              `json:"extra"` // arrived after the deciding reply (--linger-ms)
}

// Sent is the {"sent":…} line `client.mjs request` prints per request event.
type Sent struct {
	Attempt     int             `json:"attempt"`
	Mutation    *string         `json:"mutation"`
	Event       EventSummary    `json:"event"`
	Request     json.RawMessage `json:"request"`
	From        string          `json:"from"`
	NostrPubkey string          `json:"nostrPubkey"`
	Since       int64           `json:"since"`
	Published   []struct {
		Relay   string `json:"relay"`
		OK      bool   `json:"ok"`
		Message string `json:"message"`
	} `json:"published"`
}

// Lines splits the output of `client.mjs request` into reply lines and
// sent lines; time-out lines are skipped (the exit code tells them).
func Lines(t testing.TB, stdout []byte) (replies []Reply, sent []Sent) {
	t.Helper()
	for _, line := range bytes.Split(bytes.TrimSpace(stdout), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(line, &probe); err != nil {
			t.Fatalf("client.mjs printed a line that is not a JSON object: %s", line)
		}
		switch {
		case probe["sent"] != nil:
			var s Sent
			if err := json.Unmarshal(probe["sent"], &s); err != nil {
				t.Fatalf("sent line: %v: %s", err, line)
			}
			sent = append(sent, s)
		case probe["event"] != nil && probe["verified"] != nil:
			var r Reply
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("reply line: %v: %s", err, line)
			}
			replies = append(replies, r)
		}
	}
	return replies, sent
}

// StartRelay starts the third-party relay (relay.mjs) on a free loopback
// port and returns its ws:// URL. It is stopped in t.Cleanup.
func StartRelay(t testing.TB) (url string) {
	t.Helper()
	return NewRelay(t).URL()
}

// Relay is a running relay.mjs process that can be stopped and restarted
// on the same port, for fault tests. Its stored events survive a restart
// (they are journalled to a file in t.TempDir()).
type Relay struct {
	t    testing.TB
	node string
	data string

	mu     sync.Mutex
	port   int
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	stderr *testutil.LockedBuffer
}

// NewRelay starts relay.mjs and returns its handle; t.Cleanup stops it.
func NewRelay(t testing.TB) *Relay {
	t.Helper()
	r := &Relay{t: t, node: Node(t), data: filepath.Join(t.TempDir(), "relay-events.jsonl"), stderr: &testutil.LockedBuffer{Keep: 64 << 10}}
	if err := r.start(0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() && r.stderr.Len() > 0 {
			t.Logf("relay.mjs stderr:\n%s", r.stderr.String())
		}
	})
	return r
}

// URL returns ws://127.0.0.1:PORT; it does not change across restarts.
func (r *Relay) URL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "ws://127.0.0.1:" + strconv.Itoa(r.port)
}

// Port returns the TCP port the relay listens on.
func (r *Relay) Port() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.port
}

// Running reports whether the relay process is up.
func (r *Relay) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

func (r *Relay) start(port int) error {
	cmd := exec.Command(r.node, "relay.mjs", "--port", strconv.Itoa(port), "--data", r.data)
	cmd.Dir = Dir(r.t)
	cmd.Stderr = r.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("jsinterop: starting relay.mjs: %w", err)
	}
	done := make(chan struct{})
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			var line struct {
				URL string `json:"url"`
			}
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.URL != "" {
				urlc <- line.URL
				sent = true
			}
		}
		cmd.Wait()
		close(done)
	}()
	select {
	case u := <-urlc:
		p, err := strconv.Atoi(u[strings.LastIndexByte(u, ':')+1:])
		if err != nil || !strings.HasPrefix(u, "ws://127.0.0.1:") {
			stopProcess(cmd, done)
			return fmt.Errorf("jsinterop: relay.mjs printed an unexpected URL %q", u)
		}
		r.mu.Lock()
		r.port, r.cmd, r.done = p, cmd, done
		r.mu.Unlock()
		return nil
	case <-done:
		return fmt.Errorf("jsinterop: relay.mjs exited before listening: %s", r.stderr.String())
	case <-time.After(30 * time.Second):
		stopProcess(cmd, done)
		return fmt.Errorf("jsinterop: relay.mjs did not print its URL within 30 s: %s", r.stderr.String())
	}
}

// Stop stops the relay: SIGTERM, then SIGKILL after 5 s. Stopping a
// stopped relay does nothing.
func (r *Relay) Stop() {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.cmd, r.done = nil, nil
	r.mu.Unlock()
	if cmd != nil {
		stopProcess(cmd, done)
	}
}

// Restart stops the relay if it runs and starts it again on the same port
// with the same stored events. Connected clients see their connection
// drop and must reconnect.
func (r *Relay) Restart() {
	r.t.Helper()
	r.Stop()
	port := r.Port()
	var err error
	// The port was just released; retry briefly in case the kernel has not
	// let go of it yet.
	for i := 0; i < 20; i++ {
		if err = r.start(port); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("jsinterop: restarting the relay on port %d: %v", port, err)
}

func stopProcess(cmd *exec.Cmd, done chan struct{}) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}
