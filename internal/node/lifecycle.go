package node

import (
	"context"
	"errors"
	"fmt"
)

// lifecycle is the stack of a node's started parts: each part, once
// started, pushes what stops it, and closeAll stops them in the reverse
// order, so that a part is stopped before the parts it uses (the inbox
// before the pool it answers through, the pool before the relay it
// reaches). The zero value is an empty stack. It is not safe for
// concurrent use: Start pushes, then Wait (or a failing Start) closes.
type lifecycle struct {
	parts []startedPart
}

type startedPart struct {
	name  string
	close func() error
}

// push records the closer of the part just started; name says which part
// in the error closeAll returns.
func (l *lifecycle) push(name string, close func() error) {
	l.parts = append(l.parts, startedPart{name: name, close: close})
}

// start runs the steps in order, each starting one part and pushing its
// closer. When one fails, start closes everything on the stack, newest
// first, and returns the step's error (joined with the closers' errors).
func (l *lifecycle) start(ctx context.Context, steps ...func(context.Context) error) error {
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return errors.Join(err, l.closeAll())
		}
	}
	return nil
}

// closeAll calls every closer, newest first, even when one fails, and
// returns their errors joined, each naming its part. The stack is empty
// afterwards: a second call closes nothing.
func (l *lifecycle) closeAll() error {
	var errs []error
	for i := len(l.parts) - 1; i >= 0; i-- {
		p := l.parts[i]
		if err := p.close(); err != nil {
			errs = append(errs, fmt.Errorf("node: stop %s: %w", p.name, err))
		}
	}
	l.parts = nil
	return errors.Join(errs...)
}
