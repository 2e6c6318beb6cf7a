package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/node"
)

var update = flag.Bool("update", false, "rewrite the console screenshots in docs/img")

// chromium returns the path of a Chromium (or Chrome) binary, or "".
func chromium() string {
	if p := os.Getenv("SNAPNODE_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// startConsoleNode starts, for a browser test, a node that serves the
// console on loopback under the confirm policy, with a sandbox/reports
// folder, and returns the Chromium binary to drive it with. Without
// Chromium it skips (it fails under CI, which must have one).
func startConsoleNode(t *testing.T) (bin string, n *node.Node, dataDir string, stop context.CancelFunc) {
	t.Helper()
	bin = chromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must provide Chromium: none on PATH and SNAPNODE_TEST_CHROMIUM is not set")
		}
		t.Skip("no Chromium found (on Debian: apt-get install chromium; or set SNAPNODE_TEST_CHROMIUM)")
	}
	dataDir = filepath.Join(t.TempDir(), "data")
	n, stop = startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
		c.Policy = "../../executor/policy/testdata/policies/confirm.cedar"
	})
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox", "reports"), 0o700); err != nil {
		stop()
		t.Fatal(err)
	}
	return bin, n, dataDir, stop
}

// consoleBrowser is a Chromium logged in to a node's console.
type consoleBrowser struct {
	ctx   context.Context // the test's: two minutes
	bctx  context.Context // the browser's
	home  string          // the session's task list, where the login link led
	do    func(steps ...chromedp.Action[chromedp.Void])
	close func() // closes the browser and cancels ctx
}

// loginConsole starts the Chromium bin and logs it in to the console of
// the node in dataDir with the link `snapnode console-url` asks the admin
// socket for. The caller closes it.
func loginConsole(t *testing.T, bin, dataDir string) *consoleBrowser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"})
	var login struct{ URL string }
	if err != nil || json.Unmarshal(res, &login) != nil {
		cancel()
		t.Fatalf("console-url: %s %v", res, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	b := &consoleBrowser{ctx: ctx, bctx: bctx, close: func() {
		cancelBrowser()
		cancelAlloc()
		cancel()
	}}
	b.do = func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	ok := false
	defer func() {
		if !ok {
			b.close()
		}
	}()
	b.do(chromedp.Navigate(login.URL), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	if b.home, err = chromedp.Run(bctx, chromedp.Location()); err != nil {
		t.Fatal(err)
	}
	ok = true
	return b
}

// TestConsoleInBrowser drives a real Chromium through the operator
// console of a real node: a peer's WRITE_FILE waits for confirmation (the
// policy confirms writes under reports/); the operator logs in with the
// link `snapnode console-url` asks the admin socket for, sees the held
// action with its diff and risk, and approves it in the page; the file is
// then in the sandbox and the audit log records the host's confirmation
// and the promotion. With -update it rewrites the screenshots in docs/img.
// Without Chromium it skips (it fails under CI, which must have one).
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must provide Chromium: none on PATH and SNAPNODE_TEST_CHROMIUM is not set (scripts/test-all, which .ci/run calls, installs Debian's chromium and sets it)")
		}
		t.Skip("no Chromium found (on Debian: apt-get install chromium; or set SNAPNODE_TEST_CHROMIUM): the console's browser test needs one")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
		c.Policy = "../../executor/policy/testdata/policies/confirm.cedar"
	})
	defer stop()
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox", "reports"), 0o700); err != nil {
		t.Fatal(err)
	}
	alice := newRequester(t, n.RelayURLs())
	const content = "Quarterly summary: <b>all good</b>\n"
	held := taskOf(t, alice.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/reports/summary.txt", "content": content}), false))
	if held.Status.State != "input_required" {
		t.Fatalf("the write was not held: %s %q", held.Status.State, held.Status.Message)
	}
	actionID := regexp.MustCompile(`action (\S+):`).FindStringSubmatch(held.Status.Message)
	if actionID == nil {
		t.Fatalf("no action id in %q", held.Status.Message)
	}
	target := filepath.Join(dataDir, "sandbox", "reports", "summary.txt")
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the file is there before the approval")
	}

	// What `snapnode console-url` does.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"})
	var login struct{ URL string }
	if err != nil || json.Unmarshal(res, &login) != nil || !strings.HasPrefix(login.URL, n.HTTPURL()+"/console/login?token=") {
		t.Fatalf("console-url: %s %v", res, err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1200, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// do runs steps; text and where read the page.
	do := func(steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("browser: %v", err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: the text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	shot := func(name string) {
		t.Helper()
		if !*update {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("browser: screenshot: %v", err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	approve := "#approve-" + actionID[1]

	do(chromedp.Navigate(login.URL), chromedp.WaitVisible(chromedp.CSS("#tasks")))
	afterLogin, err := chromedp.Run(bctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	list := text("#tasks")
	shot("console-tasks.png")
	home := strings.TrimPrefix(afterLogin, n.HTTPURL())
	do(chromedp.Click(chromedp.CSS(`a[href="`+home+`tasks/`+held.ID+`"]`)), chromedp.WaitVisible(chromedp.CSS(approve)))
	risk, diff := text(".held .risk"), text(".held .diff")
	shot("console-approval.png")
	do(chromedp.Click(chromedp.CSS(approve)), chromedp.WaitVisible(chromedp.CSS("#notice")))
	notice, state := text("#notice"), text("#state")
	shot("console-task.png")
	do(chromedp.Navigate(afterLogin+"audit"), chromedp.WaitVisible(chromedp.CSS("#verify")))
	auditStatus, auditRows, unsealed := text("#verify"), text("table.audit"), text("#seal")
	// Sealed, as the node does every hour: the page shows the seal.
	seal, err := n.SealAudit(ctx)
	if err != nil || seal.Seq == 0 {
		t.Fatalf("SealAudit: %+v, %v", seal, err)
	}
	do(chromedp.Navigate(afterLogin+"audit"), chromedp.WaitVisible(chromedp.CSS("#seal")))
	sealed := text("#seal")
	// A server on another port of the node's host, the browser sent
	// to its /console/…: the session's cookie is not for that path.
	lured := make(chan []*http.Cookie, 1)
	lure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case lured <- r.CookiesNamed(console.CookieName):
		default: // a favicon's request
		}
		w.Write([]byte(`<p id="lure">hello</p>`))
	}))
	defer lure.Close()
	do(chromedp.Navigate(lure.URL+"/console/tasks/"+held.ID), chromedp.WaitVisible(chromedp.CSS("#lure")))

	if !regexp.MustCompile(`^/console/s/[A-Za-z0-9_-]{43}/$`).MatchString(home) {
		t.Errorf("after login the browser is at %q, want the session's task list without the token", afterLogin)
	}
	if got := <-lured; len(got) != 0 {
		t.Errorf("a server on another port of the node's host got the session cookie: %v", got)
	}
	if !strings.Contains(list, "input_required") {
		t.Errorf("the task list does not show the held task: %q", list)
	}
	if risk == "" || !strings.Contains(diff, "+Quarterly summary: <b>all good</b>") {
		t.Errorf("the held action: risk %q, diff %q", risk, diff)
	}
	if notice != "The action was approved." || state != "completed" {
		t.Errorf("after Approve: notice %q, state %q", notice, state)
	}
	if !strings.HasPrefix(auditStatus, "Intact:") || !strings.Contains(auditRows, "confirmed") {
		t.Errorf("the audit page: %q\n%s", auditStatus, auditRows)
	}
	if !strings.HasPrefix(unsealed, "No seal:") {
		t.Errorf("the audit page of a log not yet sealed: %q", unsealed)
	}
	if want := fmt.Sprintf("Last seal: entry %d, ", seal.Seq); !strings.HasPrefix(sealed, want) || !strings.Contains(sealed, n.Address()+": valid") || !strings.Contains(sealed, "0 entries after it are unsealed") {
		t.Errorf("the audit page once sealed: %q; want %q…, signed by %s, valid, 0 entries after it", sealed, want, n.Address())
	}

	if b, err := os.ReadFile(target); err != nil || string(b) != content {
		t.Fatalf("%s after the approval: %q %v", target, b, err)
	}
	rows, err := n.DB.R.QueryContext(ctx, "SELECT actor, step, decision FROM audit_log WHERE action = ? ORDER BY seq", actionID[1])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var actor, step, decision string
		if err := rows.Scan(&actor, &step, &decision); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, actor+" "+step)
	}
	joined := strings.Join(steps, ", ")
	if !strings.Contains(joined, "host confirmed") || !strings.Contains(joined, "promoted") {
		t.Fatalf("the audit log of %s: %s; want the host's confirmation and the promotion", actionID[1], joined)
	}
}

// TestConsoleURLWithoutHTTP: a node that serves no HTTP has no console,
// and console-url says why instead of printing a link that cannot work.
func TestConsoleURLWithoutHTTP(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	startNodeWith(t, func(c *config.Config) { c.DataDir = dataDir })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"}); err == nil || !strings.Contains(err.Error(), "console is off") {
		t.Fatalf("console-url on a node without HTTP: %s %v", res, err)
	}
}

// TestConsoleURLOnTheMachinesAddress: a node whose HTTP listener is on
// one of the machine's addresses other than loopback, with console_remote
// off, prints a link that a browser on the machine can open (it connects
// from that address, not from loopback); before, it got 403.
func TestConsoleURLOnTheMachinesAddress(t *testing.T) {
	addr := nettest.MachineIPv4(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = net.JoinHostPort(addr, "0")
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"})
	var login struct{ URL string }
	if err != nil || json.Unmarshal(res, &login) != nil || !strings.HasPrefix(login.URL, "http://"+addr+":") || n.HTTPURL() != strings.SplitN(login.URL, "/console/", 2)[0] {
		t.Fatalf("console-url: %s %v; want a link to %s", res, err, addr)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, "GET", login.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
		t.Fatalf("the login link from this machine: %s, cookies %v; want 303 and a session", resp.Status, resp.Cookies())
	}
}

// TestConsoleHostileDiffInBrowser drives Chromium through the approval of
// a peer's WRITE_FILE whose content is markup (an image whose onerror
// would retitle the page, a script), a bidi override and more than the
// 64 KiB of diff the page shows (a rewrite of a file of 40 KB): nothing of it runs or turns the text
// around, the page is not to be framed, and the cut is told in the
// approval's box, before Approve, with a link to the whole diff: a
// plain-text attachment, the very bytes whose SHA-256 Approve names.
// Before, the cut was told only at the end of the shown diff, and the
// console had no way to read the rest.
func TestConsoleHostileDiffInBrowser(t *testing.T) {
	bin, n, dataDir, stop := startConsoleNode(t)
	defer stop()
	const tail = `<img src=x onerror="document.title='owned'"><script>document.title='owned'</script> run ` + "\u202E" + `hs.txt`
	// A peer's message is at most 64 KiB: a rewrite of a file of 40 KB
	// makes a diff of 80 KB.
	if err := os.WriteFile(filepath.Join(dataDir, "sandbox", "reports", "notes.txt"), []byte(strings.Repeat("a line of last quarter's notes\n", 1300)), 0o600); err != nil {
		t.Fatal(err)
	}
	content := tail + "\n" + strings.Repeat("a harmless line of the quarterly notes\n", 1000) + tail + "\n"
	alice := newRequester(t, n.RelayURLs())
	// The task, with its diff, is too large for the answer: its id is in
	// the error.
	sent := alice.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/reports/notes.txt", "content": content}), false)
	taskID, _ := sent["error"].(map[string]any)["data"].(map[string]any)["taskId"].(string)
	if taskID == "" {
		t.Fatalf("message/send: %v", sent)
	}

	b := loginConsole(t, bin, dataDir)
	defer b.close()
	ctx, bctx, do, home := b.ctx, b.bctx, b.do, b.home
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: the text of %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	page := home + "tasks/" + taskID
	do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(".held button.approve")))
	action, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('.held input[name=action]').value`))
	if err != nil || action == "" {
		t.Fatalf("the held action's id: %q %v", action, err)
	}

	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil || title == "owned" {
		t.Errorf("the page's title %q (%v): the peer's markup ran", title, err)
	}
	live, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.images.length + document.scripts.length`))
	if err != nil || live != 0 {
		t.Errorf("%d images and scripts on the page (%v): the peer's markup is live", live, err)
	}
	if diff := text(".held .diff"); strings.Contains(diff, "\u202E") || !strings.Contains(diff, "⟨U+202E⟩") {
		t.Errorf("the diff's bidi override is not shown as such")
	}
	// The cut is told in the approval's box, before Approve.
	cut := "#cut-" + action
	where, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		const box = document.querySelector('#approve-`+action+`').closest('.decide'), cut = document.querySelector('`+cut+`');
		return !!cut && box.contains(cut) && !!(cut.compareDocumentPosition(document.querySelector('#approve-`+action+`')) & Node.DOCUMENT_POSITION_FOLLOWING);
	})()`))
	if err != nil || !where {
		t.Fatalf("the cut is not told in the approval's box, before Approve (%v)", err)
	}
	if s := text(cut); !strings.Contains(s, "The diff above is cut") {
		t.Errorf("the cut's warning: %q", s)
	}
	href, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('`+cut+` a').href`))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector('#held-`+action+` input[name=diff]').value`))
	if err != nil {
		t.Fatal(err)
	}
	jar, err := chromedp.Call(bctx, network.GetCookies, network.GetCookiesParams{URLs: []string{page}})
	cookies := jar.Cookies
	if err != nil || len(cookies) != 1 {
		t.Fatalf("the session's cookie: %v %v", cookies, err)
	}

	// The link downloads the whole diff, as the browser would fetch it.
	get := func(u string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: cookies[0].Name, Value: cookies[0].Value})
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := get(href)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the download: %s %v", resp.Status, err)
	}
	if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != sum || !strings.Contains(string(body), "+"+tail+"\n") {
		t.Errorf("the download is not the diff Approve names (%d bytes)", len(body))
	}
	if h := resp.Header; h.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the download's headers: %v", h)
	}
	// Neither page nor download is to be framed (the Approve button under
	// another site's page), nor to name itself to other sites.
	resp = get(page)
	resp.Body.Close()
	if h := resp.Header; !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Frame-Options") != "DENY" ||
		h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the task page's headers: %v", h)
	}
}

// TestConsoleCrossSiteInBrowser drives a real Chromium logged in to the
// console to a page of another origin on the same host (another port of
// 127.0.0.1: the same site, so the session's SameSite=Strict cookie goes
// with its requests) whose author knows everything but the CSRF token:
// the session's address, the task, the action and its diff's sum. The
// page frames the task page (to lure a click on Approve), posts an
// approval with fetch as text/plain (no preflight), and submits a form
// that approves. None of it approves anything: the frame is refused,
// and so are both posts (403), and the action waits as it did.
func TestConsoleCrossSiteInBrowser(t *testing.T) {
	bin, n, dataDir, stop := startConsoleNode(t)
	defer stop()
	alice := newRequester(t, n.RelayURLs())
	held := taskOf(t, alice.call(t, n, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/reports/x.txt", "content": "planted\n"}), false))
	if held.Status.State != "input_required" {
		t.Fatalf("the write was not held: %s %q", held.Status.State, held.Status.Message)
	}
	b := loginConsole(t, bin, dataDir)
	defer b.close()
	bctx, do, home := b.bctx, b.do, b.home
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("browser: %s: %v", js, err)
		}
		return s
	}
	taskPage := home + "tasks/" + held.ID
	do(chromedp.Navigate(taskPage), chromedp.WaitVisible(chromedp.CSS(".held button.approve")))
	action := eval(`document.querySelector('.held input[name=action]').value`)
	sum := eval(`document.querySelector('.held input[name=diff]').value`)
	decide := taskPage + "/decide"
	fields := url.Values{"csrf": {"guessed"}, "action": {action}, "diff": {sum}, "decision": {"approve"}}

	var posts atomic.Int32
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var inputs strings.Builder
		for k, v := range fields {
			fmt.Fprintf(&inputs, `<input type="hidden" name="%s" value="%s">`, html.EscapeString(k), html.EscapeString(v[0]))
		}
		fmt.Fprintf(w, `<!doctype html><title>evil</title>
<iframe id="lure" src="%[1]s" width="800" height="600"></iframe>
<form id="approve" method="post" action="%[2]s">%[3]s</form>
<script>
fetch(%[4]q, {method: "POST", mode: "no-cors", credentials: "include", headers: {"Content-Type": "text/plain"}, body: %[5]q})
  .then(() => { document.title = "sent" }, () => { document.title = "sent" });
</script>`, html.EscapeString(taskPage), html.EscapeString(decide), inputs.String(), decide, fields.Encode())
		posts.Add(1)
	}))
	defer evil.Close()
	if strings.HasPrefix(evil.URL, n.HTTPURL()) || !strings.HasPrefix(evil.URL, "http://127.0.0.1:") {
		t.Fatalf("the other page %s is not on another port of the node's host (%s)", evil.URL, n.HTTPURL())
	}
	do(chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#lure")))
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.title === "sent"`)); err != nil {
		t.Fatalf("the other page's fetch: %v", err)
	}
	tree, err := chromedp.Call(bctx, cdppage.GetFrameTree, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tree.FrameTree.ChildFrames {
		if u := f.Frame.URL; strings.HasPrefix(u, n.HTTPURL()) {
			t.Errorf("the console's task page is framed by another site's page: %s", u)
		}
	}
	// The form, as a click on the other page would send it.
	do(chromedp.Evaluate[chromedp.Void](`document.getElementById("approve").submit()`), chromedp.WaitVisible(chromedp.CSS("main")))
	if got := eval(`document.querySelector("main").innerText.replace("\n\n", ": ")`); !strings.HasPrefix(got, "Refused: Your browser says this form was sent from another site") {
		t.Errorf("the other site's form: %q", got)
	}
	do(chromedp.Navigate(taskPage))
	if still := eval(`String(!!document.getElementById("approve-` + action + `"))`); still != "true" {
		t.Error("the action no longer waits for a decision")
	}
	if _, err := os.Stat(filepath.Join(dataDir, "sandbox", "reports", "x.txt")); err == nil {
		t.Error("the file was written: another site's page approved the action")
	}
	if posts.Load() == 0 {
		t.Fatal("the other page was never served")
	}
}
