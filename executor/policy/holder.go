package policy

import (
	"context"
	"sync/atomic"
)

// InForce is what judges a request: the operator's policy and who has the
// operator role (Request.Operator). A Holder puts both in force in one
// step, so that no request is judged by a new list of operators under
// the old policy, nor by the old list under the new policy.
type InForce struct {
	// Engine is the policy. Nil: none, and every request is denied.
	Engine *Engine
	// Operator reports whether an address has the operator role. Nil:
	// nobody has it.
	Operator func(addr string) bool
}

// IsOperator reports whether addr has the operator role in f.
func (f InForce) IsOperator(addr string) bool { return f.Operator != nil && f.Operator(addr) }

// Operators returns an InForce.Operator that holds the addresses of
// addrs, a copy of the list as it is now.
func Operators(addrs []string) func(addr string) bool {
	set := make(map[string]struct{}, len(addrs))
	for _, a := range addrs {
		set[a] = struct{}{}
	}
	return func(addr string) bool {
		_, ok := set[addr]
		return ok
	}
}

// Holder holds the policy and the operators in force (an InForce) and
// lets them be replaced while requests are judged. A request is judged
// entirely by the InForce current when it started: take it once with
// InForce. The zero Holder holds none, has no operator and denies
// everything. Safe for concurrent use.
type Holder struct {
	cur atomic.Pointer[InForce]
}

// NewHolder returns a Holder holding e, with no operator.
func NewHolder(e *Engine) *Holder {
	h := &Holder{}
	h.cur.Store(&InForce{Engine: e})
	return h
}

// InForce returns the policy and operators in force, the zero InForce
// when the Holder holds none.
func (h *Holder) InForce() InForce {
	if f := h.cur.Load(); f != nil {
		return *f
	}
	return InForce{}
}

// Engine returns the Engine in force, or nil.
func (h *Holder) Engine() *Engine { return h.InForce().Engine }

// Set puts f, the policy and the operators, in force in one step and
// returns what it replaces. Set with a nil f.Engine changes nothing and
// returns the zero InForce: a holder never goes back to holding no
// policy.
func (h *Holder) Set(f InForce) InForce {
	if f.Engine == nil {
		return InForce{}
	}
	if old := h.cur.Swap(&f); old != nil {
		return *old
	}
	return InForce{}
}

// Swap puts e in force with the operators in force and returns the
// Engine it replaces. Swap(nil) changes nothing and returns nil.
func (h *Holder) Swap(e *Engine) *Engine {
	if e == nil {
		return nil
	}
	for {
		old := h.cur.Load()
		next := &InForce{Engine: e}
		if old != nil {
			next.Operator = old.Operator
		}
		if h.cur.CompareAndSwap(old, next) {
			if old == nil {
				return nil
			}
			return old.Engine
		}
	}
}

// Reload loads the policy file at path as Load does with opts and, if it
// parses, puts it in force (with the operators in force) and returns it.
// On error the Engine in force stays.
func (h *Holder) Reload(path string, opts ...Option) (*Engine, error) {
	e, err := Load(path, opts...)
	if err != nil {
		return nil, err
	}
	h.Swap(e)
	return e, nil
}

// Decide judges r with the Engine in force (see Engine.Decide); r says
// itself whether its principal is an operator.
func (h *Holder) Decide(ctx context.Context, r Request) Decision {
	return h.Engine().Decide(ctx, r)
}
