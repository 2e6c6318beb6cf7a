package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

func Example() {
	ctx := context.Background()
	ids := 0
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 10_000}), tasks.ServiceOptions{
		Now:       func() time.Time { return time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC) },
		NewID:     func() string { ids++; return fmt.Sprintf("id-%d", ids) },
		Operators: []string{"bc1poperator"},
	})

	// The requester is the authenticated from of the request.
	const alice = "bc1palice"
	task, err := svc.SendMessage(ctx, alice, &tasks.SendParams{
		Message: tasks.Message{MessageID: "m1", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("list /sandbox")}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(task.ID, task.ContextID, task.Status.State, len(task.History))

	// A worker picks it up, needs an answer, and the requester gives it.
	if _, err := svc.Transition(ctx, task.ID, tasks.StateWorking, ""); err != nil {
		panic(err)
	}
	if _, err := svc.Transition(ctx, task.ID, tasks.StateInputRequired, "which folder?"); err != nil {
		panic(err)
	}
	task, _ = svc.SendMessage(ctx, alice, &tasks.SendParams{TaskID: "id-1",
		Message: tasks.Message{MessageID: "m2", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("docs")}}})
	fmt.Println(task.Status.State, len(task.History))

	// Someone else asking sees nothing.
	_, err = svc.GetTask(ctx, "bc1pmallory", &tasks.GetParams{TaskID: "id-1"})
	fmt.Println(err)

	// Over the router, which decodes each payload once into the params:
	// the response payload is {"task": …}.
	r := snap.NewRouter()
	svc.Register(r, nil)
	get, _ := r.Lookup("tasks/get")
	out, _ := get(ctx, &snap.Verified{Signed: true, Message: &snap.Message{
		From: alice, Type: snap.TypeRequest, Method: "tasks/get", Payload: []byte(`{"taskId":"id-1","historyLength":0}`)}})
	b, _ := json.Marshal(out)
	fmt.Println(string(b))

	_, err = svc.CancelTask(ctx, alice, &tasks.CancelParams{TaskID: "id-1"})
	fmt.Println(err)
	// Output:
	// id-1 id-2 submitted 1
	// working 2
	// snap 1001 TaskNotFound: task not found {"taskId":"id-1"}
	// {"task":{"id":"id-1","contextId":"id-2","status":{"state":"working","timestamp":"2026-02-04T10:00:00Z"}}}
	// <nil>
}
