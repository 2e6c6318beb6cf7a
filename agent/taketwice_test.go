package agent

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

// Two processes on one database that both find a job's record to cancel
// (their reconcile passes, or one's end of the job and the other's pass)
// take it once between them: one cancels the work elsewhere, the other
// does not.
func TestCanceledSentTakenOnceByTwoProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		// Each process has its own connections.
		stores := [2]*Store{openTestStore(t, dsn), openTestStore(t, dsn)}
		s := stores[0]
		for round := range 20 {
			j := storeJob(fmt.Sprintf("job-%d", round), Pending, storeT0)
			mustCreate(t, ctx, s, j)
			if ok, err := s.Claim(ctx, j.TaskID, "h1", at(0), at(time.Minute)); err != nil || !ok {
				t.Fatalf("Claim = %v, %v", ok, err)
			}
			if err := s.KeepSent(ctx, j.TaskID, "h1", []byte("work of "+j.TaskID)); err != nil {
				t.Fatal(err)
			}
			j.Status, j.Reason = Canceled, "the task was canceled"
			if err := s.Write(ctx, Save{Job: j, Holder: "h1", Release: true}); err != nil {
				t.Fatal(err)
			}
			var (
				wg    sync.WaitGroup
				taken [2]bool
			)
			for i, st := range stores {
				wg.Go(func() {
					n, err := st.TakeCanceledSent(ctx, j.TaskID, []byte("work of "+j.TaskID), at(0), at(time.Minute))
					if err != nil {
						t.Error(err)
					}
					taken[i] = n == 1
				})
			}
			wg.Wait()
			if taken[0] == taken[1] {
				t.Fatalf("round %d: taken %v; want by one process alone", round, taken)
			}
		}
	})
}
