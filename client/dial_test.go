package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// refusals records the addresses a client's NetConfig.OnRefused was told of.
type refusals struct {
	mu    sync.Mutex
	addrs []netip.AddrPort
}

func (r *refusals) add(a netip.AddrPort) {
	r.mu.Lock()
	r.addrs = append(r.addrs, a)
	r.mu.Unlock()
}

func (r *refusals) get() []netip.AddrPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.AddrPort(nil), r.addrs...)
}

// A client with RefusePrivate connects to no address of the classes an
// agent's card must not make the node reach: loopback, link-local,
// private (RFC 1918, ULA), unspecified and multicast, in IPv4, IPv6 and
// IPv4-mapped form. The check is in the dialer, on the address the name
// resolved to: "localhost" is refused as 127.0.0.1 is. Each refusal wraps
// ErrPrivateAddress and is reported to OnRefused.
func TestRefusePrivateAddresses(t *testing.T) {
	for _, tc := range []struct{ class, host string }{
		{"loopback", "127.0.0.1"},
		{"loopback", "127.9.9.9"},
		{"loopback", "[::1]"},
		{"loopback", "localhost"},
		{"loopback", "[::ffff:127.0.0.1]"},
		{"link-local", "169.254.169.254"},
		{"link-local", "[fe80::1]"},
		{"private", "10.1.2.3"},
		{"private", "172.16.0.1"},
		{"private", "172.31.255.254"},
		{"private", "192.168.1.1"},
		{"private", "[fd00::1]"},
		{"private", "[::ffff:10.0.0.1]"},
		{"unspecified", "0.0.0.0"},
		{"unspecified", "[::]"},
		{"multicast", "224.0.0.1"},
		{"multicast", "239.1.2.3"},
		{"multicast", "[ff02::1]"},
		// Shared address space (RFC 6598): carrier-grade NAT, and the
		// metadata service of some clouds (100.100.100.200).
		{"shared", "100.64.0.1"},
		{"shared", "100.100.100.200"},
		{"shared", "100.127.255.254"},
		{"shared", "[::ffff:100.100.100.200]"},
		// An IPv4 address written in IPv6 through NAT64 (RFC 6052's
		// well-known prefix), 6to4 (RFC 3056) or the IPv4-compatible form:
		// the embedded address is the one reached.
		{"loopback", "[64:ff9b::7f00:1]"},
		{"link-local", "[64:ff9b::a9fe:a9fe]"},
		{"private", "[64:ff9b::10.0.0.1]"},
		{"shared", "[64:ff9b::100.64.0.1]"},
		{"private", "[2002:c0a8:101::1]"},
		{"loopback", "[::127.0.0.1]"},
		// The local-use NAT64 prefix (RFC 8215) maps as its site decides.
		{"NAT64", "[64:ff9b:1::a00:1]"},
		{"reserved", "240.0.0.1"},
		{"reserved", "255.255.255.255"},
	} {
		t.Run(tc.class+" "+tc.host, func(t *testing.T) {
			var got refusals
			c := client.NewHTTP(client.HTTPConfig{Key: clientKey, Net: client.NetConfig{RefusePrivate: true, OnRefused: got.add}})
			_, err := c.Send(context.Background(), "http://"+tc.host+":7448/snap", &snap.Message{To: addr(serverKey), Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
			if !errors.Is(err, client.ErrPrivateAddress) || !strings.Contains(err.Error(), tc.class) {
				t.Fatalf("error %v; want ErrPrivateAddress naming %s", err, tc.class)
			}
			if r := got.get(); len(r) == 0 || r[0].Port() != 7448 {
				t.Errorf("OnRefused got %v", r)
			}
		})
	}
}

// The IPv4 special-purpose blocks IANA marks as not globally reachable,
// besides those above, are refused too: the IETF protocol assignments
// (192.0.0.0/24, where a cloud's legacy metadata service answers at
// 192.0.0.192), benchmarking (198.18.0.0/15, which networks use inside)
// and the documentation ranges; and in IPv6 the deprecated site-local
// prefix (fec0::/10), which a site may still route inside, and the
// documentation prefix. Before, each was dialed as a public address.
func TestRefuseSpecialPurposeAddresses(t *testing.T) {
	for _, tc := range []struct{ class, host string }{
		{"IETF protocol assignments", "192.0.0.192"},
		{"IETF protocol assignments", "192.0.0.1"},
		{"IETF protocol assignments", "[::ffff:192.0.0.192]"},
		{"IETF protocol assignments", "[64:ff9b::c000:c0]"},
		{"benchmarking", "198.18.0.1"},
		{"benchmarking", "198.19.255.254"},
		{"documentation", "192.0.2.1"},
		{"documentation", "198.51.100.7"},
		{"documentation", "203.0.113.9"},
		{"documentation", "[2001:db8::1]"},
		{"site-local", "[fec0::1]"},
		{"site-local", "[feff::1]"},
	} {
		t.Run(tc.class+" "+tc.host, func(t *testing.T) {
			t.Parallel()
			// A refusal is at once; a dial of the address would wait.
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			var got refusals
			c := client.NewHTTP(client.HTTPConfig{Key: clientKey, Net: client.NetConfig{RefusePrivate: true, OnRefused: got.add}})
			_, err := c.Send(ctx, "http://"+tc.host+":7448/snap", &snap.Message{To: addr(serverKey), Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
			if !errors.Is(err, client.ErrPrivateAddress) || !strings.Contains(err.Error(), tc.class) {
				t.Fatalf("error %v; want ErrPrivateAddress naming %s", err, tc.class)
			}
			if r := got.get(); len(r) == 0 || r[0].Port() != 7448 {
				t.Errorf("OnRefused got %v", r)
			}
		})
	}
}

// Without RefusePrivate (the default) a loopback endpoint is reached; with
// it, the server never sees a connection, over HTTP or WebSocket.
func TestRefusePrivateNeverConnects(t *testing.T) {
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	req := func() *snap.Message {
		return &snap.Message{To: addr(serverKey), Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)}
	}
	ctx := context.Background()
	refused := client.NewHTTP(client.HTTPConfig{Key: clientKey, Net: client.NetConfig{RefusePrivate: true}})
	if _, err := refused.Send(ctx, ts.URL+"/snap", req()); !errors.Is(err, client.ErrPrivateAddress) {
		t.Errorf("POST: %v; want ErrPrivateAddress", err)
	}
	if _, err := refused.SendWS(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/snap", req()); !errors.Is(err, client.ErrPrivateAddress) {
		t.Errorf("WebSocket: %v; want ErrPrivateAddress", err)
	}
	if n := conns.Load(); n != 0 {
		t.Errorf("the server saw %d connections; want none", n)
	}
	_, err := client.NewHTTP(client.HTTPConfig{Key: clientKey}).Send(ctx, ts.URL+"/snap", req())
	if st, ok := errors.AsType[*client.StatusError](err); !ok || st.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("allowed: %v; want the server's 503", err)
	}
}

// A refused endpoint is not tried again: the card's next transport is
// tried at once, Nostr in the end; FallbackConfig.OnRefused is told which
// endpoint, and why.
func TestFallbackSkipsRefusedEndpoint(t *testing.T) {
	log := &attempts{}
	var got refusals
	card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: "http://127.0.0.1:1/snap"}}, "wss://relay.example")
	h := client.NewHTTP(client.HTTPConfig{Key: clientKey, Net: client.NetConfig{RefusePrivate: true, OnRefused: got.add}})
	var told []string
	cfg := quickFallback
	cfg.OnRefused = func(endpoint string, err error) {
		if !errors.Is(err, client.ErrPrivateAddress) {
			t.Errorf("OnRefused(%s, %v): not ErrPrivateAddress", endpoint, err)
		}
		told = append(told, endpoint)
	}
	agent, err := client.ToCard(card, h, nostrStub{log: log}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := agent.Send(t.Context(), "tasks/get", []byte(`{"taskId":"t"}`))
	if err != nil || string(resp.Payload) != `{"via":"nostr"}` {
		t.Fatalf("%v, %v; want Nostr's answer", resp, err)
	}
	if r := got.get(); len(r) != 1 {
		t.Errorf("refused %v; want one attempt, no retry", r)
	}
	if len(told) != 1 || told[0] != "http://127.0.0.1:1/snap" {
		t.Errorf("OnRefused told %q; want the endpoint once", told)
	}
}

// The client NewHTTP makes follows no redirect when NoRedirects is set,
// not even a host's move to https.
func TestNoRedirects(t *testing.T) {
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "https://"+r.Host+"/snap", http.StatusPermanentRedirect)
	}))
	t.Cleanup(ts.Close)
	c := client.NewHTTP(client.HTTPConfig{Key: clientKey, Net: client.NetConfig{NoRedirects: true}})
	_, err := c.Send(context.Background(), ts.URL+"/snap", &snap.Message{To: addr(serverKey), Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
	if st, ok := errors.AsType[*client.StatusError](err); !ok || st.StatusCode != http.StatusPermanentRedirect {
		t.Errorf("%v; want the 308 as a StatusError", err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("%d requests; want 1", n)
	}
}
