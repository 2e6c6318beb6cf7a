package node_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/relay/embedded"
)

// newRefusingRelay serves an embedded relay on loopback that refuses
// ("blocked") every event not written by allowed, and returns its URL.
func newRefusingRelay(t *testing.T, allowed string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := embedded.New(embedded.Config{AcceptEvent: func(ev *nostr.Event) error {
		if ev.PubKey != allowed {
			return errors.New("pay first")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rel.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "ws://" + ln.Addr().String()
}

// scrapeSeries returns the values of the series url's /metrics serves,
// by their full name with labels as the text format writes them.
func scrapeSeries(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", url, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("series %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A node using a relay that refuses every one of its publications (a
// paid relay) shows it in /metrics: the relay's publish_failed counter
// rises with each refused answer, while the relay that takes them counts
// none. The relays' events are counted there too: those received, and the
// duplicates of a request that came by both relays.
func TestRelayPoolCountersInMetrics(t *testing.T) {
	good := newTestRelay(t)
	key, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	refusing := newRefusingRelay(t, key.NostrPublicKey()) // takes the requests, refuses the answers
	urls := []string{good.url(), refusing}
	alice := newRequesterWith(t, urls, key)
	n, _ := startNode(t, func(c *config.Config) {
		c.Relays = urls
		c.HTTPListen = "127.0.0.1:0"
		c.MonitorRate = 0 // scraped while the test waits
	})
	failed := func(url string) string { return `snapnode_relay_publish_failed_total{url="` + url + `"}` }
	received := func(url string) string { return `snapnode_relay_events_received_total{url="` + url + `"}` }
	dropped := func(reason, url string) string {
		return `snapnode_relay_events_dropped_total{reason="` + reason + `",url="` + url + `"}`
	}
	before := scrapeSeries(t, n.HTTPURL())[failed(refusing)] // the card, refused or not yet

	const requests = 3
	for i := range requests {
		if p := alice.call(t, n, "message/send", text("refused-"+strconv.Itoa(i)), false); p["task"] == nil {
			t.Fatalf("message/send: %v", p)
		}
	}
	// Each answer is refused by the one relay; its refusal may come after
	// the other relay's OK, and is counted then. Each request's second
	// copy, by the other relay, may come after its answer: the counters
	// of events received and duplicates are waited for too.
	// The assertions below say which count fell short, if one did.
	var series map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		series = scrapeSeries(t, n.HTTPURL())
		if series[failed(refusing)] >= before+requests &&
			series[received(good.url())] >= requests && series[received(refusing)] >= requests &&
			series[dropped("duplicate", good.url())]+series[dropped("duplicate", refusing)] >= requests ||
			time.Now().After(deadline) {
			break
		}
	}
	if got := series[failed(refusing)]; got < before+requests {
		t.Errorf("%s: %v, want at least %v", failed(refusing), got, before+requests)
	}
	if got, ok := series[failed(good.url())]; !ok || got != 0 {
		t.Errorf("%s: %v (served: %v), want 0", failed(good.url()), got, ok)
	}
	for _, url := range urls {
		if series[received(url)] < requests {
			t.Errorf("%s: %v, want at least %d", received(url), series[received(url)], requests)
		}
		for _, reason := range []string{"filter", "invalid", "duplicate"} {
			if _, ok := series[dropped(reason, url)]; !ok {
				t.Errorf("%s not served", dropped(reason, url))
			}
		}
	}
	// Each request came by both relays: the second copy is a duplicate.
	if dups := series[dropped("duplicate", good.url())] + series[dropped("duplicate", refusing)]; dups < requests {
		t.Errorf("%v duplicates counted, want at least %d", dups, requests)
	}
	if t.Failed() {
		t.Logf("scrape: %v", series)
	}
}
