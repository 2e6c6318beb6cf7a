package agent_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// A raw part of a text type the node reads (text/markdown here, with its
// charset) reaches the model's prompt decoded, as a text part does;
// before, every raw part was left out, and the model worked on a task
// missing it.
func TestRawTextPartReachesTheModel(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.Push(llmtest.Text(finishAnswer))
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	const notes = "# Release notes\nship the frobnicator on tuesday"
	b, err := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m", "role": "user", "parts": []any{
		map[string]any{"text": "summarize the attached notes"},
		map[string]any{"raw": base64.StdEncoding.EncodeToString([]byte(notes)), "mediaType": "text/markdown; charset=utf-8"},
		map[string]any{"raw": base64.StdEncoding.EncodeToString([]byte(`{"owner":"the release team"}`)), "mediaType": "application/ld+json"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := taskstest.Send(context.Background(), r.svc, "alice", b)
	if err != nil {
		t.Fatal(err)
	}
	got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
	reqs := srv.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was not called")
	}
	for _, text := range []string{"ship the frobnicator on tuesday", `"owner":"the release team"`} {
		want, _ := json.Marshal(text) // as the request body encodes it
		if !bytes.Contains(reqs[0].Body, want[1:len(want)-1]) {
			msgs := reqs[0].Messages
			t.Errorf("the model's request does not hold the raw part's text %s; its last message:\n%s", text, msgs[len(msgs)-1].Content)
		}
	}
}
