package snap_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/snap"
)

// sharedNode is a node's two paths through one secp.Tables, as a node
// shares its relay.Verifier's with its Validator (Config.Tables): a
// request over Nostr has its event's signature, by the sender's
// internal key P, checked through the Tables as relay.Verifier.Verify
// does, then its message checked by ValidateSigned (P's table too); a
// request over HTTP has its message checked by Validate (the table of
// the output key Q that from names).
type sharedNode struct {
	t       *testing.T
	tables  *secp.Tables[[32]byte]
	v       *snap.Validator
	sent    int                            // messages so far, for distinct ids
	authors map[*identity.Key]*eventAuthor // the relay Verifier's authors
}

// eventAuthor is what a relay.Verifier keeps of an event author.
type eventAuthor struct {
	pub  *secp.PublicKey
	uses secp.Uses
}

func newSharedNode(t *testing.T, size int) *sharedNode {
	tables := secp.NewTables[[32]byte](size)
	return &sharedNode{
		t:       t,
		tables:  tables,
		v:       snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(t0, 0) }, Tables: tables}),
		authors: make(map[*identity.Key]*eventAuthor),
	}
}

// message returns a request signed by k, with an id of its own.
func (s *sharedNode) message(k *identity.Key) []byte {
	s.t.Helper()
	s.sent++
	m := &snap.Message{
		ID: fmt.Sprintf("m%d", s.sent), Version: "0.1", Type: snap.TypeRequest, Method: "message/send",
		From: k.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet),
		Payload:   []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`),
		Timestamp: t0,
	}
	if err := m.Sign(k); err != nil {
		s.t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// nostr is one request from k over Nostr.
func (s *sharedNode) nostr(k *identity.Key) {
	s.t.Helper()
	raw := s.message(k)
	a, ok := s.authors[k]
	if !ok {
		pub, err := secp.ParsePublicKey(k.InternalKey())
		if err != nil {
			s.t.Fatal(err)
		}
		a = &eventAuthor{pub: pub}
		s.authors[k] = a
	}
	id := sha256.Sum256(raw) // the event's id, as far as the Tables can tell
	sig, err := k.SignUntweaked(id)
	if err != nil {
		s.t.Fatal(err)
	}
	if !s.tables.Verify(k.InternalKey(), a.pub, &a.uses, id, sig) {
		s.t.Fatal("an event's good signature failed")
	}
	if _, err := s.v.ValidateSigned(context.Background(), raw, k.InternalKey()); err != nil {
		s.t.Fatal(err)
	}
}

// http is one request from k over HTTP.
func (s *sharedNode) http(k *identity.Key) {
	s.t.Helper()
	if _, err := s.v.Validate(context.Background(), s.message(k)); err != nil {
		s.t.Fatal(err)
	}
}

// holdsNostr reports whether k, a Nostr peer, holds its table (P's).
func (s *sharedNode) holdsNostr(k *identity.Key) bool {
	_, ok := s.tables.Get(k.InternalKey())
	return ok
}

// holdsHTTP reports whether k, an HTTP sender, holds its table (Q's).
func (s *sharedNode) holdsHTTP(k *identity.Key) bool {
	_, ok := s.tables.Get(k.OutputKey())
	return ok
}

// sharedKeys returns n distinct keys, named after prefix.
func sharedKeys(prefix string, n int) []*identity.Key {
	keys := make([]*identity.Key, n)
	for i := range keys {
		d := sha256.Sum256(fmt.Appendf(nil, "%s %d", prefix, i))
		keys[i] = mustKey(hex.EncodeToString(d[:]))
	}
	return keys
}

// A request over Nostr, whose event and message are both checked
// through its sender's table, moves the clock of idleness of the shared
// Tables once, as a request over HTTP does: a Nostr peer's table counts
// as idle after IdleVerifications(size) requests by others, not half as
// many. Before, each Nostr request ticked the clock twice, and a peer
// silent for 3/4 of that span of other peers' requests lost its table to
// a fresh key. The clock still runs: silent for more, it does lose it.
func TestNostrRequestTicksSharedTablesOnce(t *testing.T) {
	const size = 4
	idle := int(secp.IdleVerifications(size))
	s := newSharedNode(t, size)
	peers := sharedKeys("peer", size)
	for range secp.PromoteAfter {
		for _, p := range peers {
			s.nostr(p)
		}
	}
	for i, p := range peers {
		if !s.holdsNostr(p) {
			t.Fatalf("peer %d holds no table after %d requests", i, secp.PromoteAfter)
		}
	}
	fresh := sharedKeys("fresh", 1)[0]

	s.nostr(peers[0])
	others := idle * 3 / 4
	for i := range others {
		s.nostr(peers[1+i%(size-1)])
	}
	for range secp.PromoteAfter { // the fresh key asks for a table at the last
		s.http(fresh)
	}
	if !s.holdsNostr(peers[0]) || s.holdsHTTP(fresh) {
		t.Fatalf("after %d requests by other peers and %d by a fresh key (%d in all, idle after %d), "+
			"peer 0 holds its table: %v (want true), the fresh key one: %v (want false)",
			others, secp.PromoteAfter, others+secp.PromoteAfter, idle, s.holdsNostr(peers[0]), s.holdsHTTP(fresh))
	}

	for i := range idle / 4 {
		s.nostr(peers[1+i%(size-1)])
	}
	for range secp.PromoteAfter { // asks again at the last
		s.http(fresh)
	}
	if s.holdsNostr(peers[0]) || !s.holdsHTTP(fresh) {
		t.Fatalf("after more than %d requests by others, peer 0 holds its table: %v (want false), "+
			"the fresh key one: %v (want true)", idle, s.holdsNostr(peers[0]), s.holdsHTTP(fresh))
	}
	for i, p := range peers[1:] {
		if !s.holdsNostr(p) {
			t.Fatalf("busy peer %d lost its table", i+1)
		}
	}
}

// A flood of HTTP requests from fresh keys, each signing PromoteAfter
// messages (the cheapest way to earn a table), does not take the places
// of Nostr peers that keep sending: a table gives way only to a key
// idle for IdleVerifications(size) requests, however many keys earn one.
// Here the peers take turns to send a request after every 12 of the
// flood, so each is idle for about 51 requests (4 × 12 + 3), under the 64
// of size 4, and 54 when a Nostr request moved the clock twice. A peer that
// stops is replaced by a flood key once idle that long, and only it.
func TestHTTPFloodKeepsSteadyNostrPeersTables(t *testing.T) {
	const size, every, floodKeys = 4, 12, 32
	s := newSharedNode(t, size)
	peers := sharedKeys("peer", size)
	for range secp.PromoteAfter {
		for _, p := range peers {
			s.nostr(p)
		}
	}
	flood := sharedKeys("flood", floodKeys)
	sent, turn, stopped := 0, 0, -1
	floodFrom := func(keys []*identity.Key) {
		for _, f := range keys {
			for range secp.PromoteAfter {
				s.http(f)
				if sent++; sent%every == 0 {
					if turn%size != stopped { // a stopped peer's turn passes silent
						s.nostr(peers[turn%size])
					}
					turn++
				}
			}
		}
	}
	floodFrom(flood[:floodKeys/2])
	for i, p := range peers {
		if !s.holdsNostr(p) {
			t.Fatalf("steady peer %d lost its table to a flood of %d HTTP requests from %d fresh keys",
				i, sent, floodKeys/2)
		}
	}
	for i, f := range flood[:floodKeys/2] {
		if s.holdsHTTP(f) {
			t.Fatalf("flood key %d holds a table, every peer being busy", i)
		}
	}

	// Peer 3 stops; the others go on.
	stopped = size - 1
	floodFrom(flood[floodKeys/2:])
	if s.holdsNostr(peers[size-1]) {
		t.Fatal("a peer silent through a flood keeps its table")
	}
	for i, p := range peers[:size-1] {
		if !s.holdsNostr(p) {
			t.Fatalf("steady peer %d lost its table", i)
		}
	}
	if s.tables.Len() != size {
		t.Fatalf("%d tables held, want %d", s.tables.Len(), size)
	}
}
