package bufpool

import "sync"

// Buffers lends buffers of one size. The zero value is ready to use and
// must not be copied once used. Buffers left unused are let go by the
// collector as any sync.Pool's (after two collections), so a pool that a
// burst filled does not stay large.
type Buffers struct{ pool sync.Pool }

// Get lends a buffer of size bytes (its length), from the pool when it
// holds one of that size.
func (p *Buffers) Get(size int) *[]byte {
	if bp, _ := p.pool.Get().(*[]byte); bp != nil && len(*bp) == size {
		return bp
	}
	b := make([]byte, size)
	return &b
}

// Put takes back a buffer Get lent; nil is ignored. Whoever read into it
// must keep none of its bytes.
func (p *Buffers) Put(bp *[]byte) {
	if bp != nil {
		p.pool.Put(bp)
	}
}
