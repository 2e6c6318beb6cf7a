package tasks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// With its replay record left to the handler (snap.Config.ClaimMethods),
// a message/send on a store that keeps no results writes the record
// before it creates the task, and a message to an existing task writes
// it before the message is added: a copy reaching a second server (a
// replica sharing the replay store, whose cache has not seen it) adds
// nothing and is answered as a duplicate, with the first result.
func TestSendWritesItsClaimBeforeActing(t *testing.T) {
	r := newClaimRig(t)
	store := tasks.NewMemoryStore(tasks.MemoryStoreOptions{})
	svc := tasks.NewService(store, tasks.ServiceOptions{Now: r.now})
	router := snap.NewRouter()
	svc.Register(router, nil)
	replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
	a, b := r.server(router, replay, results), r.server(router, replay, results)
	ctx := context.Background()
	send := func(s *snap.Server, raw []byte) map[string]any {
		t.Helper()
		resp := s.Respond(ctx, snap.Inbound{Raw: raw})
		if resp == nil {
			t.Fatal("no answer")
		}
		var p map[string]any
		if err := json.Unmarshal(resp.Payload, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	request := func(payload string) []byte { return r.request(t, payload) }
	taskID := func(p map[string]any) string {
		t.Helper()
		task, _ := p["task"].(map[string]any)
		id, _ := task["id"].(string)
		if id == "" {
			t.Fatalf("no task in %v", p)
		}
		return id
	}

	create := request(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"hello"}]}}`)
	id := taskID(send(a, create))
	if p := send(b, create); p["deduplicated"] != true || taskID(p) != id {
		t.Fatalf("the create's copy at the replica: %v; want task %s, deduplicated", p, id)
	}
	more := request(`{"taskId":"` + id + `","message":{"messageId":"m2","role":"user","parts":[{"text":"more"}]}}`)
	if p := send(a, more); p["deduplicated"] != nil || taskID(p) != id {
		t.Fatalf("a message to the task: %v", p)
	}
	if p := send(b, more); p["deduplicated"] != true || taskID(p) != id {
		t.Fatalf("its copy at the replica: %v; want task %s, deduplicated", p, id)
	}
	all, err := store.List(ctx, tasks.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || len(all[0].History) != 2 {
		t.Fatalf("%d tasks, the first with %d messages; want 1 task of 2 messages", len(all), len(all[0].History))
	}
}

// On a MemoryStore, a message/send refused for the live-task limits
// (5002 past the owner's share, 5003 past the node's) leaves its id
// unspent, as SNAP tells the requester to retry: the record is written
// in the store's Create once the limits let the task in, so that the
// same signed message, sent again once a task has ended, is processed
// and not refused as a duplicate (2006).
func TestLiveLimitRefusalLeavesTheIDUnspent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts tasks.MemoryStoreOptions
		code snap.Code
	}{
		{"requester", tasks.MemoryStoreOptions{MaxLivePerOwner: 1}, snap.CodeRateLimitExceeded},
		{"node", tasks.MemoryStoreOptions{MaxLive: 1}, snap.CodeServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newClaimRig(t)
			svc := tasks.NewService(tasks.NewMemoryStore(tc.opts), tasks.ServiceOptions{Now: r.now})
			router := snap.NewRouter()
			svc.Register(router, nil)
			srv := r.server(router, snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10))
			ctx := context.Background()
			send := func(raw []byte) *snap.Message {
				t.Helper()
				resp := srv.Respond(ctx, snap.Inbound{Raw: raw})
				if resp == nil {
					t.Fatal("no answer")
				}
				return resp
			}
			request := func(text string) []byte {
				return r.request(t, `{"message":{"messageId":"`+snap.NewID()+`","role":"user","parts":[{"text":"`+text+`"}]}}`)
			}
			taskID := func(resp *snap.Message) string {
				t.Helper()
				var p struct {
					Task struct {
						ID string `json:"id"`
					} `json:"task"`
				}
				if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Task.ID == "" {
					t.Fatalf("no task in %s (%v)", resp.Payload, err)
				}
				return p.Task.ID
			}

			first := taskID(send(request("first")))
			second := request("second")
			if resp := send(second); resp.ErrorCode() != tc.code {
				t.Fatalf("past the limit: %s; want %d", resp.Payload, tc.code)
			}
			for _, to := range []tasks.State{tasks.StateWorking, tasks.StateCompleted} {
				if _, err := svc.Transition(ctx, first, to, ""); err != nil {
					t.Fatal(err)
				}
			}
			resp := send(second)
			if resp.ErrorCode() != 0 {
				t.Fatalf("the refused message sent again once a task ended: %s; want it processed", resp.Payload)
			}
			if id := taskID(resp); id == first {
				t.Fatalf("the retry got the first task %s", id)
			}
		})
	}
}
