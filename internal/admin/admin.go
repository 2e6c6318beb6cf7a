package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// SocketName is the socket's file name in the data folder.
const SocketName = "admin.sock"

// MaxMessage bounds a request.
const MaxMessage = 1 << 20

// MaxConns bounds the connections served at once; one past it is told
// the socket is busy.
const MaxConns = 32

// MaxResponse bounds a response: a task with its held and final diffs
// can be far larger than a request.
const MaxResponse = 64 << 20

// Request is one operator command.
type Request struct {
	// Op is "held", "approve", "deny", "rollback", "job-resume" or
	// "console-url".
	Op string `json:"op"`
	// Task names the task whose held action is approved or denied, or
	// whose held actions are listed (every task's when empty).
	Task string `json:"task,omitempty"`
	// Action names the promoted action to roll back, or the held action
	// of Task to approve or deny (needed when the task holds several).
	Action string `json:"action,omitempty"`
	// Reason is the operator's note for a denial.
	Reason string `json:"reason,omitempty"`
	// Diff, for an approval, is the SHA-256 (hex) of the diff the
	// operator was shown (`held` lists it): an action held again since
	// with another diff is then refused, and nothing runs.
	Diff string `json:"diff,omitempty"`
	// WithDiff asks "held" for each action's diff itself, beside its sum
	// (diffs can be large: a listing leaves them out unless asked).
	WithDiff bool `json:"with_diff,omitempty"`
	// After and Limit page "held": the page starts after the action
	// After (the previous page's next; "": the oldest) and holds at most
	// Limit actions (0: the node's bound, 1,000).
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
	// Checkpoint names the recovery point of Task's agent job that
	// job-resume restarts it from.
	Checkpoint string `json:"checkpoint,omitempty"`
	// User, for console-url, is the local user whose browser the link is
	// for: a uid in decimal, or "any" for a link any connection spends
	// (through a reverse proxy, or from another machine); "": the user
	// of the socket's client, where the node can tell it.
	User string `json:"user,omitempty"`
}

// AnyUser is ConsoleURL's user of a link any connection may spend, and
// the user of a socket's client the node cannot tell.
const AnyUser = -1

// Response is the answer: Result on success, else Error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// Handler carries out the commands. Each returns a JSON-marshalable result
// (the task as it is now, say) or an error whose text the operator reads.
type Handler interface {
	// Held lists a page of the actions taskID holds (every task's when
	// it is ""), oldest first, starting after the action after ("": the
	// oldest), at most limit (0: the node's bound), each with its action
	// id and its diff's sum, and the diff itself when withDiff; with how
	// many are held in all and where the next page starts.
	Held(ctx context.Context, taskID, after string, limit int, withDiff bool) (any, error)
	// Decide approves or denies (with reason) the action taskID holds:
	// actionID, or when it is "" the one action the task holds (an error
	// names them when it holds several). A task that is not waiting for
	// a decision is refused with an error naming its state, and an
	// approval naming a diff (its SHA-256, hex; "" names none) that is
	// no longer the action's is refused too.
	Decide(ctx context.Context, taskID, actionID string, approve bool, reason, diff string) (any, error)
	Rollback(ctx context.Context, actionID string) (any, error)
	// ResumeJob restarts the agent job of taskID from its recovery point
	// checkpoint, undoing through the executor what the job changed
	// since.
	ResumeJob(ctx context.Context, taskID, checkpoint string) (any, error)
	// ConsoleURL issues a one-time login URL to the operator web console
	// for the host, to be spent by a connection of the local user user
	// (a uid), or by any with AnyUser.
	ConsoleURL(ctx context.Context, user int) (any, error)
}

// Server serves the socket.
type Server struct {
	ln      *net.UnixListener
	path    string
	handler Handler
	log     *slog.Logger
	wg      sync.WaitGroup
	// ioTimeout bounds the two times a connection waits on its client:
	// for the request to arrive, and for the response to be taken once the
	// command is carried out. The command itself is not bounded by it: an
	// approval runs the action, and the client decides how long it waits
	// (the CLI, two minutes).
	ioTimeout time.Duration
}

// defaultIOTimeout is a Server's ioTimeout.
const defaultIOTimeout = time.Minute

// Listen creates the socket at path, mode 0600. A socket left by a node
// that died is replaced; one that answers means another node uses the
// data folder, and Listen fails.
func Listen(path string, h Handler, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("admin: %s: another node is listening on it", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("admin: %w", err)
	}
	// The socket's folder is the owner's alone, so no other user can
	// reach the socket in the moment before it is 0600 (a umask would
	// do that for the whole process, whatever else it creates then).
	if fi, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	} else if perm := fi.Mode().Perm(); runtime.GOOS != "windows" && perm&0o077 != 0 {
		return nil, fmt.Errorf("admin: the socket's folder %s is open to other users (%04o): want it private (0700)", filepath.Dir(path), perm)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin: %w", err)
	}
	return &Server{ln: ln, path: path, handler: h, log: log, ioTimeout: defaultIOTimeout}, nil
}

// Serve answers connections until ctx is done, then closes the socket,
// waits for the connections in progress and returns nil. It serves at
// most MaxConns connections at once. Once ctx is done, a connection still
// waiting for its request is told the node is stopping, and a response
// is given stopGrace to be taken.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.ln.Close() })
	defer stop()
	var delay time.Duration
	// slots bounds the connections served at once (each may hold a
	// request of MaxMessage), refusing the busy answers at once.
	slots, refusing := make(chan struct{}, MaxConns), make(chan struct{}, MaxConns)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				// A failure that passes (EMFILE, ENFILE, ENOBUFS: the
				// process or the machine out of descriptors for a
				// moment) must not end the operator's channel for the
				// rest of the node's life: wait and accept again, as
				// net/http's server does.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("admin: accept failed; retrying", "err", err, "in", delay)
				select {
				case <-time.After(delay):
					continue
				case <-ctx.Done():
				}
			}
			s.wg.Wait()
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("admin: %w", err)
		}
		delay = 0
		select {
		case slots <- struct{}{}:
			s.wg.Go(func() {
				defer func() { <-slots }()
				s.serve(ctx, c)
			})
		default:
			// Past the bound a connection is told so, briefly; past
			// as many such answers at once, it is closed unanswered.
			select {
			case refusing <- struct{}{}:
				if len(refusing) == 1 {
					s.log.Warn("admin: connections refused: the socket is busy", "max", MaxConns)
				}
				s.wg.Go(func() {
					defer func() { <-refusing }()
					s.busy(c)
				})
			default:
				c.Close()
			}
		}
	}
}

// stopGrace is how long a response is still given to be taken once the
// node stops, and how long a connection past MaxConns is kept: it is told
// at once that the socket is busy, then its request is read and dropped
// until it closes or stopGrace has passed.
const stopGrace = time.Second

// busy answers a connection past MaxConns that the socket is busy. Its
// request is read and dropped, not kept: closed with the request unread,
// the socket could fail the client's write before it reads the answer.
func (s *Server) busy(c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(stopGrace))
	b, _ := json.Marshal(Response{Error: fmt.Sprintf("the admin socket is busy: it serves %d connections at once; nothing was carried out, try again", MaxConns)})
	if _, err := c.Write(append(b, '\n')); err != nil {
		return
	}
	c.CloseWrite()
	io.CopyN(io.Discard, c, MaxMessage+1)
}

func (s *Server) serve(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(s.ioTimeout))
	// The node's stop ends the wait for a request (a client that sends
	// nothing must not hold the stop for the I/O time-out) and shortens
	// the wait for the response to be taken to stopGrace.
	stop := context.AfterFunc(ctx, func() {
		c.SetReadDeadline(time.Now())
		c.SetWriteDeadline(time.Now().Add(stopGrace))
	})
	defer stop()
	reply := func(r Response) {
		// The deadline set above may have passed while the command ran:
		// the response gets a time of its own, short once the node
		// stops (checked after it is set: the stop may set it between).
		c.SetWriteDeadline(time.Now().Add(s.ioTimeout))
		if ctx.Err() != nil {
			c.SetWriteDeadline(time.Now().Add(stopGrace))
		}
		b, _ := json.Marshal(r)
		c.Write(append(b, '\n'))
	}
	peer, err := samePeer(c)
	if err != nil {
		s.log.Warn("admin: connection refused", "err", err)
		reply(Response{Error: err.Error()})
		return
	}
	req, err := readRequest(c)
	if ctx.Err() != nil {
		reply(Response{Error: "the node is stopping: nothing was carried out"})
		return
	}
	if err != nil {
		if errors.Is(err, errRequestTooLarge) {
			s.log.Warn("admin: request refused: over the bound", "max", MaxMessage)
		}
		reply(Response{Error: err.Error()})
		return
	}
	var result any
	switch req.Op {
	case "held":
		result, err = s.handler.Held(ctx, req.Task, req.After, req.Limit, req.WithDiff)
	case "approve", "deny":
		if req.Task == "" {
			err = errors.New(req.Op + ": the task id is required")
			break
		}
		result, err = s.handler.Decide(ctx, req.Task, req.Action, req.Op == "approve", req.Reason, req.Diff)
	case "rollback":
		result, err = s.handler.Rollback(ctx, req.Action)
	case "job-resume":
		if req.Task == "" || req.Checkpoint == "" {
			err = errors.New("job-resume: the task id and the checkpoint are required")
			break
		}
		result, err = s.handler.ResumeJob(ctx, req.Task, req.Checkpoint)
	case "console-url":
		var user int
		if user, err = linkUser(req.User, peer); err == nil {
			result, err = s.handler.ConsoleURL(ctx, user)
		}
	default:
		err = fmt.Errorf("unknown op %q: want held, approve, deny, rollback, job-resume or console-url", req.Op)
	}
	attrs := []any{"op", req.Op}
	if req.Task != "" {
		attrs = append(attrs, "task", req.Task)
	}
	if req.Action != "" {
		attrs = append(attrs, "action", req.Action)
	}
	if err != nil {
		s.log.Warn("admin command failed", append(attrs, "err", err)...)
	} else {
		s.log.Info("admin command", attrs...)
	}
	if err != nil {
		reply(Response{Error: err.Error()})
		return
	}
	b, err := json.Marshal(result)
	if err != nil {
		reply(Response{Error: "the result does not marshal: " + err.Error()})
		return
	}
	if len(b) > MaxResponse-1024 {
		reply(Response{Error: fmt.Sprintf("%s was carried out, but its result is %d bytes, over the socket's %d: read the task with snapnode task", req.Op, len(b), MaxResponse)})
		return
	}
	reply(Response{Result: b})
}

// errRequestTooLarge is readRequest's error for a line over MaxMessage.
var errRequestTooLarge = errTooLarge(-1)

// readRequest reads the one request of a connection: a line of JSON of
// at most MaxMessage bytes, its newline aside (the last line may go
// without). Its errors are the words the client is answered with.
func readRequest(r io.Reader) (Request, error) {
	// One byte past the bound for the newline: a longer line is refused
	// as such, not read in part and answered as JSON cut short.
	line, err := bufio.NewReader(io.LimitReader(r, MaxMessage+1)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return Request{}, fmt.Errorf("reading the request: %w", err)
	}
	if len(bytes.TrimSuffix(line, []byte("\n"))) > MaxMessage {
		return Request{}, errRequestTooLarge
	}
	// A member the node does not know is refused, not ignored: a
	// client's misnamed member (an approval's diff) would otherwise be
	// carried out without what it asked for.
	if err := json.Unmarshal(line, new(any)); err != nil {
		return Request{}, fmt.Errorf("the request is not JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var req Request
	if err := dec.Decode(&req); err != nil {
		return Request{}, fmt.Errorf("the request is not one of this node's (nothing was carried out): %w", err)
	}
	return req, nil
}

// RefusedError is the node's answer to a request it did not carry out,
// in its words: a refusal, as opposed to a node that could not be asked.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// Call sends one request to the socket at path and returns the response.
// A response with Error set is returned as a *RefusedError.
func Call(ctx context.Context, path string, req Request) (json.RawMessage, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	if len(b) > MaxMessage {
		return nil, fmt.Errorf("admin: %w", errTooLarge(len(b)))
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin: is the node running with the data folder %s? (--data-dir or --config names the node's): %w", filepath.Dir(path), err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, MaxResponse)).ReadBytes('\n')
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The request was sent: the node carries the command out
		// whether or not anyone waits for its answer.
		return nil, fmt.Errorf("admin: no answer in time; the node may still carry the command out (see snapnode held and snapnode task): %w", err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("admin: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return nil, fmt.Errorf("admin: bad response: %w", err)
	}
	if resp.Error != "" {
		return nil, &RefusedError{Message: resp.Error}
	}
	return resp.Result, nil
}

// maxPath is the longest socket path the system takes: a Unix socket's
// address holds it with a terminating NUL (107 bytes on Linux, 103 on BSD
// and macOS).
var maxPath = len(syscall.RawSockaddrUnix{}.Path) - 1

// checkPath refuses a socket path longer than maxPath, naming the rule:
// the system's own error is "invalid argument".
func checkPath(path string) error {
	if len(path) > maxPath {
		return fmt.Errorf("admin: the socket's path %s is %d bytes, over the %d a Unix socket's address holds: give a shorter data folder (data_dir, --data-dir)", path, len(path), maxPath)
	}
	return nil
}

// errTooLarge is the refusal of a request of n bytes (-1: unknown, past
// the bound) over MaxMessage.
func errTooLarge(n int) error {
	if n < 0 {
		return fmt.Errorf("the request is over the socket's %d bytes: nothing was carried out (a deny's reason is cut to 1024 bytes anyway)", MaxMessage)
	}
	return fmt.Errorf("the request is %d bytes, over the socket's %d bytes: nothing was carried out (a deny's reason is cut to 1024 bytes anyway)", n, MaxMessage)
}

// Path returns the socket's path in dataDir.
func Path(dataDir string) string { return filepath.Join(dataDir, SocketName) }

// linkUser is the user a console-url request's link is for: the one it
// names, else peer, the socket's client (AnyUser where it is not known).
func linkUser(name string, peer int) (int, error) {
	switch name {
	case "":
		return peer, nil
	case "any":
		return AnyUser, nil
	}
	uid, err := strconv.Atoi(name)
	if err != nil || uid < 0 {
		return 0, fmt.Errorf("console-url: the user %q is neither a uid nor \"any\"", name)
	}
	return uid, nil
}
