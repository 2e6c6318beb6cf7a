package sqlstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Two replicas on one database, each with its own snap.Server, Validator
// (its own seen cache) and tasks.Service, serve copies of one signed
// message/send at once, some with another body under the same id and
// some whose context is canceled mid-way: exactly one task is created,
// its record exists, and every answer that carries a task carries that
// one. Copies of a message to the task then add it to the history once.
func TestClaimRacedThroughReplicas(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		node, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		peer, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		self, from := node.Address(identity.Mainnet), peer.Address(identity.Mainnet)
		type replica struct {
			store *Store
			srv   *snap.Server
		}
		var reps []replica
		for range 2 {
			s := open(t, dsn, Options{})
			v := snap.NewValidator(snap.Config{Self: self, Replay: s.ReplayStoreNoSync(), ClaimMethods: []string{"message/send"}})
			svc := tasks.NewService(s, tasks.ServiceOptions{KeepResults: v.Retention(), Logger: slog.New(slog.DiscardHandler)})
			router := snap.NewRouter()
			svc.Register(router, nil)
			reps = append(reps, replica{s, snap.NewServer(snap.ServerConfig{Key: node, Router: router, Validator: v,
				Results: s.ReplayStore(), Logger: slog.New(slog.DiscardHandler)})})
		}
		request := func(id, payload string) []byte {
			m := &snap.Message{ID: id, Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
				From: from, To: self, Timestamp: time.Now().Unix(), Payload: []byte(payload)}
			if err := m.Sign(peer); err != nil {
				t.Fatal(err)
			}
			raw, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		taskOf := func(resp *snap.Message) string {
			if resp == nil {
				return ""
			}
			var p struct {
				Task struct{ ID string } `json:"task"`
			}
			_ = json.Unmarshal(resp.Payload, &p)
			return p.Task.ID
		}
		race := func(copies [][]byte) []string {
			const rounds = 4
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				ids []string
			)
			for r := range rounds {
				for i, raw := range copies {
					wg.Go(func() {
						ctx := context.Background()
						if (r+i)%5 == 4 {
							c, cancel := context.WithCancel(ctx)
							go cancel() // canceled at any point of the request
							ctx = c
						}
						resp := reps[(r+i)%2].srv.Respond(ctx, snap.Inbound{Raw: raw})
						mu.Lock()
						ids = append(ids, taskOf(resp))
						mu.Unlock()
					})
				}
			}
			wg.Wait()
			return ids
		}
		owned := func() []*tasks.Task {
			t.Helper()
			all, err := reps[0].store.List(context.Background(), tasks.Filter{Owner: from})
			if err != nil {
				t.Fatal(err)
			}
			return all
		}

		id := snap.NewID()
		copies := [][]byte{
			request(id, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"one"}]}}`),
			request(id, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"one"}]}}`),
			request(id, `{"message":{"messageId":"m1","role":"user","parts":[{"text":"another body"}]}}`),
		}
		answers := race(copies)
		all := owned()
		if len(all) != 1 {
			t.Fatalf("%d tasks from one request id raced through two replicas; want 1", len(all))
		}
		task := all[0].ID
		for _, got := range answers {
			if got != "" && got != task {
				t.Fatalf("an answer carries task %s; only %s exists", got, task)
			}
		}
		if _, ok, err := reps[1].store.ReplayStore().Lookup(context.Background(), from, id, time.Now()); err != nil || !ok {
			t.Fatalf("the task's request has no record: %v %v", ok, err)
		}

		id = snap.NewID()
		more := fmt.Sprintf(`{"taskId":%q,"message":{"messageId":"m2","role":"user","parts":[{"text":"more"}]}}`, task)
		race([][]byte{request(id, more), request(id, more)})
		got, err := reps[0].store.Get(context.Background(), task)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.History); n != 2 {
			t.Fatalf("a message to the task raced through two replicas: %d messages; want 2", n)
		}
	})
}

// An expired record claimed at once by many writers, some creating a
// task with the claim (CreateKeeping), others remembering it alone (as a
// message to an existing task does), from two stores on one database:
// exactly one of them gets it.
func TestExpiredClaimRaced(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		stores := []*Store{open(t, dsn, Options{}), open(t, dsn, Options{})}
		const from = "bc1pfrom"
		for round := range 5 {
			id := fmt.Sprintf("m%d", round)
			if _, fresh, err := stores[0].ReplayStore().Remember(ctx, from, id, record(t0, time.Minute, 1)); err != nil || !fresh {
				t.Fatalf("first record: %v %v", fresh, err)
			}
			later := t0.Add(time.Hour)
			const racers = 16
			var (
				won atomic.Int32
				wg  sync.WaitGroup
			)
			for i := range racers {
				wg.Go(func() {
					s := stores[i%2]
					rec := record(later, time.Minute, byte(10+i))
					if i%3 == 0 {
						_, fresh, err := s.ReplayStoreNoSync().Remember(ctx, from, id, rec)
						if err != nil {
							t.Error(err)
						}
						if fresh {
							won.Add(1)
						}
						return
					}
					c := &snap.ReplayClaim{From: from, ID: id, Record: rec}
					_, err := s.CreateKeeping(ctx, task(fmt.Sprintf("r%d-%d", round, i), from),
						tasks.KeptResult{From: from, RequestID: id, Result: []byte(`{}`), Expires: later.Add(time.Minute), Claim: c})
					switch {
					case err == nil:
						won.Add(1)
					case !errors.Is(err, snap.ErrClaimTaken):
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if n := won.Load(); n != 1 {
				t.Fatalf("round %d: %d writers got one expired record; want 1", round, n)
			}
		}
	})
}

// panickingAgent panics when handed a task: the handler panics after the
// task was created with its claim.
type panickingAgent struct{ took atomic.Int32 }

func (a *panickingAgent) Take(context.Context, *tasks.Task) error {
	a.took.Add(1)
	panic("agent bug")
}

// A handler that panics after its task was stored (the agent's Take, run
// once the task exists) is answered 5001 by the Server's recovery, and its
// request's record was written with the task: a replay creates no second
// task and reaches the agent no second time, answered with the first
// result, deduplicated.
func TestClaimHandlerPanicsAfterItsEffect(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		node, _ := identity.Generate()
		peer, _ := identity.Generate()
		self, from := node.Address(identity.Mainnet), peer.Address(identity.Mainnet)
		s := open(t, dsn, Options{})
		agent := &panickingAgent{}
		v := snap.NewValidator(snap.Config{Self: self, Replay: s.ReplayStoreNoSync(), ClaimMethods: []string{"message/send"}})
		svc := tasks.NewService(s, tasks.ServiceOptions{KeepResults: v.Retention(), Agent: agent, Logger: slog.New(slog.DiscardHandler)})
		router := snap.NewRouter()
		svc.Register(router, nil)
		srv := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Validator: v, Results: s.ReplayStore(), Logger: slog.New(slog.DiscardHandler)})
		m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
			From: from, To: self, Timestamp: time.Now().Unix(), Payload: []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`)}
		if err := m.Sign(peer); err != nil {
			t.Fatal(err)
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if resp := srv.Respond(ctx, snap.Inbound{Raw: raw}); resp == nil || !json.Valid(resp.Payload) {
			t.Fatalf("first answer %v", resp)
		}
		// A second server, whose seen cache has not seen it, as a replica.
		v2 := snap.NewValidator(snap.Config{Self: self, Replay: s.ReplayStoreNoSync(), ClaimMethods: []string{"message/send"}})
		srv2 := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Validator: v2, Results: s.ReplayStore(), Logger: slog.New(slog.DiscardHandler)})
		resp := srv2.Respond(ctx, snap.Inbound{Raw: raw})
		var p map[string]any
		if resp == nil || json.Unmarshal(resp.Payload, &p) != nil || p["deduplicated"] != true {
			t.Fatalf("replay after a panic: %v; want the first result, deduplicated", resp)
		}
		all, err := s.List(ctx, tasks.Filter{Owner: from})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || agent.took.Load() != 1 {
			t.Fatalf("%d tasks, %d takes by the agent; want 1 and 1", len(all), agent.took.Load())
		}
	})
}
