package node_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// BenchmarkHTTPFlood measures the node (`snapnode run`, its own process,
// with the common open-file limit of 1,024) under two attacks on its HTTP
// transport, with its caps and with them lifted (the node as it was
// before they existed):
//
//   - idle: 2,000 idle connections from 100 loopback addresses;
//   - bodies: 100 peers posting 10 MiB bodies at once, each again as soon
//     as it is answered (http_max_body raised to 10 MiB).
//
// Meanwhile a valid peer asks /healthz and sends a signed tasks/get, 20
// times each. It reports the node's peak RSS, the valid peer's slowest
// answer and its failures. Run:
//
//	go test ./internal/node -run '^$' -bench HTTPFlood -benchtime 1x
func BenchmarkHTTPFlood(b *testing.B) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		b.Skip("needs prlimit (util-linux) to give the node 1,024 open files")
	}
	lifted := []string{"--http-max-conns", "1000000", "--http-max-conns-per-peer", "1000000", "--http-body-memory", "1099511627776"}
	for _, attack := range []string{"idle", "bodies"} {
		for _, caps := range []string{"capped", "uncapped"} {
			b.Run(attack+"/"+caps, func(b *testing.B) {
				args := []string{"--http-listen", "127.0.0.1:0", "--http-rate", "0", "--identity-rate", "0", "--http-max-body", "10485760"}
				if caps == "uncapped" {
					args = append(args, lifted...)
				}
				for b.Loop() {
					httpFlood(b, attack, args)
				}
			})
		}
	}
}

func httpFlood(b *testing.B, attack string, args []string) {
	n := startNodeProcessVia(b, "", os.Stderr, []string{"prlimit", "--nofile=1024:1024"}, args...)
	base := strings.TrimSuffix(n.http, "/snap")
	hostport := strings.TrimPrefix(base, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	switch attack {
	case "idle":
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for i := range 2000 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.3.%d", 1+i%100))}, Timeout: 2 * time.Second}
			if c, err := d.Dial("tcp", hostport); err == nil {
				conns = append(conns, c)
			}
		}
	case "bodies":
		body := bytes.Repeat([]byte("a"), 10<<20)
		copy(body, `{"x":"`)
		copy(body[len(body)-2:], `"}`)
		for i := range 100 {
			wg.Go(func() {
				d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.4.%d", 1+i))}}
				hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/snap", bytes.NewReader(body))
					if resp, err := hc.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}
			})
		}
		time.Sleep(2 * time.Second) // let the bodies pile up
	}

	k, _ := identity.Generate()
	peer := client.NewHTTP(client.HTTPConfig{Key: k, HTTP: &http.Client{Timeout: 10 * time.Second}})
	hc := &http.Client{Timeout: 10 * time.Second}
	var slowest time.Duration
	var failed atomic.Int32
	for range 20 {
		start := time.Now()
		resp, err := hc.Get(base + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			failed.Add(1)
		}
		if err == nil {
			resp.Body.Close()
		}
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		m, err := peer.Send(rctx, n.http, &snap.Message{To: n.addr, Method: "tasks/get", Payload: []byte(`{"taskId":"no-such-task"}`)})
		rcancel()
		if err != nil || m.Type != snap.TypeResponse {
			failed.Add(1)
		}
		slowest = max(slowest, time.Since(start))
	}
	b.ReportMetric(float64(n.peakRSS(b)>>20), "peak-RSS-MiB")
	b.ReportMetric(float64(slowest.Milliseconds()), "slowest-valid-ms")
	b.ReportMetric(float64(failed.Load()), "valid-failures")
}
