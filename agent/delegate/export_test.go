package delegate

import "context"

// TimeOutStepsOn makes each step of d that Config.StepTimeout bounds time
// out when the channel fire returns for its sequence closes (nil: never),
// not after the time-out: a test gives up on a step at a point of its
// choosing (the delegate at work on it), with no real time-out racing the
// delegate's answers.
func TimeOutStepsOn(d *Delegate, fire func(step int) <-chan struct{}) {
	TimeOutStepsThen(d, fire, nil)
}

// TimeOutStepsThen is TimeOutStepsOn calling then (when not nil) once a
// step has timed out: its context is done.
func TimeOutStepsThen(d *Delegate, fire func(step int) <-chan struct{}, then func()) {
	d.stepContext = func(ctx context.Context, step int) (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancelCause(ctx)
		c := fire(step)
		go func() {
			select {
			case <-c:
				cancel(context.DeadlineExceeded)
				if then != nil {
					then()
				}
			case <-ctx.Done():
			}
		}()
		return ctx, func() { cancel(context.Canceled) }
	}
}
