package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// sendAs is a message/send of owner as the router hands it to the Service.
func sendAs(t *testing.T, s *tasks.Service, owner, payload string) (*tasks.Task, error) {
	t.Helper()
	p, err := snap.ParseSendParams([]byte(payload))
	if err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
	return s.SendMessage(context.Background(), owner, p)
}

func mustSendAs(t *testing.T, s *tasks.Service, owner, payload string) *tasks.Task {
	t.Helper()
	task, err := sendAs(t, s, owner, payload)
	if err != nil {
		t.Fatalf("SendMessage %s: %v", payload, err)
	}
	return task
}

func keyedContinuation(taskID, key, msgID string) string {
	return fmt.Sprintf(`{"taskId":%q,"idempotencyKey":%q,"message":{"messageId":%q,"role":"user","parts":[{"text":"more"}]}}`, taskID, key, msgID)
}

// A key sent with a message to an existing task is kept with the task in
// the database: a retry after a restart (a new Service on the same
// database), or through another replica, returns the task unchanged, as
// a retry of a key that created a task does.
func TestContinuationKeyOutlivesTheService(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		first := open(t, dsn, Options{})
		svc := tasks.NewService(first, tasks.ServiceOptions{})
		created := mustSendAs(t, svc, "alice", `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hi"}]}}`)
		waiting := mustSendAs(t, svc, "alice", `{"message":{"messageId":"w1","role":"user","parts":[{"text":"hi"}]}}`)
		if _, err := svc.Transition(ctx, waiting.ID, tasks.StateWorking, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Transition(ctx, waiting.ID, tasks.StateInputRequired, "say more"); err != nil {
			t.Fatal(err)
		}
		a := mustSendAs(t, svc, "alice", keyedContinuation(created.ID, "k1", "m2"))
		w := mustSendAs(t, svc, "alice", keyedContinuation(waiting.ID, "k2", "w2"))
		if len(a.History) != 2 || len(w.History) != 2 || w.Status.State != tasks.StateWorking {
			t.Fatalf("continuations: %d messages, %d messages in %s", len(a.History), len(w.History), w.Status.State)
		}

		check := func(t *testing.T, svc *tasks.Service) {
			t.Helper()
			for _, c := range []struct {
				want     *tasks.Task
				key, msg string
			}{{a, "k1", "m2"}, {w, "k2", "w2"}} {
				got := mustSendAs(t, svc, "alice", keyedContinuation(c.want.ID, c.key, c.msg))
				if got.ID != c.want.ID || len(got.History) != 2 || got.Version != c.want.Version || got.Status.State != c.want.Status.State {
					t.Fatalf("retry of %s: %d messages at version %d in %s, want 2 at %d in %s",
						c.key, len(got.History), got.Version, got.Status.State, c.want.Version, c.want.Status.State)
				}
				// Without taskId the key names the same task, as the
				// in-memory record does.
				got = mustSendAs(t, svc, "alice", `{"idempotencyKey":"`+c.key+`","message":{"messageId":"x","role":"user","parts":[{"text":"x"}]}}`)
				if got.ID != c.want.ID || got.Version != c.want.Version {
					t.Fatalf("key %s without taskId: task %s at %d, want %s at %d", c.key, got.ID, got.Version, c.want.ID, c.want.Version)
				}
			}
			// The key is another task's: refused.
			_, err := sendAs(t, svc, "alice", keyedContinuation(w.ID, "k1", "m9"))
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || se.Data["constraint"] != "unique" {
				t.Fatalf("k1 on another task: err = %v, want 1004 unique", err)
			}
			// Keys are per requester: bob's k1 is his own (and he cannot
			// continue alice's task).
			if _, err := sendAs(t, svc, "bob", keyedContinuation(a.ID, "k1", "b1")); !errors.As(err, &se) || se.Code != snap.CodeTaskNotFound {
				t.Fatalf("bob continuing alice's task: err = %v, want 1001", err)
			}
			for _, tk := range []*tasks.Task{a, w} {
				if got, err := first.Get(ctx, tk.ID); err != nil || len(got.History) != 2 {
					t.Fatalf("stored task %s: %v, %v", tk.ID, got, err)
				}
			}
		}
		t.Run("replica", func(t *testing.T) {
			check(t, tasks.NewService(open(t, dsn, Options{}), tasks.ServiceOptions{}))
		})
		t.Run("restart", func(t *testing.T) {
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			first = open(t, dsn, Options{})
			check(t, tasks.NewService(first, tasks.ServiceOptions{}))
		})
	})
}
