// Package periodic runs a job at every tick of a clock the caller owns:
// the sweeps and prunes of the node's stores (expired replay records,
// tasks past retention, audit entries past retention, expired relay
// events), the agent's forgetting of ended jobs, the inbox's review of
// the requests it kept aside.
//
//	tick := time.NewTicker(time.Minute)
//	defer tick.Stop()
//	err := periodic.Run(ctx, tick.C, store.Sweep, func(n int64, err error) { … })
//
// Sleep is the wait between two tries of a retry loop:
//
//	if err := periodic.Sleep(ctx, backoff); err != nil { return err }
package periodic
