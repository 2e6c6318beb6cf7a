package snap_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// A message/send whose replay record is left to its handler
// (Config.ClaimMethods) is answered exactly as one whose record the
// Validator wrote: the first answer, a replay in the same delivery (no
// answer, from either of two replicas), a retry in a new delivery and
// the id with another body (the first result, deduplicated), a late
// delivery of a duplicate (no answer), and a request the handler refused
// without writing the record (its refusal; a replay 2006, the record
// written by the Server after the handler). The handler's effect happens
// once. Only the responses' own ids and signatures differ.
func TestServerClaimAnswersAsValidation(t *testing.T) {
	run := func(t *testing.T, claim bool) (payloads []string, effects int) {
		replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
		r := snap.NewRouter()
		r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
			if strings.Contains(string(req.Payload), "refuse") {
				return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": "x"})
			}
			if c := req.Claim; c != nil {
				// As a store's write: the record, and the effect
				// only if it is fresh.
				prior, fresh, err := replay.Remember(ctx, c.From, c.ID, c.Record)
				if err != nil {
					return nil, err
				}
				if err := c.Claimed(prior, fresh); err != nil {
					if !errors.Is(err, snap.ErrClaimTaken) {
						t.Errorf("a taken claim: %v; want ErrClaimTaken", err)
					}
					return nil, err
				}
			}
			effects++
			return map[string]any{"task": map[string]any{"id": "task-" + req.ID}}, nil
		})
		var methods []string
		if claim {
			methods = []string{"message/send"}
		}
		self := keyB.Address(identity.Mainnet)
		replica := func() *snap.Server {
			return snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
				Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: replay, ClaimMethods: methods})})
		}
		a, b := replica(), replica()
		ctx := context.Background()
		answer := func(s *snap.Server, in snap.Inbound) {
			resp := s.Respond(ctx, in)
			if resp == nil {
				payloads = append(payloads, "(none)")
				return
			}
			payloads = append(payloads, string(resp.Payload))
		}
		raw := request(t, "c-1", "message/send", `{"n":1}`)
		answer(a, snap.Inbound{Raw: raw, Via: "ev-1"})
		answer(b, snap.Inbound{Raw: raw, Via: "ev-1"})
		answer(a, snap.Inbound{Raw: raw, Via: "ev-1"})
		answer(b, snap.Inbound{Raw: raw, Via: "ev-2"})
		answer(a, snap.Inbound{Raw: raw})
		answer(b, snap.Inbound{Raw: request(t, "c-1", "message/send", `{"n":2}`)})
		answer(b, snap.Inbound{Raw: request(t, "c-1", "message/send", `{"n":3}`), Via: "ev-3", Late: true})
		refused := request(t, "c-2", "message/send", `{"refuse":true}`)
		answer(a, snap.Inbound{Raw: refused, Via: "ev-4"})
		answer(b, snap.Inbound{Raw: refused, Via: "ev-5"})
		answer(b, snap.Inbound{Raw: request(t, "c-2", "message/send", `{"n":4}`)})
		// A new request delivered late is answered when recorded here.
		answer(b, snap.Inbound{Raw: request(t, "c-3", "message/send", `{"n":5}`), Via: "ev-6", Late: true})
		return payloads, effects
	}
	plain, plainEffects := run(t, false)
	claimed, claimedEffects := run(t, true)
	if plainEffects != 2 || claimedEffects != 2 {
		t.Errorf("the handler acted %d times, %d with claims; want 2 (c-1 and c-3)", plainEffects, claimedEffects)
	}
	if len(plain) != len(claimed) {
		t.Fatalf("%d answers, %d with claims", len(plain), len(claimed))
	}
	for i := range plain {
		if plain[i] != claimed[i] {
			t.Errorf("answer %d: %s with the record written by validation, %s by the handler", i, plain[i], claimed[i])
		}
	}
	if !strings.Contains(plain[3], `"deduplicated":true`) || plain[1] != "(none)" || !strings.Contains(plain[8], "2006") {
		t.Errorf("the answers are not those of duplicates: %q", plain)
	}
}

// A handler whose write carrying its claim committed but whose result was
// lost (PostgreSQL's connection dropped after the statement) returns an
// error with the claim pending; the Server then finds the request's own
// record, with its fingerprint and delivery. The requester is answered:
// with the result kept in that write, or 2006 saying that its id is
// spent when none was kept (not 5001, whose retry would be refused 2006)
// — not silence, which is for a second delivery of the same Nostr event
// only (here to another replica and to the same one, which did not
// write).
func TestClaimOwnWriteLostIsAnswered(t *testing.T) {
	for _, keep := range []bool{true, false} {
		replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
		r := snap.NewRouter()
		effects := 0
		r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
			c := req.Claim
			if done, err := writeWithClaim(ctx, t, c, replay, results, keep); !done {
				return nil, err
			}
			effects++
			// Committed, but the result did not come back.
			return nil, errors.New("driver: bad connection")
		})
		self := keyB.Address(identity.Mainnet)
		replica := func() *snap.Server {
			return snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
				Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: replay, ClaimMethods: []string{"message/send"}})})
		}
		a, b := replica(), replica()
		ctx := context.Background()
		raw := request(t, "c-1", "message/send", `{"n":1}`)
		resp := a.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1"})
		switch {
		case resp == nil:
			t.Errorf("keep %v: the request whose own write lost its result got no answer", keep)
		case keep && !strings.Contains(string(resp.Payload), `"task-1"`):
			t.Errorf("keep %v: answered %s; want the kept result", keep, resp.Payload)
		case !keep && !strings.Contains(string(resp.Payload), `"code":2006`):
			t.Errorf("keep %v: answered %s; want 2006", keep, resp.Payload)
		}
		for i, s := range []*snap.Server{b, a} {
			if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1"}); resp != nil {
				t.Errorf("keep %v: a second delivery of the same event (%d) answered %s; want none", keep, i, resp.Payload)
			}
		}
		if effects != 1 {
			t.Errorf("keep %v: %d effects; want 1", keep, effects)
		}
	}
}

// A handler whose write carrying its claim failed without effect (the
// database busy: the transaction rolled back) returns 5001 with the
// claim pending; the Server looks the record up rather than writing it,
// and the id stays unspent: a late delivery failing so is not answered,
// the requester's retry of the same message is processed, once, and a
// retry after that is answered as a duplicate with its result. A
// refusal (1001) still burns its id.
func TestClaimFailedWriteLeavesIDUnspent(t *testing.T) {
	replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
	r := snap.NewRouter()
	busy, effects := true, 0
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		c := req.Claim
		if c == nil {
			t.Fatal("no claim")
		}
		c.Writing()
		if busy {
			return nil, errors.New("database is locked")
		}
		prior, fresh, err := replay.Remember(ctx, c.From, c.ID, c.Record)
		if err != nil {
			return nil, err
		}
		if err := c.Claimed(prior, fresh); err != nil {
			return nil, err
		}
		effects++
		return map[string]any{"task": map[string]any{"id": "task-" + req.ID}}, nil
	})
	s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: replay, ClaimMethods: []string{"message/send"}})})
	ctx := context.Background()
	raw := request(t, "c-1", "message/send", `{"n":1}`)
	if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1"}); resp == nil || !strings.Contains(string(resp.Payload), "5001") {
		t.Fatalf("the failed write answered %s; want 5001", shown(resp))
	}
	if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1", Late: true}); resp != nil {
		t.Fatalf("a late delivery that failed so answered %s; want none", resp.Payload)
	}
	busy = false
	if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-2"}); resp == nil || !strings.Contains(string(resp.Payload), `"task-c-1"`) ||
		strings.Contains(string(resp.Payload), "deduplicated") {
		t.Fatalf("the retry answered %s; want the task, processed now", shown(resp))
	}
	if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-3"}); resp == nil || !strings.Contains(string(resp.Payload), `"deduplicated":true`) {
		t.Fatalf("a second retry answered %s; want the result, deduplicated", shown(resp))
	}
	if effects != 1 {
		t.Fatalf("%d effects; want 1", effects)
	}
}

// shown is a response's payload, for a test's message.
func shown(m *snap.Message) string {
	if m == nil {
		return "(none)"
	}
	return string(m.Payload)
}

// A request whose own write spent its id — its record written with its
// effect (Claimed), or found after that write's result was lost
// (Writing) — and whose handler then failed with an error SNAP tells a
// requester to retry (5001, 5002, 5003) is never answered so: its retry
// would be refused as a duplicate. On every transport (HTTP and
// WebSocket carry no delivery name, Nostr its event's id, a late Nostr
// delivery too) it gets the result its write kept, or a 2006 saying
// that its id is spent and what it did stands; a retry gets the same,
// and the effect is made once. A handler that failed before any write
// (the database busy) still answers 5001, its id unspent.
func TestClaimSpentThenFailedIsNotToldToRetry(t *testing.T) {
	type delivery struct {
		name        string
		first, next snap.Inbound
	}
	deliveries := []delivery{
		{"http", snap.Inbound{Transport: "http"}, snap.Inbound{Transport: "http"}},
		{"ws", snap.Inbound{Transport: "ws"}, snap.Inbound{Transport: "ws"}},
		{"nostr", snap.Inbound{Transport: "nostr", Via: "ev-1"}, snap.Inbound{Transport: "nostr", Via: "ev-2"}},
		{"nostr late", snap.Inbound{Transport: "nostr", Via: "ev-1", Late: true}, snap.Inbound{Transport: "nostr", Via: "ev-2"}},
	}
	for _, how := range []string{"committed", "lost"} {
		for _, method := range []string{"message/send", "tasks/cancel"} {
			for _, keep := range []bool{true, false} {
				if keep && method != "message/send" {
					continue
				}
				for _, d := range deliveries {
					name := how + "/" + method + "/" + map[bool]string{true: "kept", false: "none kept"}[keep] + "/" + d.name
					t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
						replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
						r := snap.NewRouter()
						effects := 0
						r.Handle(method, func(ctx context.Context, req *snap.Verified) (any, error) {
							c := req.Claim
							if done, err := writeWithClaim(ctx, t, c, replay, results, keep); !done {
								return nil, err
							}
							effects++
							if how == "committed" {
								c.Claimed(snap.ReplayRecord{}, true)
								// A step after the commit failed.
								return nil, snap.NewError(snap.CodeServiceUnavailable, "busy", nil)
							}
							// Committed, but the result did not come back.
							return nil, errors.New("driver: bad connection")
						})
						s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
							Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: replay,
								ClaimMethods: []string{"message/send", "tasks/cancel"}})})
						ctx := context.Background()
						raw := request(t, "c-1", method, `{"n":1}`)
						check := func(what string, resp *snap.Message) {
							t.Helper()
							p := shown(resp)
							switch {
							case resp == nil:
								t.Fatalf("%s: no answer", what)
							case keep && !strings.Contains(p, `"task-1"`):
								t.Fatalf("%s: answered %s; want the kept result", what, p)
							case !keep && !strings.Contains(p, `"code":2006`):
								t.Fatalf("%s: answered %s; want 2006, the id spent", what, p)
							}
						}
						first, next := d.first, d.next
						first.Raw, next.Raw = raw, raw
						check("the request", s.Respond(ctx, first))
						check("its retry", s.Respond(ctx, next))
						if effects != 1 {
							t.Fatalf("%d effects; want 1", effects)
						}
					})
				}
			}
		}
	}
}

// writeWithClaim is a handler's write carrying its replay record as the
// stores do: c.Writing, the record remembered in replay (a record found
// settles c as a duplicate, whose error is returned), and, with keep,
// the request's result kept in results. done reports a fresh write: the
// request's effect is the caller's to count.
func writeWithClaim(ctx context.Context, t *testing.T, c *snap.ReplayClaim, replay snap.ReplayStore, results snap.ResultStore, keep bool) (done bool, err error) {
	t.Helper()
	if c == nil {
		t.Fatal("no claim")
	}
	c.Writing()
	prior, fresh, err := replay.Remember(ctx, c.From, c.ID, c.Record)
	if err != nil {
		return false, err
	}
	if !fresh {
		return false, c.Claimed(prior, fresh)
	}
	if keep {
		if err := results.SaveResult(ctx, c.From, c.ID, []byte(`{"task":{"id":"task-1"}}`), c.Record.Expires); err != nil {
			t.Fatal(err)
		}
	}
	return true, nil
}
