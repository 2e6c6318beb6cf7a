package tasks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// A message/stream: the task's events as they happen, then the task. A
// worker moves the task on while the requester watches.
func ExampleService_StreamMessage() {
	ctx := context.Background()
	ids := 0
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{}), tasks.ServiceOptions{
		Now:   func() time.Time { return time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC) },
		NewID: func() string { ids++; return fmt.Sprintf("id-%d", ids) },
	})
	const alice = "bc1palice"

	// A worker picks the task up once the stream has shown it.
	created := make(chan struct{})
	go func() {
		<-created
		svc.Transition(ctx, "id-1", tasks.StateWorking, "reading")
		svc.AddArtifact(ctx, "id-1", tasks.Artifact{ArtifactID: "summary", Parts: []tasks.Part{tasks.TextPart("short")}})
		svc.Transition(ctx, "id-1", tasks.StateCompleted, "")
	}()

	task, err := svc.StreamMessage(ctx, alice,
		&tasks.SendParams{Message: tasks.Message{MessageID: "m1", Role: tasks.RoleUser, Parts: []tasks.Part{tasks.TextPart("summarize")}}},
		func(event any) error {
			b, _ := json.Marshal(event)
			fmt.Println(string(b))
			if p, ok := event.(*tasks.ProgressUpdate); ok && p.State == tasks.StateSubmitted {
				close(created)
			}
			return nil
		})
	fmt.Println(task.Status.State, len(task.Artifacts), err)
	// Output:
	// {"taskId":"id-1","progress":0,"message":"task submitted","state":"submitted","timestamp":"2026-02-04T10:00:00Z","version":1}
	// {"taskId":"id-1","progress":0.5,"message":"reading","state":"working","timestamp":"2026-02-04T10:00:00Z","version":2}
	// {"taskId":"id-1","artifact":{"artifactId":"summary","parts":[{"text":"short"}],"partial":false},"version":3}
	// {"taskId":"id-1","progress":1,"message":"task completed","state":"completed","timestamp":"2026-02-04T10:00:00Z","version":4}
	// completed 1 <nil>
}
