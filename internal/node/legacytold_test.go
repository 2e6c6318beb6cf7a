package node_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// A job stored by a version before its task's messages were counted
// (told = -1) has them counted when the node starts, before it takes
// requests: such a job's follow-ups, told each as the task's last
// message, could lose one to two Takes that raced (see
// agent.Queue.CountTold).
func TestStartCountsTheMessagesOfOlderJobs(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		id := legacyJob(t, dsn)
		// The database is an identity's already: the node starts with
		// a key of its own.
		key, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keyFile := filepath.Join(t.TempDir(), "identity.key")
		if err := identity.SaveKeyFile(keyFile, key); err != nil {
			t.Fatal(err)
		}
		a := startAgentNode(t, dsn, func(c *config.Config) { c.KeyFile = keyFile })
		j, err := a.Agent().Store().Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Told != 1 {
			t.Fatalf("the job's count of messages given: %d; want 1, its task's", j.Told)
		}
	})
}

// legacyJob stores on the database dsn a task of one message and its job,
// waiting for a human, as an older version left it: its messages not
// counted (told = -1). It returns the task's id.
func legacyJob(t *testing.T, dsn string) string {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ts, err := sqlstore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	store, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	svc := tasks.NewService(ts, tasks.ServiceOptions{Agent: agent.NewQueue(store, nil)})
	payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": "write a report"}}}})
	task, err := taskstest.Send(ctx, svc, "alice", payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(`UPDATE agent_jobs SET told = -1, status = ? WHERE task_id = ?`),
		string(agent.InterventionRequired), task.ID); err != nil {
		t.Fatal(err)
	}
	return task.ID
}
