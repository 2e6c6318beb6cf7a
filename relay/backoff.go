package relay

import (
	"math/rand/v2"
	"time"
)

// backoff yields the delays between reconnection attempts to one relay:
// exponential (base, 2·base, 4·base, …) capped at max, with "equal
// jitter": each delay is drawn uniformly from [d/2, d] for the current
// step d, so relays restarted together are not hammered in lockstep and no
// delay is ever shorter than half a step. It is not safe for concurrent
// use: each relay loop owns one.
type backoff struct {
	base, max time.Duration
	rand      func() float64 // uniform in [0, 1); nil: math/rand/v2
	attempt   int
}

// next returns the delay before the next attempt and advances the step.
func (b *backoff) next() time.Duration {
	d := b.base
	for i := 0; i < b.attempt && d < b.max; i++ {
		d *= 2
	}
	if d > b.max || d <= 0 {
		d = b.max
	}
	if d < b.max {
		b.attempt++ // stop counting once capped: no overflow however long it fails
	}
	r := rand.Float64
	if b.rand != nil {
		r = b.rand
	}
	half := d / 2
	return half + time.Duration(r()*float64(d-half))
}

// reset returns to the base delay, after a connection proved stable.
func (b *backoff) reset() { b.attempt = 0 }
