package delegate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/tasks"
)

// BenchmarkDelegateStep measures one delegate round trip: a job's first
// step, sent as message/send to a delegate on an embedded relay on
// loopback and answered with a worker answer, then the job ended. The
// Delegate, its relays and the delegate's inbox share one Verifier, as in
// a node: sig-checks/op counts the signatures it checked (0: every event
// was signed in this process through it).
func BenchmarkDelegateStep(b *testing.B) {
	var v *relay.Verifier
	d, _, _ := setup(b, func(c call) *tasks.Task { return answerTask("remote-1", completed) },
		func(c *delegate.Config) { v = c.Verifier })
	ctx := context.Background()
	// Warm: the delegate's card found, connections and conversation keys.
	if _, err := d.Complete(ctx, prompt("job-warm", 0)); err != nil {
		b.Fatal(err)
	}
	d.EndJob("job-warm")
	before := v.SignatureChecks()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		job := fmt.Sprintf("job-%d", i)
		if _, err := d.Complete(ctx, prompt(job, 0)); err != nil {
			b.Fatal(err)
		}
		d.EndJob(job)
	}
	b.StopTimer()
	b.ReportMetric(float64(v.SignatureChecks()-before)/float64(b.N), "sig-checks/op")
}
