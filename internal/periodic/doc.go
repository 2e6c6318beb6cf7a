// Package periodic runs a job at every tick of a clock the caller owns:
// the sweeps and prunes of the node's stores (expired replay records,
// tasks past retention, audit entries past retention, expired relay
// events), the agent's forgetting of ended jobs, the inbox's review of
// the requests it kept aside. Each round is a Pass: bounded, so that a
// database call that never returns (a server that hung) is given up and
// the loop goes on at its next tick, and labelled for goroutine
// profiles.
//
//	tick := time.NewTicker(time.Minute)
//	defer tick.Stop()
//	err := periodic.Run(ctx, "replay sweep", tick.C, 5*time.Minute, store.Sweep, func(n int64, err error) { … })
//
// Sleep is the wait between two tries of a retry loop:
//
//	if err := periodic.Sleep(ctx, backoff); err != nil { return err }
package periodic
