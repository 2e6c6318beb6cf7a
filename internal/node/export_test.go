package node

// WithPause calls f at the points of a proposal's run that crash tests
// stop the process at: "run" before each proposal goes to the executor,
// "ran" once the executor returned its result (a write promoted and
// recorded), before the task is updated; "decided" once an operator's
// approval or denial was carried out, before the task is updated.
func WithPause(f func(point string)) Option {
	return func(o *options) { o.pause = f }
}
