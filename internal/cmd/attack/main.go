package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

func main() {
	attack := flag.String("attack", "", "the attack: dirbomb, idle, streams or bodies")
	before := flag.Bool("before", false, "run with the attack's defence turned off through its settings")
	duration := flag.Duration("duration", 20*time.Second, "how long the attack runs")
	bin := flag.String("bin", "", "the snapnode binary (default: build ./cmd/snapnode)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := run(ctx, *attack, *before, *duration, *bin)
	if err != nil {
		log.Fatalf("attack: %v", err)
	}
	which := "after"
	if *before {
		which = "before"
	}
	fmt.Printf("attack=%s run=%s valid_requests=%d failures=%d p50=%s p99=%s peak_rss=%dMiB %s\n",
		*attack, which, r.n, r.failures, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), r.peakRSS>>20, r.note)
}

// result is what one run measured.
type result struct {
	n, failures int
	p50, p99    time.Duration
	peakRSS     int64
	note        string // what the attacker achieved
}

// node is `snapnode run` as a child process.
type node struct {
	cmd        *exec.Cmd
	addr, http string // the node's address and its /snap endpoint
}

// scenario is one attack: the node's settings, the attack itself (running
// until ctx ends; it returns once the attack is built up), and the valid
// peer's request.
type scenario struct {
	args, before []string
	env          []string
	attack       func(ctx context.Context, n *node) (note func() string, err error)
	valid        func(ctx context.Context, n *node, peer *client.HTTP, i int) error
}

func scenarios(llmURL string) map[string]scenario {
	common := []string{"--http-rate", "0"}
	return map[string]scenario{
		"dirbomb": {args: common, before: []string{"--executor-quota-dirs", "1000000000"}, attack: dirbomb, valid: writeFile},
		"idle": {args: append(common, "--identity-rate", "0"),
			before: []string{"--http-max-conns", "1000000", "--http-max-conns-per-peer", "1000000"}, attack: idle, valid: tasksGet},
		"streams": {args: append(common, "--max-streams", "200", "--llm-url", llmURL, "--llm-model", "stub"),
			env:    []string{"SNAPNODE_LLM_RESPONSE_FORMAT=none", "SNAPNODE_AGENT_CONTEXT_TOKENS=16384"},
			before: []string{"--max-newcomer-streams", "200", "--stream-wait-timeout", "0s"}, attack: streams, valid: streamWrite},
		"bodies": {args: append(common, "--identity-rate", "0", "--http-max-body", "10485760"),
			before: []string{"--http-body-memory", "1099511627776"}, attack: bodies, valid: tasksGet},
	}
}

func run(ctx context.Context, attack string, before bool, duration time.Duration, bin string) (result, error) {
	llm := stubModelServer()
	defer llm.Close()
	sc, ok := scenarios(llm.URL + "/v1")[attack]
	if !ok {
		return result{}, fmt.Errorf("-attack %q: want dirbomb, idle, streams or bodies", attack)
	}
	tmp, err := os.MkdirTemp("", "snapnode-attack-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(tmp)
	if bin == "" {
		bin = filepath.Join(tmp, "snapnode")
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/snapnode/snapnode/cmd/snapnode").CombinedOutput(); err != nil {
			return result{}, fmt.Errorf("build: %v\n%s", err, out)
		}
	}
	args := slices.Clone(sc.args)
	if before {
		args = append(args, sc.before...)
	}
	if err := os.MkdirAll(filepath.Join(tmp, "data", "sandbox"), 0o700); err != nil {
		return result{}, err
	}
	n, err := startNode(bin, filepath.Join(tmp, "data"), sc.env, args)
	if err != nil {
		return result{}, err
	}
	defer n.stop()

	actx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	k, err := identity.Generate()
	if err != nil {
		return result{}, err
	}
	// Each of its requests comes on a new connection, as a new peer's
	// would: a connection kept from before the attack would not meet it.
	peer := client.NewHTTP(client.HTTPConfig{Key: k,
		HTTP: &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}})
	// The valid peer is known to the node: it has a task here.
	if err := writeFile(actx, n, peer, -1); err != nil {
		return result{}, fmt.Errorf("the valid peer's first task: %w", err)
	}
	note, err := sc.attack(actx, n)
	if err != nil {
		return result{}, err
	}
	var r result
	var took []time.Duration
	for i := 0; actx.Err() == nil; i++ {
		start := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
		err := sc.valid(rctx, n, peer, i)
		rcancel()
		took = append(took, time.Since(start))
		if err != nil {
			r.failures++
		}
		time.Sleep(100 * time.Millisecond) // a peer, not a flood
	}
	r.note = note()
	if r.n = len(took); r.n > 0 {
		slices.Sort(took)
		r.p50, r.p99 = took[r.n/2], took[min(r.n-1, r.n*99/100)]
	}
	r.peakRSS, err = peakRSS(n.cmd.Process.Pid)
	return r, err
}

// startNode starts the node through prlimit, with 1,024 open files.
func startNode(bin, dataDir string, env, args []string) (*node, error) {
	argv := append([]string{"prlimit", "--nofile=1024:1024", bin, "run", "--data-dir", dataDir,
		"--relay-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-level", "error"}, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	logFile, err := os.Create(filepath.Join(filepath.Dir(dataDir), "node.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &node{cmd: cmd}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`address=(\S+) .* http=(\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		n.stop()
		log, _ := os.ReadFile(logFile.Name())
		return nil, fmt.Errorf("no ready line from the node (%v): %q\n%s", err, line, log)
	}
	n.addr, n.http = m[1], m[2]
	return n, nil
}

func (n *node) stop() {
	n.cmd.Process.Signal(os.Interrupt)
	n.cmd.Wait()
}

// peakRSS reads the process's peak resident set (VmHWM).
func peakRSS(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// stubModelServer is a model server that lists one model and never
// answers a chat: the agent's tasks stay open.
func stubModelServer() *httpServer {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"stub","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	return newHTTPServer(mux)
}

type httpServer struct {
	URL string
	srv *http.Server
}

func newHTTPServer(h http.Handler) *httpServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := &httpServer{URL: "http://" + ln.Addr().String(), srv: &http.Server{Handler: h}}
	go s.srv.Serve(ln)
	return s
}

func (s *httpServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	s.srv.Shutdown(ctx)
	s.srv.Close()
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address ip, so that a flood looks like many peers.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

func newID() string { return uuid.NewString() }

// proposal is a message/send payload carrying one proposal.
func proposal(action string, args map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": newID(), "role": "user", "parts": []any{
		map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": newID(), "reasoning": "load test",
			"action": action, "args": args}}}}})
	return b
}

func freeText(s string) []byte {
	b, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": newID(), "role": "user",
		"parts": []any{map[string]any{"text": s}}}})
	return b
}

// taskState returns the state of the task a response carries, or an
// error naming the SNAP error it carries instead.
func taskState(m *snap.Message) (string, error) {
	var p struct {
		Task *struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"task"`
		Error *snap.Error `json:"error"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return "", err
	}
	if p.Error != nil {
		return "", p.Error
	}
	if p.Task == nil {
		return "", fmt.Errorf("no task in %s", m.Payload)
	}
	return p.Task.Status.State, nil
}

// The valid peer's requests.

func writeFile(ctx context.Context, n *node, peer *client.HTTP, i int) error {
	m, err := peer.Send(ctx, n.http, &snap.Message{To: n.addr, Method: "message/send",
		Payload: proposal("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/valid-%d.txt", i+1), "content": "valid\n"})})
	if err != nil {
		return err
	}
	if st, err := taskState(m); err != nil || st != "completed" {
		return fmt.Errorf("write: %s %v: %s", st, err, m.Payload)
	}
	return nil
}

func streamWrite(ctx context.Context, n *node, peer *client.HTTP, i int) error {
	m, err := peer.Stream(ctx, n.http, &snap.Message{To: n.addr, Method: "message/stream",
		Payload: proposal("WRITE_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/streamed-%d.txt", i), "content": "valid\n"})}, nil)
	if err != nil {
		return err
	}
	if st, err := taskState(m); err != nil || st != "completed" {
		return fmt.Errorf("stream: %s %v", st, err)
	}
	return nil
}

func tasksGet(ctx context.Context, n *node, peer *client.HTTP, _ int) error {
	m, err := peer.Send(ctx, n.http, &snap.Message{To: n.addr, Method: "tasks/get", Payload: []byte(`{"taskId":"no-such-task"}`)})
	if err != nil {
		return err
	}
	_, err = taskState(m)
	if e, ok := errors.AsType[*snap.Error](err); !ok || e.Code != snap.CodeTaskNotFound {
		return fmt.Errorf("tasks/get: %v, want 1001", err)
	}
	return nil
}

// The attacks.

func dirbomb(ctx context.Context, n *node) (func() string, error) {
	k, err := identity.Generate()
	if err != nil {
		return nil, err
	}
	c := client.NewHTTP(client.HTTPConfig{Key: k, HTTP: clientFrom("127.0.6.1")})
	var made, refused atomic.Int64
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			path := fmt.Sprintf("/sandbox/bomb-%d/", i) + strings.Repeat("d/", 30) + "f.txt"
			m, err := c.Send(ctx, n.http, &snap.Message{To: n.addr, Method: "message/send",
				Payload: proposal("WRITE_FILE", map[string]any{"path": path, "content": "x\n"})})
			if err != nil {
				continue
			}
			if st, err := taskState(m); err == nil && st == "completed" {
				made.Add(31)
			} else {
				refused.Add(1)
				if err != nil { // over the identity's allowance: back off as told
					time.Sleep(time.Second)
				}
			}
		}
	}()
	time.Sleep(5 * time.Second)
	return func() string {
		return fmt.Sprintf("folders_made=%d attacker_refused=%d", made.Load(), refused.Load())
	}, nil
}

func idle(ctx context.Context, n *node) (func() string, error) {
	hostport := strings.TrimSuffix(strings.TrimPrefix(n.http, "http://"), "/snap")
	var conns []net.Conn
	for i := range 2000 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.3.%d", 1+i%100))}, Timeout: 2 * time.Second}
		if c, err := d.DialContext(ctx, "tcp", hostport); err == nil {
			conns = append(conns, c)
		}
	}
	context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.Close()
		}
	})
	return func() string { return fmt.Sprintf("connections_opened=%d", len(conns)) }, nil
}

func streams(ctx context.Context, n *node) (func() string, error) {
	var open, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 300 {
		k, err := identity.Generate()
		if err != nil {
			return nil, err
		}
		c := client.NewHTTP(client.HTTPConfig{Key: k, HTTP: clientFrom(fmt.Sprintf("127.0.5.%d", 1+i%100))})
		wg.Go(func() {
			for ctx.Err() == nil {
				var counted bool
				m, err := c.Stream(ctx, n.http, &snap.Message{To: n.addr, Method: "message/stream", Payload: freeText("hold this stream")},
					func(*snap.Message) error {
						if !counted {
							counted = true
							open.Add(1)
						}
						return nil
					})
				if counted {
					open.Add(-1)
				}
				if err == nil {
					if _, err := taskState(m); err != nil {
						refused.Add(1)
					}
				}
				select { // try again, as a 5002 says to
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		})
	}
	context.AfterFunc(ctx, wg.Wait)
	deadline := time.Now().Add(10 * time.Second)
	for open.Load() < 100 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	var peak atomic.Int64
	go func() {
		for ctx.Err() == nil {
			if o := open.Load(); o > peak.Load() {
				peak.Store(o)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return func() string {
		return fmt.Sprintf("attacker_streams_peak=%d attacker_refusals=%d", peak.Load(), refused.Load())
	}, nil
}

func bodies(ctx context.Context, n *node) (func() string, error) {
	body := bytes.Repeat([]byte("a"), 10<<20)
	copy(body, `{"x":"`)
	copy(body[len(body)-2:], `"}`)
	var posted atomic.Int64
	for i := range 100 {
		hc := clientFrom(fmt.Sprintf("127.0.4.%d", 1+i))
		go func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.http, bytes.NewReader(body))
				if resp, err := hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					posted.Add(1)
				}
			}
		}()
	}
	time.Sleep(3 * time.Second) // let the bodies pile up
	return func() string { return fmt.Sprintf("bodies_answered=%d", posted.Load()) }, nil
}
