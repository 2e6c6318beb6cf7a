package snapnostr

import (
	"context"
	"time"
)

// StepReplicas runs one of r's beats at now (a beat written, the others'
// read), for tests outside the package that drive the beats by hand.
func StepReplicas(ctx context.Context, r *Replicas, now time.Time) error { return r.step(ctx, now) }

// SetReachEvery sets how often in's Run writes the relays' points while
// it runs (a minute otherwise).
func SetReachEvery(in *Inbox, d time.Duration) { in.reachEvery = d }
