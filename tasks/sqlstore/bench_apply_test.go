package sqlstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/tasks"
)

// BenchmarkOutcome records one executor outcome (a completed write: its
// diff artifact and the task completed) on a task waiting for an
// operator, through the task service, on each store in one run. "apply"
// is Service.Resolve (Store.Apply: one write); "four-writes" is what
// Resolve did before, each change a write of its own (to working, the
// artifact, to completed: three writes and their reads). The task is
// created and held before the timer runs.
//
//	SNAPNODE_TEST_POSTGRES=postgres://… go test ./tasks/sqlstore -run '^$' -bench Outcome -count 5
func BenchmarkOutcome(b *testing.B) {
	for _, path := range []string{"apply", "four-writes"} {
		b.Run("path="+path, func(b *testing.B) {
			benchStores(b, func(b *testing.B, s tasks.Store) {
				ctx := context.Background()
				svc := tasks.NewService(s, tasks.ServiceOptions{})
				diff := tasks.Artifact{ArtifactID: "diff-1", Name: "diff", Parts: []tasks.Part{tasks.TextPart("--- a\n+++ b\n@@ -1 +1 @@\n-old\n+new\n")}}
				ids := make([]string, b.N)
				for i := range ids {
					ids[i] = fmt.Sprintf("o%d", i)
					if _, err := s.Create(ctx, task(ids[i], "alice")); err != nil {
						b.Fatal(err)
					}
					if _, err := svc.Resolve(ctx, ids[i], tasks.Outcome{State: tasks.StateInputRequired, Note: "held"}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for _, id := range ids {
					var err error
					if path == "apply" {
						_, err = svc.Resolve(ctx, id, tasks.Outcome{State: tasks.StateCompleted, Note: "done", Artifacts: []tasks.Artifact{diff}})
					} else {
						if _, err = svc.Transition(ctx, id, tasks.StateWorking, ""); err == nil {
							if _, err = svc.AddArtifact(ctx, id, diff); err == nil {
								_, err = svc.Transition(ctx, id, tasks.StateCompleted, "done")
							}
						}
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
