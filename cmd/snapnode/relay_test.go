package main

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
)

// `snapnode relay` serves a relay that stores events in its database and
// stops with status 0 on SIGTERM. On loopback it refuses web pages of
// other origins than loopback ones and those of --allowed-origin.
func TestRelayCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := testutil.Binary(t)
	cmd := exec.Command(bin, "relay", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "relay.db"), "--allowed-origin", "https://client.example")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^snapnode relay listening url=(ws://127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first line %q", line)
	}

	for origin, want := range map[string]int{"https://client.example": 101, "http://localhost:5173": 101, "https://evil.example": 403} {
		ws, resp, err := websocket.DefaultDialer.Dial(m[1], http.Header{"Origin": {origin}})
		if ws != nil {
			ws.Close()
		}
		if resp == nil {
			t.Fatalf("WebSocket from %s: %v", origin, err)
		}
		if resp.StatusCode != want {
			t.Errorf("WebSocket from %s: %d, want %d", origin, resp.StatusCode, want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{m[1]}, Logger: slog.New(slog.DiscardHandler)})
	pool.Start(ctx)
	defer pool.Close()
	ev := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Tags: nostr.Tags{{"skill", "relay-test"}}, Content: "stored"}
	ev.Sign(nostr.GeneratePrivateKey())
	if _, err := pool.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	got, err := pool.Query(ctx, nostr.Filter{Kinds: []int{1}, Tags: nostr.TagMap{"skill": {"relay-test"}}})
	if err != nil || len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("query by a multi-letter tag: %v, %v", got, err)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("relay did not stop after SIGTERM")
	}
}

// `snapnode relay --allowed-origins-file` takes the origins of its file
// with those of --allowed-origin, and reads the file again on SIGHUP,
// which does not end the relay: a changed list is in force from the next
// upgrade on, a list that does not parse leaves the one in force.
func TestRelayReloadsOrigins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	file := writeFile(t, dir, "origins", "# pages that may use the relay\nhttps://one.example\n\n", 0o600)
	cmd := exec.Command(testutil.Binary(t), "relay", "--listen", "127.0.0.1:0", "--db", ":memory:",
		"--allowed-origin", "https://flag.example", "--allowed-origins-file", file)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`^snapnode relay listening url=(ws://127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first line %q", line)
	}
	logs := bufio.NewScanner(stderr)
	// waitLog reads the relay's log up to a line holding want.
	waitLog := func(want string) {
		t.Helper()
		for logs.Scan() {
			if strings.Contains(logs.Text(), want) {
				return
			}
		}
		t.Fatalf("the relay's log ended before a line with %q: %v", want, logs.Err())
	}
	origins := func(want map[string]int) {
		t.Helper()
		for origin, code := range want {
			ws, resp, err := websocket.DefaultDialer.Dial(m[1], http.Header{"Origin": {origin}})
			if ws != nil {
				ws.Close()
			}
			if resp == nil {
				t.Fatalf("WebSocket from %s: %v", origin, err)
			}
			if resp.StatusCode != code {
				t.Errorf("WebSocket from %s: %d, want %d", origin, resp.StatusCode, code)
			}
		}
	}
	origins(map[string]int{"https://flag.example": 101, "https://one.example": 101, "https://two.example": 403})

	writeFile(t, dir, "origins", "https://two.example\n", 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog("allowed origins changed")
	origins(map[string]int{"https://flag.example": 101, "https://one.example": 403, "https://two.example": 101})

	writeFile(t, dir, "origins", "two.example\n", 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitLog("the list in force stays")
	origins(map[string]int{"https://flag.example": 101, "https://two.example": 101})
}

// A relay listening beyond loopback without --event-rate or
// --store-peer-share lets one client address flood it and push out
// every stored event: relayUnbounded names the flags it lacks, so that
// runRelay warns; on loopback (the default), where neither applies, it
// names none.
func TestRelayUnbounded(t *testing.T) {
	public := &net.TCPAddr{IP: net.IPv4zero, Port: 7447}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7447}
	for _, c := range []struct {
		addr net.Addr
		cfg  embedded.Config
		want []string
	}{
		{loop, embedded.Config{}, nil},
		{&net.TCPAddr{IP: net.IPv6loopback}, embedded.Config{}, nil},
		{public, embedded.Config{}, []string{"--event-rate", "--store-peer-share"}},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1")}, embedded.Config{EventsPerSecond: 20}, []string{"--store-peer-share"}},
		{public, embedded.Config{StorePeerShare: 0.01}, []string{"--event-rate"}},
		{public, embedded.Config{EventsPerSecond: 20, StorePeerShare: 0.01}, nil},
	} {
		if got := relayUnbounded(c.addr, c.cfg); !slices.Equal(got, c.want) {
			t.Errorf("%v %+v: %q, want %q", c.addr, c.cfg, got, c.want)
		}
	}
}
