package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testutil"
)

// readOnlyPolicy lets peers read the workspace and nothing else.
const readOnlyPolicy = `@id("read")
@reason("this node only reads")
permit (
  principal,
  action in Action::"read",
  resource in Path::"/sandbox/"
);
`

// daemon is a `snapnode run` child process whose log the test reads.
type daemon struct {
	*testutil.Daemon
	http string // base URL of its HTTP transport
	addr string
	logs chan string // its log lines, in order
	mu   sync.Mutex
	all  bytes.Buffer // every log line, for failure messages
}

// startDaemon starts the binary on the data folder dir/data with args, at
// log level info; it returns once the node printed its ready line.
func startDaemon(t *testing.T, dir string, args ...string) *daemon {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{logs: make(chan string, 1024)}
	go func() {
		defer r.Close()
		defer close(d.logs)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			d.mu.Lock()
			d.all.WriteString(sc.Text() + "\n")
			d.mu.Unlock()
			select {
			case d.logs <- sc.Text():
			default: // nobody waits for it; kept in all
			}
		}
	}()
	d.Daemon = testutil.StartDaemon(t, testutil.DaemonOptions{DataDir: filepath.Join(dir, "data"),
		Args: append(args, "--log-level", "info"), Env: []string{identity.EnvKey + "="}, Stderr: w})
	w.Close() // the node holds its own: the log ends when the node does
	d.addr, d.http = d.Address, strings.TrimSuffix(d.HTTPURL, "/snap")
	return d
}

func (d *daemon) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.all.String()
}

// hup sends SIGHUP and waits for the log line that says how the reload
// ended, containing want.
func (d *daemon) hup(t *testing.T, want string) string {
	t.Helper()
	for len(d.logs) > 0 { // what came before is not this reload's
		<-d.logs
	}
	if err := d.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-d.logs:
			if !ok {
				t.Fatalf("the node exited after SIGHUP:\n%s", d.log())
			}
			if strings.Contains(l, "settings reloaded") || strings.Contains(l, "settings not reloaded") {
				if !strings.Contains(l, want) {
					t.Fatalf("after SIGHUP: %q, want a line with %q", l, want)
				}
				return l
			}
		case <-timeout:
			t.Fatalf("no reload logged after SIGHUP:\n%s", d.log())
		}
	}
}

// await waits for a log line containing want, after those hup read.
func (d *daemon) await(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-d.logs:
			if !ok {
				t.Fatalf("the node exited before it logged %q:\n%s", want, d.log())
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no %q logged:\n%s", want, d.log())
		}
	}
}

// SIGHUP reads --config again: an operator removed from the file loses the
// role and the file's policy is put in force; a file that does not load, or
// a policy that does not, changes nothing and is logged. Against the real
// binary over HTTP.
func TestSIGHUPReloadsConfigFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	dir := t.TempDir()
	requester := keyFile(t, dir, testSecret)
	opKey, _ := identity.FromHex(otherSecret)
	operator := keyFile(t, dir, otherSecret)
	conf := filepath.Join(dir, "snapnode.toml")
	policyFile := writeFile(t, dir, "read-only.cedar", readOnlyPolicy, 0o600)
	head := `data_dir = "` + filepath.Join(dir, "data") + `"
relay_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
`
	setConf := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(head+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setConf(`operators = ["` + opKey.Address(identity.Mainnet) + `"]` + "\n")
	d := startDaemon(t, dir, "--config", conf)

	// write proposes a file and returns the task's state.
	write := func(name string) string {
		t.Helper()
		r := runCLI(t, "", "send", "--to", d.addr, "--http", d.http, "--key", requester, "--data", proposalFile(t, dir, "/sandbox/"+name))
		var p struct {
			Payload struct {
				Task struct {
					ID     string
					Status struct{ State string }
				}
			}
		}
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.Payload.Task.ID == "" {
			t.Fatalf("send: %v\n%s", err, r)
		}
		return p.Payload.Task.Status.State
	}
	// taskOf starts a task of the requester's and returns its id.
	taskOf := func() string {
		r := runCLI(t, "", "send", "--to", d.addr, "--http", d.http, "--key", requester, "hello")
		var p struct {
			Payload struct{ Task struct{ ID string } }
		}
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || p.Payload.Task.ID == "" {
			t.Fatalf("send: %v\n%s", err, r)
		}
		return p.Payload.Task.ID
	}
	task := taskOf()
	// operatorReads reports whether the operator's key may read the task.
	operatorReads := func() bool {
		t.Helper()
		r := runCLI(t, "", "task", "get", "--to", d.addr, "--http", d.http, "--key", operator, task)
		switch {
		case r.code == 0 && strings.Contains(r.stdout, task):
			return true
		case r.code == 1 && strings.Contains(r.stdout, `"code":1001`):
			return false
		}
		t.Fatalf("task get: %s", r)
		return false
	}
	sandbox := filepath.Join(dir, "data", "sandbox")
	if !operatorReads() {
		t.Fatal("the operator of the file cannot read another's task")
	}
	if got := write("before.txt"); got != "completed" {
		t.Fatalf("write under the default policy: %s\n%s", got, d.log())
	}

	// The operator is removed and a policy set: both in force after SIGHUP.
	// A setting that needs a restart is named, not applied.
	setConf(`policy = "` + policyFile + `"` + "\nworkers = 3\n")
	d.hup(t, "settings reloaded")
	if !regexp.MustCompile(`need a restart.*settings=\[workers\]`).MatchString(d.log()) {
		t.Errorf("no warning that workers needs a restart:\n%s", d.log())
	}
	if operatorReads() {
		t.Error("an operator removed from the file still reads another's task after SIGHUP")
	}
	if got := write("after.txt"); got == "completed" {
		t.Errorf("a write was carried out under the file's read-only policy: %s", got)
	}
	if _, err := os.Stat(filepath.Join(sandbox, "after.txt")); err == nil {
		t.Error("after.txt was written under the read-only policy")
	}

	// A file that does not parse: logged, naming the file; nothing changes.
	setConf(`operators = ["` + opKey.Address(identity.Mainnet) + `"` + "\n")
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, conf) {
		t.Errorf("the error does not name the file: %s", l)
	}
	// A file that parses but whose policy does not load: nothing changes
	// either, not even the operators it lists.
	setConf(`operators = ["` + opKey.Address(identity.Mainnet) + `"]` + "\npolicy = \"" + filepath.Join(dir, "missing.cedar") + "\"\n")
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, "missing.cedar") {
		t.Errorf("the error does not name the policy: %s", l)
	} else if !strings.Contains(l, `msg="SIGHUP: settings not reloaded; those in force stay"`) {
		// The line the guide names, whatever refused the reload: a
		// watcher selects it by its message.
		t.Errorf("a policy that does not load is not logged as the guide says: %s", l)
	}
	if operatorReads() {
		t.Error("a refused reload gave the operator role")
	}
	if got := write("refused.txt"); got == "completed" {
		t.Errorf("a refused reload dropped the read-only policy: %s", got)
	}
}

// A SIGHUP that comes while the node is still starting (systemctl reload
// right after start: the unit is Type=exec, and a start may take seconds
// waiting for its relays) does not kill it, as SIGHUP's default action
// would: the node goes on starting.
func TestSIGHUPWhileStartingDoesNotKill(t *testing.T) {
	dir := t.TempDir()
	var log testutil.LockedBuffer
	cmd := exec.Command(testutil.Binary(t), "run", "--data-dir", filepath.Join(dir, "data"),
		"--relay", "ws://127.0.0.1:1", "--http-listen", "off", "--log-level", "info") // no relay: the start waits for one
	cmd.Env = append(os.Environ(), identity.EnvKey+"=")
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(done) }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "relay down"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the node logged no attempt to reach its relay:\n%s", log.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatalf("the node ended on a SIGHUP while starting (%v):\n%s", waitErr, log.String())
	case <-time.After(time.Second):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("the node was killed by %v instead of stopping:\n%s", ws.Signal(), log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not stop on SIGTERM while starting:\n%s", log.String())
	}
}

// A settings or policy file that SIGHUP finds turned into a FIFO, or grown
// past its bound, is refused with a reason and the settings in force stay;
// before, the read of a FIFO waited for a writer without end in the loop
// that also handles SIGTERM, and the node no longer stopped, and a huge
// file was read whole.
func TestSIGHUPConfigNotARegularFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "snapnode.toml")
	policyFile := writeFile(t, dir, "read-only.cedar", readOnlyPolicy, 0o600)
	head := `data_dir = "` + filepath.Join(dir, "data") + `"
relay_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
`
	setConf := func(body string) {
		t.Helper()
		os.Remove(conf)
		if err := os.WriteFile(conf, []byte(head+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fifo := func(path string) {
		t.Helper()
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setConf("")
	d := startDaemon(t, dir, "--config", conf)
	t.Cleanup(func() {
		if t.Failed() { // a node stuck in a read does not stop on SIGINT
			d.Cmd.Process.Kill()
		}
	})

	fifo(conf)
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, conf) || !strings.Contains(l, "regular file") {
		t.Errorf("a FIFO as the settings file: %s", l)
	}
	setConf("# " + strings.Repeat("x", 1<<20) + "\n")
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, conf) || !strings.Contains(l, "over") {
		t.Errorf("a settings file over the bound: %s", l)
	}
	setConf(`policy = "` + policyFile + `"` + "\n")
	fifo(policyFile)
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, policyFile) || !strings.Contains(l, "regular file") {
		t.Errorf("a FIFO as the policy file: %s", l)
	}
	os.Remove(policyFile)
	if err := os.WriteFile(policyFile, []byte(readOnlyPolicy+"// "+strings.Repeat("x", 4<<20)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := d.hup(t, "settings not reloaded"); !strings.Contains(l, policyFile) || !strings.Contains(l, "over") {
		t.Errorf("a policy file over the bound: %s", l)
	}
	os.Remove(policyFile)
	writeFile(t, dir, "read-only.cedar", readOnlyPolicy, 0o600)
	d.hup(t, "settings reloaded")

	done := make(chan error, 1)
	go func() { done <- d.Cmd.Wait() }()
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the node did not stop on SIGTERM:\n%s", d.log())
	}
}

// SIGHUP puts in force, in the real binary, the live settings the other
// tests do not reach through it: http_rate and http_burst (the next POST
// /snap past the new burst is refused 429) and [card] (the card served
// over HTTP is the new one). A setting the file changes but a flag also
// gives (here log_level, which --log-level sets) is not used, at start as
// on reload, and the node says so, naming it, rather than leaving the
// edit without effect and without a word.
func TestSIGHUPAppliesLiveSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "snapnode.toml")
	head := `data_dir = "` + filepath.Join(dir, "data") + `"
relay_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
`
	setConf := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(head+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setConf("http_rate = 1000\nhttp_burst = 1000\n[card]\ndescription = \"the first card\"\n")
	d := startDaemon(t, dir, "--config", conf) // with --log-level info
	if strings.Contains(d.log(), "overridden") {
		t.Fatalf("a warning of overridden settings where the file sets none a flag sets:\n%s", d.log())
	}
	post := func() int {
		t.Helper()
		resp, err := http.Post(d.http+"/snap", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 3 {
		if code := post(); code == http.StatusTooManyRequests {
			t.Fatalf("POST %d within a burst of 1000: 429", i+1)
		}
	}

	setConf("log_level = \"debug\"\nhttp_rate = 0.001\nhttp_burst = 2\n[card]\ndescription = \"the second card\"\n")
	d.hup(t, "settings reloaded")
	d.await(t, "card changed: served over HTTP now, publishing it to the relays")
	// The card spends the first of the two tokens, a POST the second.
	resp, err := http.Get(d.http + "/.well-known/snap-agent.json")
	if err != nil {
		t.Fatal(err)
	}
	card, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(card), "the second card") {
		t.Errorf("the card served after [card] was reloaded: %s", card)
	}
	if codes := []int{post(), post()}; codes[0] == http.StatusTooManyRequests || codes[1] != http.StatusTooManyRequests {
		t.Errorf("a GET of the card and two POSTs after http_burst = 2 was reloaded: POSTs %v; want the second refused 429", codes)
	}
	if !regexp.MustCompile(`overridden.*settings=\[log_level\]`).MatchString(d.log()) {
		t.Errorf("log_level, changed in the file but set by --log-level, is not named as overridden:\n%s", d.log())
	}
}

// A SIGHUP after only the policy file changed (the settings name the same
// file) reloads the policy and names it among the settings changed.
// Before, the line after "policy in force" said changed=[].
func TestSIGHUPNamesAChangedPolicyFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	dir := t.TempDir()
	policyFile := writeFile(t, dir, "policy.cedar", readOnlyPolicy, 0o600)
	conf := writeFile(t, dir, "snapnode.toml", `data_dir = "`+filepath.Join(dir, "data")+`"
relay_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
policy = "`+policyFile+`"
`, 0o600)
	d := startDaemon(t, dir, "--config", conf)
	if l := d.hup(t, "settings reloaded"); !strings.Contains(l, "changed=[]") {
		t.Fatalf("a SIGHUP that changed nothing: %s", l)
	}
	if err := os.WriteFile(policyFile, []byte(readOnlyPolicy+"\n// a comment: another text, another version\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := d.hup(t, "settings reloaded"); !strings.Contains(l, "changed=[policy]") {
		t.Errorf("a SIGHUP after the policy file changed: %s; want changed=[policy]", l)
	}
}

// A settings file that does not load is refused on SIGHUP with the
// message that refuses it at start (the file, line and column, the
// setting, the rule), logged at error level, and the node runs on with
// the settings it had: whether the key is unknown, the value of another
// type or out of range, the key given twice, or the text not TOML.
func TestSIGHUPRefusesABadFileAsTheStartDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "snapnode.toml")
	head := `data_dir = "` + filepath.Join(dir, "data") + `"
relay_listen = "127.0.0.1:0"
http_listen = "127.0.0.1:0"
`
	setConf := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(head+body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setConf("workers = 2\n")
	d := startDaemon(t, dir, "--config", conf)
	for _, tc := range []struct{ name, body, want string }{
		{"unknown key", "workerz = 2\n", conf + `:4:1: unknown setting "workerz" (did you mean workers?)`},
		{"wrong type", "workers = \"2\"\n", conf + `:4:1: workers: incompatible types`},
		{"out of range", "workers = 0\n", conf + `:4:1: workers 0: want at least 1`},
		{"out of range in a table", "[agent]\nmax_steps = 0\n", conf + `:5:1: agent.max_steps: want 1…10000 model calls; got 0`},
		{"duplicate key", "workers = 2\nworkers = 3\n", conf + `:5:`},
		{"syntax", "workers = [\n", conf + `:4:12: workers: unexpected EOF`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			setConf(tc.body)
			start := runCLI(t, "", "run", "--config", conf)
			if start.code != exitUsage || !strings.Contains(start.stderr, tc.want) {
				t.Fatalf("start: %s\nwant exit %d and %q", start, exitUsage, tc.want)
			}
			msg := strings.TrimSpace(strings.TrimPrefix(start.stderr, "snapnode run: "))
			l := d.hup(t, "settings not reloaded")
			if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "err="+strconv.Quote(msg)) {
				t.Errorf("after SIGHUP: %s\nwant level=ERROR and err=%q, as the start said", l, msg)
			}
			resp, err := http.Get(d.http + "/healthz")
			if err != nil {
				t.Fatalf("the node stopped answering: %v\n%s", err, d.log())
			}
			resp.Body.Close()
		})
	}
	if strings.Contains(d.log(), "settings reloaded") {
		t.Errorf("a bad file was reloaded:\n%s", d.log())
	}
}

// A misspelt SNAPNODE_* variable is not ignored without a word: the node
// warns at start, naming it and the setting's variable it may be a
// misspelling of, never its value.
func TestRunWarnsOfAMisspeltVariable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a node")
	}
	noEnvKey(t)
	t.Setenv("SNAPNODE_HTTP_RAET", "zz-value-zz")
	dir := t.TempDir()
	d := startDaemon(t, dir, "--relay-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	d.await(t, "SNAPNODE_HTTP_RAET (did you mean SNAPNODE_HTTP_RATE?)")
	if log := d.log(); !regexp.MustCompile(`level=WARN .*SNAPNODE_HTTP_RAET`).MatchString(log) || strings.Contains(log, "zz-value-zz") {
		t.Errorf("want a warning naming SNAPNODE_HTTP_RAET, not its value:\n%s", log)
	}
}
