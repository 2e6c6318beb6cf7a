package policy

import (
	"context"
	"sync/atomic"
)

// Holder holds the Engine in force and lets the operator's policy be
// replaced while requests are judged. A request is judged entirely by the
// Engine current when it started. The zero Holder holds none and denies
// everything. Safe for concurrent use.
type Holder struct {
	cur atomic.Pointer[Engine]
}

// NewHolder returns a Holder holding e.
func NewHolder(e *Engine) *Holder {
	h := &Holder{}
	h.cur.Store(e)
	return h
}

// Engine returns the Engine in force, or nil.
func (h *Holder) Engine() *Engine { return h.cur.Load() }

// Swap puts e in force and returns the Engine it replaces. Swap(nil)
// changes nothing and returns nil: a holder never goes back to holding
// nothing.
func (h *Holder) Swap(e *Engine) *Engine {
	if e == nil {
		return nil
	}
	return h.cur.Swap(e)
}

// Reload loads the policy file at path and, if it parses, puts it in
// force and returns it. On error the Engine in force stays.
func (h *Holder) Reload(path string) (*Engine, error) {
	e, err := Load(path)
	if err != nil {
		return nil, err
	}
	h.Swap(e)
	return e, nil
}

// Decide judges r with the Engine in force (see Engine.Decide).
func (h *Holder) Decide(ctx context.Context, r Request) Decision {
	return h.cur.Load().Decide(ctx, r)
}
