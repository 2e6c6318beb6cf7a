package node_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/internal/config"
)

// TestConsoleCookieOnlyUnderItsSession: a browser sends a host's cookies
// to every port of it (cookies are scoped by host and path, not port), so
// a local user's web server on another loopback port, to which the
// operator's browser is lured, gets every cookie whose path its URL
// matches. The session cookie of a real login is scoped to the session's
// own prefix, /console/s/<segment>/, which only the login's redirect
// names: a cookie jar (net/http/cookiejar, RFC 6265's path matching,
// ports aside as a browser does) sends it to no /console URL of another
// port, nor to the node's console outside that prefix, which then asks
// for a login; under the prefix the console works, and a held action is
// approved through it. Before, the cookie's path was /console, and a
// server on 127.0.0.1:<other port> got it at /console/anything.
func TestConsoleCookieOnlyUnderItsSession(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
	})
	defer stop()
	target := filepath.Join(dataDir, "sandbox", "notes.txt")
	if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	alice := newRequester(t, n.RelayURLs())
	held := taskOf(t, alice.call(t, n, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/notes.txt"}), false))
	actionID := regexp.MustCompile(`action (\S+):`).FindStringSubmatch(held.Status.Message)
	if held.Status.State != "input_required" || actionID == nil {
		t.Fatalf("the delete was not held: %s %q", held.Status.State, held.Status.Message)
	}
	s := consoleLogin(t, n, dataDir)
	home, err := url.Parse(s.home)
	if err != nil {
		t.Fatal(err)
	}
	var session string
	for _, ck := range s.jar.Cookies(home) {
		if ck.Name == console.CookieName {
			session = ck.Value
		}
	}
	if session == "" || strings.Contains(s.home, session) {
		t.Fatalf("the session's page %s: cookie %q; want a cookie, not named in the URL", s.home, session)
	}

	// The lure: another server on the node's host, another port.
	seen := make(chan []*http.Cookie, 1)
	lure := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.CookiesNamed(console.CookieName)
	}))
	defer lure.Close()
	for _, p := range []string{"/console", "/console/", "/console/anything", "/console/tasks/" + held.ID, "/console/s/", "/console/s/guess/"} {
		if status, _ := s.get(t, lure.URL+p); status != http.StatusOK {
			t.Fatalf("the lure's %s: %d", p, status)
		}
		if got := <-seen; len(got) != 0 {
			t.Errorf("a server on another port of the node's host got the session cookie at %s: %v", p, got)
		}
	}
	// The node's console outside the session's prefix asks for a login.
	for _, p := range []string{"/console/", "/console/tasks/" + held.ID} {
		if status, page := s.get(t, s.base+p); status != http.StatusUnauthorized || !strings.Contains(page, "snapnode console-url") {
			t.Errorf("the console's %s with the session in the jar: %d, want 401 saying how to log in", p, status)
		}
	}

	// Under its prefix, the console works: the held action is approved.
	status, page := s.decide(t, held.ID, s.approveForm(t, held.ID, actionID[1]))
	state := regexp.MustCompile(`id="state">([a-z_]+)<`).FindStringSubmatch(page)
	if status != http.StatusOK || state == nil || state[1] != "completed" || !strings.Contains(page, "The action was approved.") {
		t.Fatalf("after Approve: %d, state %v\n%s", status, state, page)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("%s after the approved delete: %v", target, err)
	}
}
