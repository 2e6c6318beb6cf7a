package node_test

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// consoleSession is an operator logged in to a real node's console over
// HTTP, by the link `snapnode console-url` asks the admin socket for.
type consoleSession struct {
	base   string // the node's HTTP URL
	home   string // the page the login ended on: the session's task list
	jar    *cookiejar.Jar
	client *http.Client
}

func consoleLogin(t *testing.T, n *node.Node, dataDir string) *consoleSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"})
	var login struct{ URL string }
	if err != nil || json.Unmarshal(res, &login) != nil || login.URL == "" {
		t.Fatalf("console-url: %s %v", res, err)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &consoleSession{base: n.HTTPURL(), jar: jar, client: &http.Client{Jar: jar, Timeout: time.Minute}}
	resp, err := s.client.Get(login.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %s %v", resp.StatusCode, b, err)
	}
	s.home = resp.Request.URL.String()
	if !strings.HasSuffix(s.home, "/") || strings.Contains(s.home, "token") {
		t.Fatalf("the login ended on %s, want a task list without the token", s.home)
	}
	return s
}

func (s *consoleSession) get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := s.client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// approveForm returns the fields of the Approve form of actionID on the
// task page.
func (s *consoleSession) approveForm(t *testing.T, taskID, actionID string) url.Values {
	t.Helper()
	status, page := s.get(t, s.home+"tasks/"+taskID)
	if status != http.StatusOK {
		t.Fatalf("task page: %d %s", status, page)
	}
	field := func(name string) string {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no %s in the task page:\n%s", name, page)
		}
		return html.UnescapeString(m[1])
	}
	return url.Values{"csrf": {field("csrf")}, "action": {actionID}, "diff": {field("diff")}, "decision": {"approve"}}
}

// decide posts form to the task's decide URL and returns the page the
// browser ends on.
func (s *consoleSession) decide(t *testing.T, taskID string, form url.Values) (int, string) {
	t.Helper()
	resp, err := s.client.PostForm(s.home+"tasks/"+taskID+"/decide", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestConsoleApprovalThatFails: an approval the node carries out but
// whose action then fails (here the file a DELETE_FILE was held for is
// gone: its precondition no longer holds) is not reported as "The action
// was approved." on the task page the console ends on, while the task
// has failed and nothing ran: the notice says the approved action
// failed, and why, as the task's state and `snapnode approve` do.
func TestConsoleApprovalThatFails(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
	})
	defer stop()
	target := filepath.Join(dataDir, "sandbox", "notes.txt")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := newRequester(t, n.RelayURLs())
	held := taskOf(t, alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/notes.txt"}), false))
	actionID := regexp.MustCompile(`action (\S+):`).FindStringSubmatch(held.Status.Message)
	if held.Status.State != "input_required" || actionID == nil {
		t.Fatalf("the delete was not held: %s %q", held.Status.State, held.Status.Message)
	}
	s := consoleLogin(t, n, dataDir)
	form := s.approveForm(t, held.ID, actionID[1])
	if err := os.Remove(target); err != nil { // gone before the operator clicks
		t.Fatal(err)
	}
	status, page := s.decide(t, held.ID, form)
	state := regexp.MustCompile(`id="state">([a-z_]+)<`).FindStringSubmatch(page)
	notice := regexp.MustCompile(`id="notice">([^<]*)<`).FindStringSubmatch(page)
	if status != http.StatusOK || state == nil || state[1] != "failed" {
		t.Fatalf("after Approve: %d, state %v\n%s", status, state, page)
	}
	if notice == nil || !strings.Contains(notice[1], "failed") || strings.Contains(notice[1], "The action was approved.") {
		t.Errorf("after an approval whose action failed, the notice is %q", notice)
	}
}

// TestConsoleDoubleApproval: two Approve clicks of one held action at
// once (a double submit, two tabs) carry it out once: one ends on the
// task page, the other is refused (409), and the audit log has one
// confirmation and one promotion.
func TestConsoleDoubleApproval(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
	})
	defer stop()
	if err := os.WriteFile(filepath.Join(dataDir, "sandbox", "notes.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := newRequester(t, n.RelayURLs())
	held := taskOf(t, alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/notes.txt"}), false))
	actionID := regexp.MustCompile(`action (\S+):`).FindStringSubmatch(held.Status.Message)
	if held.Status.State != "input_required" || actionID == nil {
		t.Fatalf("the delete was not held: %s %q", held.Status.State, held.Status.Message)
	}
	s := consoleLogin(t, n, dataDir)
	form := s.approveForm(t, held.ID, actionID[1])
	statuses := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := s.client.PostForm(s.home+"tasks/"+held.ID+"/decide", form)
			if err != nil {
				t.Error(err)
				statuses <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	a, b := <-statuses, <-statuses
	if min(a, b) != http.StatusOK || max(a, b) != http.StatusConflict {
		t.Errorf("two approvals at once: %d and %d, want one 200 (after the redirect) and one 409", a, b)
	}
	var confirmed, promoted int
	if err := n.DB.R.QueryRow("SELECT count(*) FILTER (WHERE step = 'confirmed'), count(*) FILTER (WHERE step = 'promoted') FROM audit_log WHERE action = ?",
		actionID[1]).Scan(&confirmed, &promoted); err != nil {
		t.Fatal(err)
	}
	if confirmed != 1 || promoted != 1 {
		t.Errorf("audit log: %d confirmations, %d promotions; want one of each", confirmed, promoted)
	}
}

// TestAdminDenyReasonBound: a denial through the admin socket (snapnode
// deny --reason) whose reason is over the 1024 bytes a reason holds is
// refused, naming the bound, and the action still waits, as the console
// and a signed decision refuse it; before, it was carried out with the
// reason cut short without a word.
func TestAdminDenyReasonBound(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) { c.DataDir = dataDir })
	defer stop()
	if err := os.WriteFile(filepath.Join(dataDir, "sandbox", "notes.txt"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := newRequester(t, n.RelayURLs())
	held := taskOf(t, alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/notes.txt"}), false))
	if held.Status.State != "input_required" {
		t.Fatalf("the delete was not held: %s %q", held.Status.State, held.Status.Message)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "deny", Task: held.ID, Reason: strings.Repeat("no ", 342)})
	if err == nil || !strings.Contains(err.Error(), "1024") {
		t.Errorf("deny with a reason of 1026 bytes: %v", err)
	}
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "held", Task: held.ID})
	var list struct{ Actions []struct{ Action string } }
	if err != nil || json.Unmarshal(res, &list) != nil || len(list.Actions) != 1 {
		t.Errorf("held after the refused denial: %s %v", res, err)
	}
}
