package loadgen

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
)

// The transports a peer can use.
const (
	ViaNostr = "nostr"
	ViaHTTP  = "http"
	ViaWS    = "ws"
)

// Target is the node the peers drive and how they reach it.
type Target struct {
	// To is the node's address.
	To string
	// Relays carry the Nostr peers' requests; the node's card is found on
	// them.
	Relays []string
	// HTTP is the node's SNAP endpoints (http(s)://…/snap), one per
	// process when several serve one identity: HTTP peers post to them,
	// WebSocket peers use their ws(s):// form, the HTTP and WebSocket peers
	// taking the endpoints in turn.
	HTTP []string
	// Via lists the transports used, peers taking them in turn: nostr,
	// http, ws.
	Via []string
}

// Keys returns n identities: new random ones when seed is "", else the
// same ones for the same seed (PeerKey), so that a seeded store's owners
// can be the peers.
func Keys(n int, seed string) ([]*identity.Key, error) {
	keys := make([]*identity.Key, n)
	for i := range keys {
		var err error
		if seed == "" {
			keys[i], err = identity.Generate()
		} else {
			keys[i], err = PeerKey(seed, i)
		}
		if err != nil {
			return nil, fmt.Errorf("loadgen: key %d: %w", i, err)
		}
	}
	return keys, nil
}

// PeerKey is the i-th identity of seed: a key derived by hashing both. It
// is for load tests only: anyone who knows the seed has the key.
func PeerKey(seed string, i int) (*identity.Key, error) {
	for n := 0; ; n++ { // a hash that is not a valid secret is rehashed
		h := sha256.Sum256(fmt.Appendf(nil, "snapnode loadgen %s %d %d", seed, i, n))
		if k, err := identity.FromBytes(h[:]); err == nil || n == 10 {
			return k, err
		}
	}
}

// findTimeout bounds the look-up of the node's card on the relays.
const findTimeout = 15 * time.Second

// Dial makes one peer for each key, reaching t over the transports of
// t.Via in turn: each Nostr peer has a relay connection of its own, HTTP
// and WebSocket peers share a pool of keep-alive connections and take the
// endpoints of t.HTTP in turn. The node is
// looked up on the relays first when a peer uses Nostr (for 15 s at most).
// The connections last until ctx ends or closeAll is called.
func Dial(ctx context.Context, t Target, keys []*identity.Key, logger *slog.Logger) (peers []Peer, closeAll func(), err error) {
	if len(t.Via) == 0 {
		return nil, nil, errors.New("loadgen: no transport")
	}
	var closers []func()
	closeAll = func() {
		for _, c := range closers {
			c()
		}
	}
	var nostrTarget *client.Target
	var hc *http.Client
	httpPeers := 0 // the HTTP and WebSocket peers made so far
	for i, key := range keys {
		via := t.Via[i%len(t.Via)]
		var agent client.Transport
		switch via {
		case ViaNostr:
			relays := client.DialRelays(ctx, t.Relays, logger)
			closers = append(closers, relays.Close)
			if nostrTarget == nil {
				fctx, cancel := context.WithTimeout(ctx, findTimeout)
				found, _, err := relays.FindAgent(fctx, t.To)
				cancel()
				if err != nil {
					closeAll()
					return nil, nil, fmt.Errorf("loadgen: finding %s on the relays: %w", t.To, err)
				}
				nostrTarget = &found
			}
			agent = relays.Nostr(key, logger).To(*nostrTarget, false)
		case ViaHTTP, ViaWS:
			if len(t.HTTP) == 0 {
				closeAll()
				return nil, nil, fmt.Errorf("loadgen: %s needs the node's HTTP endpoint", via)
			}
			if hc == nil {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.MaxIdleConnsPerHost = len(keys)
				hc = &http.Client{Transport: tr}
				closers = append(closers, tr.CloseIdleConnections)
			}
			url := t.HTTP[httpPeers%len(t.HTTP)]
			httpPeers++
			if via == ViaWS {
				url = wsURL(url)
			}
			agent = client.NewHTTP(client.HTTPConfig{Key: key, HTTP: hc}).To(url, t.To)
		default:
			closeAll()
			return nil, nil, fmt.Errorf("loadgen: transport %q is not one of nostr, http, ws", via)
		}
		peers = append(peers, Peer{Via: via, Agent: agent})
	}
	return peers, closeAll, nil
}

// wsURL is the ws(s):// form of an http(s):// URL.
func wsURL(u string) string {
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		return "ws://" + rest
	}
	if rest, ok := strings.CutPrefix(u, "https://"); ok {
		return "wss://" + rest
	}
	return u
}
