package snaphttp_test

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snaphttp"
)

// Config.Metrics is served to clients on loopback only unless
// MetricsPublic: a server listening on every address, asked from the
// machine's address other than loopback, answers the 404 of a server
// without metrics (and logs the first such refusal, once). Before, any
// client read them.
func TestMetricsLoopbackOnly(t *testing.T) {
	addr := nettest.MachineIPv4(t)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "snap_up 1\n") })
	serve := func(t *testing.T, mutate func(*snaphttp.Config)) (port string, log *testutil.LockedBuffer) {
		log = new(testutil.LockedBuffer)
		e := startOn(t, "tcp4", "0.0.0.0:0", nil, func(c *snaphttp.Config) {
			c.Logger = slog.New(slog.NewTextHandler(log, nil))
			mutate(c)
		})
		_, port, _ = net.SplitHostPort(strings.TrimPrefix(e.base, "http://"))
		return port, log
	}
	get := func(t *testing.T, from, port string) (int, string) {
		t.Helper()
		dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
		client := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
		resp, err := client.Get("http://" + net.JoinHostPort(from, port) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	noMetrics, _ := serve(t, func(*snaphttp.Config) {})
	wantCode, want := get(t, "127.0.0.1", noMetrics)

	t.Run("default", func(t *testing.T) {
		port, log := serve(t, func(c *snaphttp.Config) { c.Metrics = metrics })
		if code, body := get(t, "127.0.0.1", port); code != 200 || body != "snap_up 1\n" {
			t.Errorf("from loopback: %d %q, want 200 and the metrics", code, body)
		}
		for range 2 {
			if code, body := get(t, addr, port); code != wantCode || body != want {
				t.Errorf("from %s: %d %q, want the answer of a server without metrics: %d %q", addr, code, body, wantCode, want)
			}
		}
		if n := strings.Count(log.String(), "/metrics answered 404 to a client off loopback"); n != 1 {
			t.Errorf("the refusal logged %d times, want once:\n%s", n, log.String())
		}
	})
	t.Run("public", func(t *testing.T) {
		port, log := serve(t, func(c *snaphttp.Config) { c.Metrics, c.MetricsPublic = metrics, true })
		for _, from := range []string{"127.0.0.1", addr} {
			if code, body := get(t, from, port); code != 200 || body != "snap_up 1\n" {
				t.Errorf("from %s with MetricsPublic: %d %q, want 200 and the metrics", from, code, body)
			}
		}
		if strings.Contains(log.String(), "/metrics answered 404") {
			t.Errorf("a refusal logged with MetricsPublic:\n%s", log.String())
		}
	})
}
