package console_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// hostile is text a peer controls, shown on the pages.
const hostile = `<script>alert("owned")</script><img src=x onerror=alert(1)>`

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// fakeSource serves one task, "t1", holding one action; filters records
// the task list's filters.
type fakeSource struct {
	filters *[]tasks.Filter
	// dec, when set, decides what is held: nothing once it carried a
	// decision out, unless it holds the action again.
	dec *fakeDecider
}

func text(s string) *string { return &s }

func (fakeSource) task() *tasks.Task {
	return &tasks.Task{
		ID: "t1", Owner: "bc1palice", CreatedAt: t0,
		Status: tasks.Status{State: tasks.StateInputRequired, Timestamp: t0.Add(time.Second), Message: "confirmation needed " + hostile},
		History: []tasks.Message{{MessageID: "m1", Role: "user", Parts: []tasks.Part{
			{Text: text("please " + hostile)},
			{Data: []byte(`{"schema_version":"1.0.0","action":"WRITE_FILE","args":{"path":"/sandbox/reports/a.txt","content":"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}}`)},
		}}},
		Artifacts: []tasks.Artifact{{ArtifactID: "note-1", Name: "notes\u202Etxt.exe", Parts: []tasks.Part{{Text: text("artifact " + hostile)}}}},
	}
}

func (s fakeSource) Tasks(_ context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	if s.filters != nil {
		*s.filters = append(*s.filters, f)
	}
	t := s.task()
	if !f.Match(t) {
		return nil, nil
	}
	return []*tasks.Task{t}, nil
}

func (s fakeSource) Task(_ context.Context, id string) (*tasks.Task, error) {
	if id != "t1" {
		return nil, fmt.Errorf("task %s: %w", id, tasks.ErrNotFound)
	}
	return s.task(), nil
}

func (s fakeSource) Held(_ context.Context, taskID string) ([]executor.Pending, error) {
	if s.dec != nil {
		s.dec.mu.Lock()
		decided := len(s.dec.calls) > 0 && s.dec.err == nil && !s.dec.reheld
		s.dec.mu.Unlock()
		if decided {
			return nil, nil
		}
	}
	return []executor.Pending{{ActionID: "act-1", TaskID: taskID, Requester: "bc1palice", Action: "WRITE_FILE",
		Data: []byte("{\"action_type\":\"WRITE_FILE\",\"intent_summary\":\"tidy \u202Etxt.exe\u202C notes\u200B\"}"), Diff: heldDiff,
		PreImages: []executor.PreImage{{Path: "/sandbox/reports/p\u0430ssword.txt", Kind: sandbox.KindFile}, {Path: "/sandbox/отчёты/итоги.txt", Kind: sandbox.KindAbsent}, {Path: "/sandbox/\u0455\u0441\u043e\u0440\u0435/run.sh", Kind: sandbox.KindAbsent}},
		Reason:    "WRITE_FILE on /sandbox/reports/p\u0430ssword.txt, /sandbox/отчёты/итоги.txt, /sandbox/\u0455\u0441\u043e\u0440\u0435/run.sh; reports/ is read by people: confirm changes", Created: t0}}, nil
}

// heldDiff is the diff of the action fakeSource holds: a path whose
// "а" is Cyrillic (U+0430), in a file's headers, a line of its text
// that reads like one (left as it is), hostile text, a path in Cyrillic
// and one of its words wholly of Cyrillic look-alikes ("ѕсоре").
const heldDiff = "--- /sandbox/reports/p\u0430ssword.txt\n+++ /sandbox/reports/p\u0430ssword.txt\n@@ -1 +1,2 @@\n--- p\u0430ss\n+" + hostile + "\n+fake line\r+ok \u202Etxt.exe\n" +
	"--- /dev/null\n+++ /sandbox/отчёты/итоги.txt\n@@ -0,0 +1 @@\n+итоги\n" +
	"--- /dev/null\n+++ /sandbox/\u0455\u0441\u043e\u0440\u0435/run.sh\n@@ -0,0 +1 @@\n+\u0455\u0441\u043e\u0440\u0435\n"

func (s fakeSource) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	list, err := s.Held(ctx, q.Task)
	return heldPage(list, q), err
}

func (s fakeSource) HeldAction(ctx context.Context, taskID, actionID string) (*executor.Pending, error) {
	list, err := s.Held(ctx, taskID)
	return heldAction(list, taskID, actionID), err
}

// heldAction returns the action of list named actionID, held by taskID,
// or nil.
func heldAction(list []executor.Pending, taskID, actionID string) *executor.Pending {
	i := slices.IndexFunc(list, func(p executor.Pending) bool { return p.TaskID == taskID && p.ActionID == actionID })
	if i < 0 {
		return nil
	}
	return &list[i]
}

// heldPage is the page of list q selects, as proposals.HeldPage makes it.
func heldPage(list []executor.Pending, q proposals.HeldQuery) *proposals.HeldPage {
	page := &proposals.HeldPage{Actions: list, Total: len(list)}
	if q.Limit > 0 && len(list) > q.Limit {
		page.Actions, page.Next = list[:q.Limit], list[q.Limit-1].ActionID
	}
	return page
}

func (fakeSource) Job(context.Context, string, int) (*agent.Job, []agent.Interaction, error) {
	j := &agent.Job{TaskID: "t1", Status: "held", Phase: "implement", Steps: 2, CostCents: 1.5, PromptTokens: 900, CompletionTokens: 80}
	its := []agent.Interaction{
		{Sequence: 0, Timestamp: t0, Request: agent.Request{Metadata: agent.RequestMetadata{Phase: "plan"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "READ_FILE\u202E", SummaryForSupervisor: "read the notes " + hostile},
			Observation: &agent.Observation{Outcome: agent.ObsCompleted, ActionID: "act-0"}},
		{Sequence: 1, Timestamp: t0.Add(time.Second), Guidance: "the requester said: " + hostile, Request: agent.Request{Metadata: agent.RequestMetadata{Phase: "implement"}},
			Response:    agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", Reasoning: hostileReasoning},
			Observation: &agent.Observation{Outcome: agent.ObsNeedsConfirmation, ActionID: "act-1", Reason: "reports/ is read by people", Diff: "+" + hostile}},
	}
	return j, its, nil
}

// Proposer finds no step: Job returns every step of fakeSource's job
// (and of those that embed it), the page looks among them.
func (fakeSource) Proposer(context.Context, string, string) (*agent.Interaction, error) {
	return nil, nil
}

// hostileReasoning is a model's reasoning for the step that proposed
// act-1: markup that would close the <details> it is shown in, a bidi
// override, an ANSI escape and a word of Cyrillic look-alikes.
const hostileReasoning = "The notes go in p\u0430ssword.txt.</details><script>alert(2)</script>\n\u202Eexe.txt \x1b[31mred\x1b[0m"

func (fakeSource) Audit(_ context.Context, f audit.Filter) ([]audit.Entry, error) {
	return []audit.Entry{
		{Seq: 1, Time: t0, Actor: "bc1palice", Task: "t1", Action: "act-1", Step: audit.StepValidated, Detail: []byte(`{"risk":"MEDIUM"}`)},
		{Seq: 2, Time: t0, Actor: "bc1palice", Task: "t1", Action: "act-1", Step: audit.StepHeld, Reason: hostile},
	}, nil
}

func (fakeSource) AuditCount(context.Context, audit.Filter) (int64, error) {
	return 0, nil
}

func (fakeSource) VerifyAudit(context.Context) (audit.Report, error) {
	return audit.Report{Entries: 2, First: 1, Last: 2, Head: audit.Anchor{Seq: 2, Hash: "ab12"}, Unsealed: 2}, nil
}

// decision is one call of the fake Decider.
type decision struct {
	task, action, operator string
	approve                bool
	reason, diff           string
}

type fakeDecider struct {
	mu    sync.Mutex
	calls []decision
	err   error
	// reheld makes an approval hold the action again (its files
	// changed), as the executor does.
	reheld bool
}

func (d *fakeDecider) Decide(_ context.Context, dd proposals.Decision) (*tasks.Task, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, decision{dd.TaskID, dd.ActionID, dd.Approver, dd.Approve, dd.Reason, dd.Diff})
	return nil, d.err
}

type rig struct {
	c     *console.Console
	clock *testclock.Clock
	dec   *fakeDecider
}

func newRig(t *testing.T, mutate func(*console.Config)) *rig {
	t.Helper()
	r := &rig{clock: testclock.New(t0), dec: &fakeDecider{}}
	cfg := console.Config{Source: fakeSource{dec: r.dec}, Decider: r.dec, Now: r.clock.Now, SessionTTL: time.Hour, TokenTTL: time.Minute}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

// do serves one request from a loopback client (header h, cookie ck).
func (r *rig) do(method, target string, form url.Values, ck *http.Cookie, h map[string]string) *httptest.ResponseRecorder {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	req.RemoteAddr = "127.0.0.1:50000"
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if ck != nil {
		req.AddCookie(ck)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	r.c.ServeHTTP(w, req)
	return w
}

// loginURL issues a login URL for the host and returns its path and query.
func (r *rig) loginURL(t *testing.T) string {
	t.Helper()
	u, _, err := r.c.LoginURL("http://127.0.0.1:7448/", executor.Host, console.AnyUser)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "http://127.0.0.1:7448/console/login?token=") {
		t.Fatalf("login URL %q", u)
	}
	return strings.TrimPrefix(u, "http://127.0.0.1:7448")
}

// homeRE is the path of a session's task list, the prefix of its pages
// and its cookie's path.
var homeRE = regexp.MustCompile(`^/console/s/[A-Za-z0-9_-]{43}/$`)

// login logs in and returns the session cookie, whose path is the
// session's prefix, where the login redirects to.
func (r *rig) login(t *testing.T) *http.Cookie {
	t.Helper()
	w := r.do("GET", r.loginURL(t), nil, nil, nil)
	for _, ck := range w.Result().Cookies() {
		if ck.Name == console.CookieName {
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != ck.Path || !homeRE.MatchString(ck.Path) || strings.Contains(ck.Path, ck.Value) {
				t.Fatalf("login: %d to %q, the cookie's path %q", w.Code, w.Header().Get("Location"), ck.Path)
			}
			return ck
		}
	}
	t.Fatalf("login set no session cookie: %d %v", w.Code, w.Result().Cookies())
	return nil
}

// at returns the path of page p ("", "tasks/t1"…) of the session ck.
func at(ck *http.Cookie, p string) string { return ck.Path + p }

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of the session's pages.
func (r *rig) csrf(t *testing.T, ck *http.Cookie) string {
	t.Helper()
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	m := csrfRE.FindStringSubmatch(w.Body.String())
	if w.Code != http.StatusOK || m == nil {
		t.Fatalf("task page: %d, csrf %v", w.Code, m)
	}
	return m[1]
}

func TestLogin(t *testing.T) {
	r := newRig(t, nil)
	target := r.loginURL(t)
	w := r.do("GET", target, nil, nil, nil)
	cks := w.Result().Cookies()
	if len(cks) != 1 {
		t.Fatalf("cookies %v", cks)
	}
	ck := cks[0]
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != ck.Path {
		t.Fatalf("login: %d to %q, want 303 to the session's task list %q (the token out of the address bar)", w.Code, w.Header().Get("Location"), ck.Path)
	}
	if ck.Name != console.CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || !homeRE.MatchString(ck.Path) ||
		strings.Contains(ck.Path, ck.Value) || ck.Secure || ck.MaxAge != int(time.Hour/time.Second) || len(ck.Value) < 40 {
		t.Fatalf("session cookie %+v", ck)
	}
	if strings.Contains(w.Header().Get("Location"), "token") {
		t.Fatal("the redirect carries the token")
	}
	// The token is spent (and its second use ends the session of the
	// first, TestLinkUsedTwiceEndsItsSession: another login goes on).
	if w := r.do("GET", target, nil, nil, nil); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
		t.Fatalf("second use of the token: %d %v", w.Code, w.Result().Cookies())
	}
	ck = r.login(t)
	// A made-up token and no token are refused.
	for _, q := range []string{"/console/login?token=forged", "/console/login"} {
		if w := r.do("GET", q, nil, nil, nil); w.Code != http.StatusUnauthorized {
			t.Fatalf("%s: %d", q, w.Code)
		}
	}
	// The session opens the pages; without it they answer 401.
	for _, p := range []string{at(ck, ""), at(ck, "tasks/t1"), at(ck, "audit"), at(ck, "metrics")} {
		if w := r.do("GET", p, nil, ck, nil); w.Code != http.StatusOK {
			t.Errorf("%s with a session: %d", p, w.Code)
		}
		if w := r.do("GET", p, nil, nil, nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "snapnode console-url") {
			t.Errorf("%s without a session: %d", p, w.Code)
		}
		if w := r.do("GET", p, nil, &http.Cookie{Name: console.CookieName, Value: "guess"}, nil); w.Code != http.StatusUnauthorized {
			t.Errorf("%s with a made-up session: %d", p, w.Code)
		}
	}
	// Behind a TLS proxy the cookie is Secure.
	w = r.do("GET", r.loginURL(t), nil, nil, map[string]string{"X-Forwarded-Proto": "https"})
	if cks := w.Result().Cookies(); len(cks) != 1 || !cks[0].Secure {
		t.Fatalf("cookie over TLS: %+v", cks)
	}
	// Logging out ends the session.
	tok := r.csrf(t, ck)
	w = r.do("POST", at(ck, "logout"), url.Values{"csrf": {tok}}, ck, nil)
	if cks := w.Result().Cookies(); w.Code != http.StatusOK || len(cks) != 1 || cks[0].Path != ck.Path || cks[0].MaxAge != -1 {
		t.Fatalf("logout: %d, cookies %+v", w.Code, cks)
	}
	if w := r.do("GET", at(ck, ""), nil, ck, nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", w.Code)
	}
}

// A session's cookie opens its own prefix's pages only: not another
// session's, nor the paths outside any (which ask for a login), nor made
// up ones; and a second cookie of the name, such as one another server of
// the host set for /console, does not hide the session's.
func TestSessionOnlyUnderItsPrefix(t *testing.T) {
	r := newRig(t, nil)
	a, b := r.login(t), r.login(t)
	if a.Path == b.Path {
		t.Fatalf("two sessions share the prefix %s", a.Path)
	}
	tok := r.csrf(t, a)
	for _, p := range []string{at(b, ""), at(b, "tasks/t1"), at(b, "audit"), "/console/", "/console/tasks/t1", "/console/audit", "/console/metrics", "/console/s/guess/", "/console/s/"} {
		if w := r.do("GET", p, nil, a, nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "snapnode console-url") {
			t.Errorf("%s with another session's cookie: %d, want 401 saying how to log in", p, w.Code)
		}
	}
	for _, p := range []string{at(b, "tasks/t1/decide"), "/console/tasks/t1/decide", "/console/logout"} {
		if w := r.do("POST", p, url.Values{"csrf": {tok}, "action": {"act-1"}, "decision": {"approve"}}, a, nil); w.Code != http.StatusUnauthorized {
			t.Errorf("POST %s with another session's cookie and token: %d, want 401", p, w.Code)
		}
	}
	if len(r.dec.calls) != 0 {
		t.Fatalf("a POST outside the session's prefix reached the decider: %v", r.dec.calls)
	}
	// Every link and form of the session's pages stays under its
	// prefix (the style sheet aside, which needs no session).
	for _, p := range []string{"", "tasks/t1", "audit", "metrics"} {
		body := r.do("GET", at(a, p), nil, a, nil).Body.String()
		for _, m := range regexp.MustCompile(`(?:href|action)="([^"]*)"`).FindAllStringSubmatch(body, -1) {
			if u := m[1]; u != "" && u != "/console/static/console.css" && !strings.HasPrefix(u, a.Path) {
				t.Errorf("page %q links to %q, outside the session's prefix", p, u)
			}
		}
	}
	// Under the prefix, an unknown page is not found, with the session
	// only.
	if w := r.do("GET", at(a, "nope"), nil, a, nil); w.Code != http.StatusNotFound {
		t.Errorf("an unknown page of the session: %d", w.Code)
	}
	if w := r.do("GET", at(a, "nope"), nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("an unknown page of the session without its cookie: %d", w.Code)
	}
	// Other cookies of the name beside the session's: it is the one
	// taken, the session of the prefix.
	for _, other := range []string{"guess", b.Value} {
		h := map[string]string{"Cookie": console.CookieName + "=" + other + "; " + console.CookieName + "=" + a.Value}
		w := r.do("GET", at(a, "tasks/t1"), nil, nil, h)
		if m := csrfRE.FindStringSubmatch(w.Body.String()); w.Code != http.StatusOK || m == nil || m[1] != tok {
			t.Errorf("the session's page with a cookie %q before its own: %d, csrf %v", other, w.Code, m)
		}
	}
}

// Without AllowRemote the console serves clients on this machine only:
// on loopback, or connecting from the machine's own address to that
// address (a node listening on 192.0.2.7, reached by a browser beside it).
func TestLoopbackOnly(t *testing.T) {
	for _, c := range []struct {
		name          string
		remote, local string // local "": the request carries no local address
		allowRemote   bool
		want          int
	}{
		{"remote", "192.0.2.7:40000", "", false, http.StatusForbidden},
		{"remote allowed", "192.0.2.7:40000", "", true, http.StatusSeeOther},
		{"remote to the node's address", "192.0.2.7:40000", "192.0.2.1:7448", false, http.StatusForbidden},
		{"this machine's address", "192.0.2.7:40000", "192.0.2.7:7448", false, http.StatusSeeOther},
		{"this machine's IPv6 address", "[2001:db8::7]:40000", "[2001:db8::7]:7448", false, http.StatusSeeOther},
		{"IPv4 in IPv6", "[::ffff:192.0.2.7]:40000", "192.0.2.7:7448", false, http.StatusSeeOther},
		{"loopback", "127.0.0.1:40000", "127.0.0.1:7448", false, http.StatusSeeOther},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, func(cfg *console.Config) { cfg.AllowRemote = c.allowRemote })
			req := httptest.NewRequest("GET", r.loginURL(t), nil)
			req.RemoteAddr = c.remote
			if c.local != "" {
				req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(c.local))))
			}
			w := httptest.NewRecorder()
			r.c.ServeHTTP(w, req)
			if w.Code != c.want {
				t.Errorf("a login from %s to %q got %d, want %d", c.remote, c.local, w.Code, c.want)
			}
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	r.clock.Advance(time.Hour - time.Second)
	if w := r.do("GET", at(ck, ""), nil, ck, nil); w.Code != http.StatusOK {
		t.Fatalf("before the session's end: %d", w.Code)
	}
	r.clock.Advance(time.Second)
	if w := r.do("GET", at(ck, ""), nil, ck, nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("at the session's end: %d", w.Code)
	}
	// A login URL is good for TokenTTL.
	late := r.loginURL(t)
	r.clock.Advance(time.Minute)
	if w := r.do("GET", late, nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("an expired login URL: %d", w.Code)
	}
}

func TestBounds(t *testing.T) {
	r := newRig(t, func(c *console.Config) { c.MaxSessions, c.MaxTokens = 2, 2 })
	first := r.login(t)
	r.clock.Advance(time.Second)
	second := r.login(t)
	r.clock.Advance(time.Second)
	third := r.login(t) // ends the oldest
	for i, ck := range []*http.Cookie{first, second, third} {
		want := http.StatusOK
		if i == 0 {
			want = http.StatusUnauthorized
		}
		if w := r.do("GET", at(ck, ""), nil, ck, nil); w.Code != want {
			t.Errorf("session %d: %d, want %d", i+1, w.Code, want)
		}
	}
	a := r.loginURL(t)
	r.clock.Advance(time.Second)
	r.loginURL(t)
	r.clock.Advance(time.Second)
	r.loginURL(t) // voids a
	if w := r.do("GET", a, nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("the oldest of 3 tokens with MaxTokens 2: %d", w.Code)
	}
}

func TestCSRF(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	tok := r.csrf(t, ck)
	sum := proposals.DiffSum("d")
	form := url.Values{"action": {"act-1"}, "decision": {"approve"}, "diff": {sum}}
	for name, v := range map[string][]string{"no token": nil, "wrong token": {"x" + tok}, "empty": {""}} {
		f := url.Values{}
		for k, vs := range form {
			f[k] = vs
		}
		if v != nil {
			f["csrf"] = v
		}
		if w := r.do("POST", at(ck, "tasks/t1/decide"), f, ck, nil); w.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, w.Code)
		}
	}
	// Another session's token does not do either.
	other := r.csrf(t, r.login(t))
	form.Set("csrf", other)
	if w := r.do("POST", at(ck, "tasks/t1/decide"), form, ck, nil); w.Code != http.StatusForbidden {
		t.Errorf("another session's token: %d", w.Code)
	}
	if w := r.do("POST", at(ck, "logout"), url.Values{}, ck, nil); w.Code != http.StatusForbidden {
		t.Errorf("logout without the token: %d", w.Code)
	}
	if len(r.dec.calls) != 0 {
		t.Fatalf("a refused POST reached the decider: %v", r.dec.calls)
	}
	form.Set("csrf", tok)
	w := r.do("POST", at(ck, "tasks/t1/decide"), form, ck, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != at(ck, "tasks/t1?done=approved&action=act-1") {
		t.Fatalf("approve: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if want := (decision{"t1", "act-1", executor.Host, true, "", sum}); len(r.dec.calls) != 1 || r.dec.calls[0] != want {
		t.Fatalf("decider got %v, want %v", r.dec.calls, want)
	}
}

// TestCrossOriginPostRefused: a POST a browser marks as sent from another
// site (Sec-Fetch-Site, or an Origin that is not the console's host) is
// refused before the form is read, even with the session's cookie and
// token: the token alone would have had to leak for it to pass, and this
// does not rest on it (net/http.CrossOriginProtection).
func TestCrossOriginPostRefused(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	tok := r.csrf(t, ck)
	form := url.Values{"action": {"act-1"}, "decision": {"approve"}, "diff": {proposals.DiffSum("d")}, "csrf": {tok}}
	for name, h := range map[string]map[string]string{
		"cross-site":        {"Sec-Fetch-Site": "cross-site"},
		"same-site":         {"Sec-Fetch-Site": "same-site"},
		"another origin":    {"Origin": "http://evil.example"},
		"another port":      {"Origin": "http://example.com:8080"},
		"cross-site logout": {"Sec-Fetch-Site": "cross-site"},
	} {
		target := at(ck, "tasks/t1/decide")
		if strings.HasSuffix(name, "logout") {
			target = at(ck, "logout")
		}
		if w := r.do("POST", target, form, ck, h); w.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, w.Code)
		}
	}
	if len(r.dec.calls) != 0 {
		t.Fatalf("a cross-origin POST reached the decider: %v", r.dec.calls)
	}
	// The browser's own form: same-origin, or no such header (a client
	// that is not a browser).
	for name, h := range map[string]map[string]string{
		"same-origin": {"Sec-Fetch-Site": "same-origin"},
		"own origin":  {"Origin": "http://example.com"},
		"no header":   nil,
	} {
		if w := r.do("POST", at(ck, "tasks/t1/decide"), form, ck, h); w.Code != http.StatusSeeOther {
			t.Errorf("%s: %d, want 303", name, w.Code)
		}
	}
}

func TestDecide(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	tok := r.csrf(t, ck)
	post := func(v url.Values) *httptest.ResponseRecorder {
		v.Set("csrf", tok)
		return r.do("POST", at(ck, "tasks/t1/decide"), v, ck, nil)
	}
	if w := post(url.Values{"action": {"act-1"}, "decision": {"deny"}, "reason": {" not now "}}); w.Code != http.StatusSeeOther {
		t.Fatalf("deny: %d", w.Code)
	}
	if want := (decision{"t1", "act-1", executor.Host, false, "not now", ""}); r.dec.calls[0] != want {
		t.Fatalf("deny reached the decider as %v, want %v", r.dec.calls[0], want)
	}
	for _, tc := range []struct {
		form url.Values
		code int
		want string
	}{
		{url.Values{"action": {"act-1"}, "decision": {"maybe"}}, http.StatusBadRequest, `decision &#34;maybe&#34;: want approve or deny`},
		{url.Values{"decision": {"approve"}}, http.StatusBadRequest, "action: name the held action"},
		{url.Values{"action": {"act-1"}, "decision": {"deny"}, "reason": {strings.Repeat("x", 1025)}}, http.StatusBadRequest, "reason: at most 1024 bytes"},
	} {
		if w := post(tc.form); w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%v: %d, want %d with %q", tc.form, w.Code, tc.code, tc.want)
		}
	}
	if len(r.dec.calls) != 1 {
		t.Fatalf("refused forms reached the decider: %v", r.dec.calls)
	}
	// The decider's refusal is shown on the task page.
	r.dec.err = errors.New("task t1 is completed: the action it held can no longer be approved")
	if w := post(url.Values{"action": {"act-1"}, "decision": {"approve"}, "diff": {proposals.DiffSum("d")}}); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "can no longer be approved") {
		t.Fatalf("refused decision: %d", w.Code)
	}
	if w := r.do("GET", at(ck, "tasks/nope"), nil, ck, nil); w.Code != http.StatusNotFound {
		t.Fatalf("missing task: %d", w.Code)
	}
}

// The approve form names the diff it shows, and an approval that holds
// the action again (its files changed) is told as such, not "approved".
func TestApprovalNamesItsDiff(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	page := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil).Body.String()
	held, _ := fakeSource{}.Held(context.Background(), "t1")
	sum := proposals.DiffSum(held[0].Diff)
	if !strings.Contains(page, `name="diff" value="`+sum+`"`) {
		t.Fatalf("the approve form does not name the diff shown (%s)", sum)
	}
	r.dec.reheld = true
	w := r.do("POST", at(ck, "tasks/t1/decide"), url.Values{"csrf": {r.csrf(t, ck)}, "action": {"act-1"}, "decision": {"approve"}, "diff": {sum}}, ck, nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != at(ck, "tasks/t1?done=held-again&action=act-1") {
		t.Fatalf("approval held again: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if got := r.dec.calls[0]; !got.approve || got.diff != sum {
		t.Fatalf("the decision reached the decider as %+v", got)
	}
	if b := r.do("GET", at(ck, "tasks/t1?done=held-again"), nil, ck, nil).Body.String(); !strings.Contains(b, "nothing ran, and the action waits again with the new diff") {
		t.Fatal("the page does not say the action waits again")
	}
}

// An approval names the diff its page showed, or it is refused and
// nothing is decided: the console's approve form always carries the sum,
// so a form without one (or with something else) is not the page's, and
// an approval of "whatever the action holds now" is not the console's to
// take. A denial needs none (it changes nothing).
func TestApprovalWithoutItsDiffRefused(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	tok := r.csrf(t, ck)
	for name, diff := range map[string][]string{"no diff": nil, "empty": {""}, "not a sum": {"abc"}, "upper case": {strings.Repeat("AB", 32)}} {
		f := url.Values{"csrf": {tok}, "action": {"act-1"}, "decision": {"approve"}}
		if diff != nil {
			f["diff"] = diff
		}
		if w := r.do("POST", at(ck, "tasks/t1/decide"), f, ck, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "reload the page") {
			t.Errorf("%s: %d, want 400 saying to reload the page", name, w.Code)
		}
	}
	if len(r.dec.calls) != 0 {
		t.Fatalf("an approval naming no diff reached the decider: %v", r.dec.calls)
	}
	if w := r.do("POST", at(ck, "tasks/t1/decide"), url.Values{"csrf": {tok}, "action": {"act-1"}, "decision": {"deny"}}, ck, nil); w.Code != http.StatusSeeOther {
		t.Fatalf("a denial without a diff: %d, want 303", w.Code)
	}
}

// TestHostileText: text a peer wrote (its message, the status, artifacts,
// the diff, audit reasons) is shown inert on every page, and the pages
// forbid inline scripts besides. The task page is compared with a golden
// file (-update rewrites it).
func TestHostileText(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	for _, p := range []string{at(ck, ""), at(ck, "tasks/t1"), at(ck, "audit")} {
		w := r.do("GET", p, nil, ck, nil)
		body := w.Body.String()
		if w.Code != http.StatusOK || strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("%s: %d, the hostile markup is live:\n%s", p, w.Code, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;") {
			t.Errorf("%s does not show the hostile text escaped", p)
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: Content-Security-Policy %q", p, csp)
		}
	}
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	// A descriptor's bidi override and zero-width space are shown, never
	// applied, under a label that says whose words they are.
	if b := w.Body.String(); strings.ContainsAny(b, "\u202E\u202C\u200B") || !strings.Contains(b, "tidy ⟨U&#43;202E⟩txt.exe⟨U&#43;202C⟩ notes⟨U&#43;200B⟩") || !strings.Contains(b, "unverified") {
		t.Errorf("the requester's descriptor is not shown as it is, labelled:\n%s", b)
	}
	// So is an artifact's name.
	if b := w.Body.String(); !strings.Contains(b, "notes⟨U&#43;202E⟩txt.exe") {
		t.Errorf("the artifact's name is not shown as it is:\n%s", b)
	}
	// So is the action a model's answer named, kept as the model spelled
	// it (the executor judges it later).
	if b := w.Body.String(); !strings.Contains(b, "proposal · READ_FILE⟨U&#43;202E⟩</div>") {
		t.Errorf("the model's action is not shown as it is:\n%s", b)
	}
	// So are the held diff's: a CR cannot fake a line, nor an override
	// turn the text the file will hold around.
	if b := w.Body.String(); !strings.Contains(b, "&#43;fake line⟨U&#43;000D⟩&#43;ok ⟨U&#43;202E⟩txt.exe") {
		t.Errorf("the held diff's invisible characters are not shown:\n%s", b)
	}
	got := csrfRE.ReplaceAllString(w.Body.String(), `name="csrf" value="CSRF"`)
	got = strings.ReplaceAll(got, ck.Path, "/console/s/SESSION/")
	golden := filepath.Join("testdata", "task.golden.html")
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("the task page differs from %s (run with -update after checking):\n%s", golden, got)
	}
}

// TestMixedScriptPaths: a path one of whose words can pass for a Latin
// word it is not is marked wherever the task page names it for an
// operator deciding: a word that mixes scripts ("pаssword" with a
// Cyrillic а, a look-alike of password) or one wholly of look-alikes of
// Latin letters ("ѕсоре", all Cyrillic, reads as scope), its letters
// beyond ASCII spelled out, in the list of the paths the action changes
// (with a badge), the diff's file headers and the reason it waits. A line
// of the file's text is shown as it is, and a path in one script
// (Cyrillic, its extension apart) is not marked.
func TestMixedScriptPaths(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	b := w.Body.String()
	const (
		spelled = "p⟨U&#43;0430 Cyrillic⟩ssword.txt"
		scope   = "/sandbox/⟨U&#43;0455 Cyrillic⟩⟨U&#43;0441 Cyrillic⟩⟨U&#43;043E Cyrillic⟩⟨U&#43;0440 Cyrillic⟩⟨U&#43;0435 Cyrillic⟩/run.sh"
		badge   = ` <span class="mixed" title="a word of this path can pass for a Latin word it is not (it mixes letters of several scripts, or all its letters imitate Latin ones): its letters beyond ASCII are spelled out">look-alike letters</span>`
	)
	for _, want := range []string{
		`<li class="mono">/sandbox/reports/` + spelled + badge + `</li>`,
		`<li class="mono">/sandbox/отчёты/итоги.txt</li>`,
		`<li class="mono">` + scope + badge + `</li>`,
		"--- /sandbox/reports/" + spelled + "\n&#43;&#43;&#43; /sandbox/reports/" + spelled + "\n",
		"\n--- p\u0430ss\n",
		"&#43;&#43;&#43; /sandbox/отчёты/итоги.txt\n",
		"&#43;&#43;&#43; " + scope + "\n",
		"\n&#43;\u0455\u0441\u043e\u0440\u0435\n",
		"WRITE_FILE on /sandbox/reports/" + spelled + ", /sandbox/отчёты/итоги.txt, " + scope + ";",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("the task page does not show %q:\n%s", want, b)
		}
	}
	for _, as := range []string{"/sandbox/reports/p\u0430ssword", "/sandbox/\u0455\u0441\u043e\u0440\u0435/"} {
		if strings.Contains(b, as) {
			t.Errorf("the task page shows the look-alike path %s as it reads:\n%s", as, b)
		}
	}
}

// TestStepReasoning: the model's reasoning for a step is shown, folded
// (a <details> that is not open), beside the step and beside the held
// action that step proposed, as the console shows other model-supplied
// text: escaped, its invisible characters (a bidi override, an ANSI
// escape) spelled out as ⟨U+…⟩ and its look-alike words marked. Before,
// the console did not show it at all.
func TestStepReasoning(t *testing.T) {
	r := newRig(t, nil)
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	b := w.Body.String()
	const shown = "The notes go in p⟨U&#43;0430 Cyrillic⟩ssword.txt.&lt;/details&gt;&lt;script&gt;alert(2)&lt;/script&gt;\n⟨U&#43;202E⟩exe.txt ⟨U&#43;001B⟩[31mred⟨U&#43;001B⟩[0m"
	if n := strings.Count(b, shown); n != 2 {
		t.Errorf("the reasoning is shown %d times; want 2 (the step's and the held action's), as %q:\n%s", n, shown, b)
	}
	if strings.ContainsAny(b, "\u202E\x1b") || strings.Contains(b, "<script") || strings.Contains(b, "</details><script") {
		t.Errorf("the reasoning's markup or invisible characters are live:\n%s", b)
	}
	held := b[strings.Index(b, `<section class="held" id="held-act-1">`):]
	held = held[:strings.Index(held, "</section>")]
	if !strings.Contains(held, `<details class="reasoning">`) || !strings.Contains(held, shown) || !strings.Contains(held, "step #1") {
		t.Errorf("the held action does not show the reasoning of step #1, which proposed it:\n%s", held)
	}
	steps := b[strings.Index(b, `<ol class="steps">`):]
	if !strings.Contains(steps, `<details class="reasoning">`) || !strings.Contains(steps, shown) {
		t.Errorf("the steps do not show the reasoning:\n%s", steps)
	}
	if strings.Contains(b, "<details open") || strings.Contains(b, `class="reasoning" open`) {
		t.Errorf("the reasoning is not folded:\n%s", b)
	}
}

// The task list passes its filters to the source, bounded to the newest
// MaxTasks (and one more, to tell that some were left out), and asks for
// the tasks without their history and artifacts (Brief), which it does
// not show: 501 tasks of up to 1,000 messages each were read at every
// reload otherwise.
func TestTaskListFilters(t *testing.T) {
	var got []tasks.Filter
	r := newRig(t, func(c *console.Config) { c.Source = fakeSource{filters: &got} })
	ck := r.login(t)
	for _, tc := range []struct {
		query string
		want  tasks.Filter
		shown bool
	}{
		{"", tasks.Filter{Limit: console.MaxTasks + 1, Newest: true, Brief: true}, true},
		{"?state=input_required", tasks.Filter{States: []tasks.State{tasks.StateInputRequired}, Limit: console.MaxTasks + 1, Newest: true, Brief: true}, true},
		{"?state=completed&requester=+bc1pbob+", tasks.Filter{Owner: "bc1pbob", States: []tasks.State{tasks.StateCompleted}, Limit: console.MaxTasks + 1, Newest: true, Brief: true}, false},
	} {
		got = nil
		w := r.do("GET", at(ck, tc.query), nil, ck, nil)
		if w.Code != http.StatusOK || len(got) != 1 || fmt.Sprint(got[0]) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %d, filter %+v, want %+v", tc.query, w.Code, got, tc.want)
		}
		if shown := strings.Contains(w.Body.String(), `href="`+at(ck, "tasks/t1")+`"`); shown != tc.shown {
			t.Errorf("%q: task t1 listed %v, want %v", tc.query, shown, tc.shown)
		}
	}
	got = nil
	if w := r.do("GET", at(ck, "?state=sleeping"), nil, ck, nil); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "state &#34;sleeping&#34;") || len(got) != 0 {
		t.Errorf("an unknown state: %d %v", w.Code, got)
	}
}

// The metrics page shows the node's own series (snapnode_*), not the Go
// runtime's.
func TestMetricsPage(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "snapnode_messages_total", Help: "answered"}, []string{"method"})
	c.WithLabelValues("message/send").Add(3)
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "snapnode_verify_seconds", Help: "verify"})
	h.Observe(0.5)
	h.Observe(1.5)
	reg.MustRegister(c, h, prometheus.NewGauge(prometheus.GaugeOpts{Name: "go_other", Help: "not ours"}))
	r := newRig(t, func(cfg *console.Config) { cfg.Metrics = reg })
	ck := r.login(t)
	w := r.do("GET", at(ck, "metrics"), nil, ck, nil)
	body := w.Body.String()
	for _, want := range []string{"snapnode_messages_total", "method=message/send", "<td>3</td>", "snapnode_verify_seconds", "2 observed, mean 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("the metrics page lacks %q", want)
		}
	}
	if w.Code != http.StatusOK || strings.Contains(body, "go_other") {
		t.Errorf("metrics page: %d\n%s", w.Code, body)
	}
}

// A HEAD of the login link does not spend it: before, a link checker's
// HEAD logged in (and threw the session away), and the operator's browser
// then met "already used".
func TestLoginLinkSurvivesHead(t *testing.T) {
	r := newRig(t, nil)
	u := r.loginURL(t)
	if w := r.do("HEAD", u, nil, nil, nil); w.Code != http.StatusOK || len(w.Result().Cookies()) != 0 {
		t.Fatalf("HEAD of the login link: %d, cookies %v", w.Code, w.Result().Cookies())
	}
	w := r.do("GET", u, nil, nil, nil)
	if w.Code != http.StatusSeeOther || !homeRE.MatchString(w.Header().Get("Location")) {
		t.Fatalf("GET of the login link after a HEAD: %d to %q", w.Code, w.Header().Get("Location"))
	}
}

// The pages that send the operator for a login link name the command for
// this node (Config.LoginCommand), and the bare one by default.
func TestLoginCommandShown(t *testing.T) {
	const cmd = "snapnode console-url --data-dir /srv/node-2/data"
	r := newRig(t, func(c *console.Config) { c.LoginCommand = cmd })
	for _, p := range []string{"/console/", "/console/login?token=forged"} {
		if w := r.do("GET", p, nil, nil, nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), cmd) {
			t.Errorf("%s: %d, want 401 naming %q:\n%s", p, w.Code, cmd, w.Body)
		}
	}
	if w := newRig(t, nil).do("GET", "/console/", nil, nil, nil); !strings.Contains(w.Body.String(), "run: "+console.DefaultLoginCommand+" — ") {
		t.Errorf("default: %s", w.Body)
	}
}

// A login link used a second time has leaked (it is used once, and the
// operator got it alone): the second use is refused and logged, and the
// session the first use started is ended, as which of the two was the
// operator's is not known. Before, the second use met the page of an
// unknown link, and the first's session went on.
func TestLinkUsedTwiceEndsItsSession(t *testing.T) {
	var logged strings.Builder
	r := newRig(t, func(c *console.Config) { c.Logger = slog.New(slog.NewTextHandler(&logged, nil)) })
	u := r.loginURL(t)
	w := r.do("GET", u, nil, nil, nil)
	cks := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cks) != 1 {
		t.Fatalf("first use: %d %v", w.Code, cks)
	}
	other := r.login(t) // another session, of another link
	r.clock.Advance(30 * time.Second)
	if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), "already used") {
		t.Fatalf("second use: %d %v\n%s", w.Code, w.Result().Cookies(), w.Body)
	}
	if w := r.do("GET", at(cks[0], ""), nil, cks[0], nil); w.Code != http.StatusUnauthorized {
		t.Errorf("the first use's session after the second use: %d, want 401", w.Code)
	}
	if w := r.do("GET", at(other, ""), nil, other, nil); w.Code != http.StatusOK {
		t.Errorf("another link's session after the second use: %d, want 200", w.Code)
	}
	if !strings.Contains(logged.String(), "level=WARN msg=\"console: login refused: the link was used before") {
		t.Errorf("the second use is not logged as such:\n%s", logged.String())
	}
	// Once the link would have expired, it is just unknown.
	r.clock.Advance(time.Minute)
	if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "has been ended") {
		t.Errorf("use after the link's expiry: %d\n%s", w.Code, w.Body)
	}
}

// A link issued for a local user is spent only by a connection
// Config.PeerUser says is that user's: another user's, or one whose user
// is not known (a client on another machine), is refused with 403 and
// leaves the link to its user. A link for any user (AnyUser) is spent by
// any connection.
func TestLoginLinkForItsUser(t *testing.T) {
	var peer struct {
		uid int
		err error
	}
	var logged strings.Builder
	r := newRig(t, func(c *console.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		c.PeerUser = func(*http.Request) (int, error) { return peer.uid, peer.err }
	})
	link, _, err := r.c.LoginURL("http://127.0.0.1:7448", executor.Host, 1000)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.TrimPrefix(link, "http://127.0.0.1:7448")
	for _, p := range []struct {
		uid int
		err error
	}{{1001, nil}, {0, nil}, {1000, errors.New("no socket of this machine")}} {
		peer.uid, peer.err = p.uid, p.err
		if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusForbidden || len(w.Result().Cookies()) != 0 {
			t.Errorf("the link of uid 1000 brought by uid %d (%v): %d %v", p.uid, p.err, w.Code, w.Result().Cookies())
		}
	}
	if !strings.Contains(logged.String(), "level=WARN msg=\"console: login refused: the link was brought by another user") || !strings.Contains(logged.String(), "uid=1001") {
		t.Errorf("the refusals are not logged as such:\n%s", logged.String())
	}
	peer.uid, peer.err = 1000, nil
	if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusSeeOther || len(w.Result().Cookies()) != 1 {
		t.Fatalf("the link of uid 1000 brought by uid 1000, after the refusals: %d %v", w.Code, w.Result().Cookies())
	}
	peer.uid, peer.err = 0, errors.New("no socket of this machine")
	if w := r.do("GET", r.loginURL(t), nil, nil, nil); w.Code != http.StatusSeeOther {
		t.Errorf("a link for any user, brought by a connection of no known user: %d", w.Code)
	}
	if _, _, err := r.c.LoginURL("http://127.0.0.1:7448", executor.Host, -2); err == nil {
		t.Error("a link for uid -2 was issued")
	}
}

// A link issued for a user and spent by that user's connection is the
// operator's: another user's connection bringing it again (the threat
// the binding is for: a link read from a browser's command line) is
// refused with 403 as before its use, and does not end the operator's
// session. The same user's second use still ends it.
func TestSpentLinkOfAnotherUserKeepsTheSession(t *testing.T) {
	peer := struct {
		uid int
		err error
	}{uid: 1000}
	r := newRig(t, func(c *console.Config) {
		c.PeerUser = func(*http.Request) (int, error) { return peer.uid, peer.err }
	})
	link, _, err := r.c.LoginURL("http://127.0.0.1:7448", executor.Host, 1000)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.TrimPrefix(link, "http://127.0.0.1:7448")
	w := r.do("GET", u, nil, nil, nil)
	cks := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cks) != 1 {
		t.Fatalf("first use by uid 1000: %d %v", w.Code, cks)
	}
	for _, p := range []struct {
		uid int
		err error
	}{{1001, nil}, {0, errors.New("no socket of this machine")}} {
		peer.uid, peer.err = p.uid, p.err
		if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusForbidden {
			t.Errorf("the spent link of uid 1000 brought by uid %d (%v): %d, want 403", p.uid, p.err, w.Code)
		}
		if w := r.do("GET", at(cks[0], ""), nil, cks[0], nil); w.Code != http.StatusOK {
			t.Fatalf("the operator's session after uid %d (%v) brought the spent link: %d, want 200", p.uid, p.err, w.Code)
		}
	}
	peer.uid, peer.err = 1000, nil
	if w := r.do("GET", u, nil, nil, nil); w.Code != http.StatusUnauthorized {
		t.Errorf("second use by uid 1000: %d, want 401", w.Code)
	}
	if w := r.do("GET", at(cks[0], ""), nil, cks[0], nil); w.Code != http.StatusUnauthorized {
		t.Errorf("the session after uid 1000's second use: %d, want 401", w.Code)
	}
}
