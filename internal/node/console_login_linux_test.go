package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
)

// otherUser is the uid of TestConsoleLinkOnlyForItsUser's other local
// user (nobody).
const otherUser = 65534

// clientAs returns an HTTP client whose connections are opened as the
// local user uid: each socket is made on a thread of its own whose
// filesystem uid is uid (a socket belongs to the fsuid that created it,
// as /proc/net/tcp shows), the thread thrown away after. It needs root.
func clientAs(t *testing.T, uid int) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			// Never unlocked: the thread ends with the goroutine, its
			// fsuid with it.
			runtime.LockOSThread()
			syscall.Setfsuid(uid)
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			done <- result{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
	return &http.Client{
		Jar:       jar,
		Timeout:   time.Minute,
		Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// TestConsoleLinkOnlyForItsUser: the login link is a secret that can leak
// to another local user of the machine (a browser started with it on its
// command line shows it in /proc/<pid>/cmdline to all; a copy in a file,
// a terminal's scrollback); on Linux it is spent only by a connection of
// the user it was issued for (the socket's owner in /proc/net/tcp), here
// root, who asked for it. Another user's GET of it is refused, logs in
// nobody and leaves the link to the operator, whose browser then logs in.
// Before, whoever sent the link first got the session: another user's
// client was logged in, and the operator's browser was refused.
func TestConsoleLinkOnlyForItsUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to open a connection as another user")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	n, stop := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "console-url"})
	var login struct{ URL string }
	if err != nil || json.Unmarshal(res, &login) != nil || login.URL == "" {
		t.Fatalf("console-url: %s %v", res, err)
	}

	get := func(c *http.Client, u string) (int, string) {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Location")
	}
	other := clientAs(t, otherUser)
	if status, loc := get(other, login.URL); status != http.StatusForbidden {
		t.Errorf("another local user's GET of the link: %d (to %q), want 403", status, loc)
		if strings.HasPrefix(loc, "/console/s/") {
			if status, _ := get(other, n.HTTPURL()+loc); status == http.StatusOK {
				t.Errorf("another local user is logged in to the console, at %s", loc)
			}
		}
	}
	operator := clientAs(t, 0)
	status, loc := get(operator, login.URL)
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/s/") {
		t.Fatalf("the operator's GET of the link, after the other user's: %d (to %q), want a login", status, loc)
	}
	if status, _ := get(operator, n.HTTPURL()+loc); status != http.StatusOK {
		t.Errorf("the operator's session page: %d", status)
	}
}
