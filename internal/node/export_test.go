package node

import (
	"context"
	"time"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
)

// WithPause calls f at the points of a proposal's run that crash tests
// stop the process at: "run" before each proposal goes to the executor,
// "ran" once the executor returned its result (a write promoted and
// recorded), before the task is updated; "decided" once an operator's
// approval or denial was carried out, before the task is updated.
func WithPause(f func(point string)) Option {
	return func(o *options) { o.pause = f }
}

// WithCardWait sets how long the start tries to publish the card before it
// leaves that to the background (cardStartWait).
func WithCardWait(d time.Duration) Option {
	return func(o *options) { o.cardWait = d }
}

// WithProcessUID makes the node take uid for the user it runs as, in the
// checks of its data folder's owner.
func WithProcessUID(uid int) Option {
	return func(o *options) { o.uid = &uid }
}

// SealAudit seals the node's audit log now, as its hourly sealer does.
func (n *Node) SealAudit(ctx context.Context) (audit.Seal, error) {
	return n.exec.audit.Seal(ctx)
}

// CardOut returns a channel closed once a relay took the card in force
// (the reloads' cards are published in the background).
func (n *Node) CardOut() <-chan struct{} {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	return n.cardDone
}

// WithStepsGrace sets the time the steps after requests' commits have,
// once the node's context ended, before they are stopped.
func WithStepsGrace(d time.Duration) Option {
	return func(o *options) { o.stepsGrace = d }
}

// StepsLifetime is the context the steps after requests' commits run on
// (tasks.ServiceOptions.Lifetime).
func (n *Node) StepsLifetime() context.Context { return n.stepsLife }

// WithLoopInterval sets the interval of each of the node's periodic
// loops on the database (recounts, sweeps, retention, audit prune and
// seal, forgetting, reconcile, the watch of other replicas' events).
func WithLoopInterval(d time.Duration) Option {
	return func(o *options) { o.loopEvery = d }
}

// LoopPasses returns how the passes of each periodic loop ended so far.
func (n *Node) LoopPasses() map[string]LoopCount { return n.loops.snapshot() }

// WithSandboxMaxDuration sets the sandbox's time limit of one operation
// (sandbox.Limits.MaxDuration): a short one stands in for a workspace too
// large to walk in time.
func WithSandboxMaxDuration(d time.Duration) Option {
	return func(o *options) { o.sandboxDuration = d }
}

// PolicyInForce is the name and version of the policy the node's executor
// judges with.
func (n *Node) PolicyInForce() (name, version string) {
	e := n.exec.policy.Engine()
	return e.Name(), e.Version()
}

// RunProposal runs the proposal data of requester through the node's
// executor, outside any task.
func (n *Node) RunProposal(ctx context.Context, requester string, data []byte) (*executor.Result, error) {
	return n.exec.exec.Run(ctx, executor.Request{Requester: requester, Data: data})
}

// ConsoleSource is the node's state as a console built now reads it.
func (n *Node) ConsoleSource() console.Source { return newConsoleSource(n) }
