package loadgen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/tasks"
)

// SeedTaskID is the id of the j-th seeded task.
func SeedTaskID(j int) string { return fmt.Sprintf("seed-%08d", j) }

// SeededTasks returns, for Config.Seeded, a picker of the tasks of a store
// seeded with SeedTask(j, owners, …) for j < total: peer p asks for a
// random one of those owned by owner p mod owners.
func SeededTasks(total, owners int) func(peer int, r *rand.Rand) string {
	return func(peer int, r *rand.Rand) string {
		o := peer % owners
		per := (total - o + owners - 1) / owners // tasks j < total with j mod owners = o
		if per <= 0 {
			return ""
		}
		return SeedTaskID(r.IntN(per)*owners + o)
	}
}

// SeedTask is the j-th task of a seeded store, owned by the address of
// keys[j mod len(keys)] on network: a two-part user message in its
// history, its status time base + j ms (so that the oldest are what
// retention removes first). One task in ten is completed with an
// artifact; the others failed, as a node without an agent answers a
// free-text task. None is left open: a node resumes open tasks at start.
func SeedTask(j int, keys []*identity.Key, network identity.Network, base time.Time) *tasks.Task {
	id := SeedTaskID(j)
	at := base.Add(time.Duration(j) * time.Millisecond)
	t := &tasks.Task{
		ID: id, ContextID: "ctx-" + id, Owner: keys[j%len(keys)].Address(network), CreatedAt: at, Version: 1,
		Status: tasks.Status{State: tasks.StateFailed, Timestamp: at, Message: "this node has no agent to work on free-text tasks"},
		History: []tasks.Message{{MessageID: "m-" + id, Role: tasks.RoleUser, Parts: []tasks.Part{
			tasks.TextPart("Summarize the README and list the open issues, please."),
			tasks.DataPart(json.RawMessage(`{"schema_version":"1.0.0","action":"READ_FILE","args":{"path":"/sandbox/README.md"}}`)),
		}}},
	}
	if j%10 == 0 {
		t.Status.State = tasks.StateCompleted
		t.Artifacts = []tasks.Artifact{{ArtifactID: "a-" + id, Name: "summary.md", Parts: []tasks.Part{
			tasks.TextPart("# Summary\n\nThe README describes the node; three issues are open: retention, replicas, the crypto floor."),
		}}}
	}
	return t
}
