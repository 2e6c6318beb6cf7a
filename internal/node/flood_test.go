package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// peakRSS returns the process's peak resident set (VmHWM) in bytes.
func (p *nodeProcess) peakRSS(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// forged returns a message/send from k to the node whose signature is
// random bytes: it passes every check but the signature's.
func forged(t testing.TB, n *nodeProcess, k *identity.Key, id string) []byte {
	t.Helper()
	sig := make([]byte, 64)
	rand.Read(sig)
	body, _ := json.Marshal(text("flood-" + id))
	m := &snap.Message{ID: id, Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
		From: k.Address(identity.Mainnet), To: n.addr, Payload: body, Timestamp: time.Now().Unix(), Sig: hex.EncodeToString(sig)}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// retrying makes a valid request as a client should under load: a 5003
// or 5002 answer is retried after its retryAfter, and an attempt with no
// answer in 15 s (a refusal the node could not send: it sends at most 32
// at once) is retried at once, with a new message. It returns the
// answer, the time from the first attempt, and the last error.
func retrying(ctx context.Context, retries *atomic.Int64, attempt func(context.Context) (map[string]any, error)) (map[string]any, time.Duration, error) {
	t0 := time.Now()
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		p, err := attempt(actx)
		cancel()
		code := errCode(p)
		again := (err != nil && actx.Err() != nil && ctx.Err() == nil) ||
			code == int(snap.CodeServiceUnavailable) || code == int(snap.CodeRateLimitExceeded)
		if !again || try == 20 {
			return p, time.Since(t0), err
		}
		retries.Add(1)
		if code != 0 {
			e, _ := p["error"].(map[string]any)
			d, _ := e["data"].(map[string]any)
			after, _ := d["retryAfter"].(float64)
			select {
			case <-time.After(time.Duration(after * float64(time.Second))):
			case <-ctx.Done():
				return p, time.Since(t0), ctx.Err()
			}
		}
	}
}

// The flood of issue 6: 20,000 requests with bad signatures from 400
// keys, half as Nostr events (each properly signed and sealed by its
// key, so only the SNAP signature fails) and half over HTTP from 100
// loopback addresses, while 50 valid requests are made over both. Every
// valid request gets its task (its client retrying as the spec advises,
// after a 5003 or a time-out: with more flood keys than the inbox queue
// holds, a valid key is one among equals); the node's memory stays
// bounded, and its peak RSS is reported.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("the flood runs for a minute or more; not with -short")
	}
	n := startNodeProcess(t, "", "--http-listen", "127.0.0.1:0")
	if n.http == "" {
		t.Fatal("the node serves no HTTP")
	}
	const (
		floodKeys   = 400
		perChannel  = 10_000
		httpSources = 100
		validEach   = 5 // requests per valid identity: 5 identities per transport
	)
	rssStart := n.peakRSS(t)
	keys := make([]*identity.Key, floodKeys)
	cks := make([][32]byte, floodKeys)
	for i := range keys {
		keys[i] = newKey(t)
		ck, err := nip44.GenerateConversationKey(n.pub, keys[i].NostrSecretKey())
		if err != nil {
			t.Fatal(err)
		}
		cks[i] = ck
	}
	// The Nostr flood is sealed and signed before it starts, so that it
	// arrives as fast as the relay takes it.
	events := make([][]byte, perChannel)
	var prep sync.WaitGroup
	for w := range 4 {
		prep.Go(func() {
			for i := w; i < perChannel; i += 4 {
				k := keys[i%floodKeys]
				content, err := nip44.Encrypt(string(forged(t, n, k, fmt.Sprintf("nostr-flood-%d", i))), cks[i%floodKeys])
				if err != nil {
					t.Error(err)
					return
				}
				ev := nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Tags: nostr.Tags{{"p", n.pub}}, Content: content}
				if err := ev.Sign(k.NostrSecretKey()); err != nil {
					t.Error(err)
					return
				}
				events[i], _ = json.Marshal([]any{"EVENT", ev})
			}
		})
	}
	prep.Wait()
	if t.Failed() {
		return
	}
	floodStart := time.Now()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var flood sync.WaitGroup
	var accepted, httpAnswered, httpLimited atomic.Int64
	started := make(chan struct{})
	var startOnce sync.Once
	// Nostr: 8 connections publishing as fast as they can.
	for c := range 8 {
		flood.Go(func() {
			conn, _, err := websocket.DefaultDialer.DialContext(ctx, n.ws, nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			mine := (perChannel - c + 7) / 8
			done := make(chan struct{})
			go func() {
				defer close(done)
				for range mine {
					_, msg, err := conn.ReadMessage()
					if err != nil {
						t.Errorf("relay connection: %v", err)
						return
					}
					if bytes.Contains(msg, []byte(`"OK"`)) && bytes.Contains(msg, []byte("true")) {
						accepted.Add(1)
					}
				}
			}()
			for i := c; i < perChannel; i += 8 {
				if err := conn.WriteMessage(websocket.TextMessage, events[i]); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
				if i > 500 {
					startOnce.Do(func() { close(started) })
				}
			}
			<-done
		})
	}
	// HTTP: 100 source addresses, 16 at a time.
	work := make(chan int, perChannel)
	for i := range perChannel {
		work <- i
	}
	close(work)
	clients := make([]*http.Client, httpSources)
	for i := range clients {
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(i+1))}
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext, MaxIdleConnsPerHost: 4}
		clients[i] = &http.Client{Transport: tr, Timeout: time.Minute}
		t.Cleanup(tr.CloseIdleConnections)
	}
	for range 16 {
		flood.Go(func() {
			for i := range work {
				raw := forged(t, n, keys[i%floodKeys], fmt.Sprintf("http-flood-%d", i))
				resp, err := clients[i%httpSources].Post(n.http, "application/json", bytes.NewReader(raw))
				if err != nil {
					t.Errorf("flood POST: %v", err)
					return
				}
				var got struct {
					Payload struct {
						Error struct{ Code int } `json:"error"`
					} `json:"payload"`
				}
				err = json.NewDecoder(resp.Body).Decode(&got)
				resp.Body.Close()
				switch {
				case resp.StatusCode == http.StatusTooManyRequests:
					httpLimited.Add(1)
				case err == nil && got.Payload.Error.Code == int(snap.CodeSignatureInvalid):
					httpAnswered.Add(1)
				default:
					t.Errorf("a forged POST: HTTP %d, code %d, %v", resp.StatusCode, got.Payload.Error.Code, err)
					return
				}
			}
		})
	}

	// The valid requests, once the flood is under way.
	<-started
	var valid sync.WaitGroup
	var served, retries atomic.Int64
	var slowest atomic.Int64
	check := func(kind string, i int, p map[string]any, err error, took time.Duration) {
		if err != nil || p["task"] == nil {
			t.Errorf("valid request %s %d: %v %v", kind, i, p, err)
			return
		}
		served.Add(1)
		for {
			s := slowest.Load()
			if int64(took) <= s || slowest.CompareAndSwap(s, int64(took)) {
				break
			}
		}
	}
	for v := range 5 {
		r := newRequesterWith(t, []string{n.ws}, newKey(t))
		target := client.Target{Address: n.addr, PubKey: n.pub}
		c := client.NewHTTP(client.HTTPConfig{Key: newKey(t)})
		senders := map[string]func(context.Context, []byte) (*snap.Message, error){
			"nostr": func(ctx context.Context, body []byte) (*snap.Message, error) {
				resp, err := r.client.Request(ctx, target, client.NostrRequest{Method: "message/send", Payload: body})
				if err != nil {
					return nil, err
				}
				return resp.Message, nil
			},
			"http": func(ctx context.Context, body []byte) (*snap.Message, error) {
				return c.Send(ctx, n.http, &snap.Message{To: n.addr, Method: "message/send", Payload: body})
			},
		}
		for kind, send := range senders {
			valid.Go(func() {
				for i := range validEach {
					body, _ := json.Marshal(text(fmt.Sprintf("valid-over-%s-%d-%d", kind, v, i)))
					p, took, err := retrying(ctx, &retries, func(ctx context.Context) (map[string]any, error) {
						resp, err := send(ctx, body)
						if err != nil {
							return nil, err
						}
						var p map[string]any
						return p, json.Unmarshal(resp.Payload, &p)
					})
					check(kind, v*validEach+i, p, err, took)
				}
			})
		}
	}
	valid.Wait()
	validDone := time.Since(floodStart)
	flood.Wait()
	floodDone := time.Since(floodStart)
	peak := n.peakRSS(t)
	if got := served.Load(); got != 50 {
		t.Errorf("%d of 50 valid requests served", got)
	}
	if got := accepted.Load(); got != perChannel {
		t.Errorf("the relay took %d of %d flood events", got, perChannel)
	}
	if httpAnswered.Load()+httpLimited.Load() != perChannel && !t.Failed() {
		t.Errorf("%d forged POSTs answered 2001 and %d limited, of %d", httpAnswered.Load(), httpLimited.Load(), perChannel)
	}
	t.Logf("flood: %d Nostr events taken by the relay; %d forged POSTs answered 2001, %d limited (429); %d valid requests served after %d retries, the slowest in %v",
		accepted.Load(), httpAnswered.Load(), httpLimited.Load(), served.Load(), retries.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
	t.Logf("the flood took %v; the valid requests were done %v after it began", floodDone.Round(time.Millisecond), validDone.Round(time.Millisecond))
	t.Logf("node peak RSS: %d MiB before the flood, %d MiB after", rssStart>>20, peak>>20)
	// Every buffer, queue and map of the node is bounded; a leak per
	// request would put 20,000 of them here.
	if peak > 512<<20 {
		t.Errorf("peak RSS %d MiB: memory is not bounded under the flood", peak>>20)
	}
}
