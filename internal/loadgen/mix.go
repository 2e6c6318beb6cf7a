package loadgen

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Op is one kind of request a simulated peer makes.
type Op int

// The requests of a load: message/send (a new task), tasks/get (a task the
// peer owns) and message/stream (a new task, its events streamed).
const (
	OpSend Op = iota
	OpGet
	OpStream
	numOps
)

var opNames = [numOps]string{"send", "get", "stream"}

// Method returns the SNAP method of the request.
func (o Op) Method() string {
	return [numOps]string{"message/send", "tasks/get", "message/stream"}[o]
}

func (o Op) String() string { return opNames[o] }

// Mix is how often each Op is drawn: its weight over the sum of weights.
type Mix [numOps]int

// DefaultMix returns 70 % message/send, 25 % tasks/get and 5 %
// message/stream.
func DefaultMix() Mix { return Mix{OpSend: 70, OpGet: 25, OpStream: 5} }

// maxWeight bounds one weight, so that the sum cannot overflow.
const maxWeight = 1_000_000

// ErrMix is wrapped by every error of ParseMix.
var ErrMix = errors.New("invalid mix")

// ParseMix reads a mix written as comma-separated NAME=WEIGHT items, such
// as "send=70,get=25,stream=5": NAME is send, get or stream, each at most
// once; WEIGHT is a whole number from 0 to 1,000,000; a name left out
// weighs 0, and at least one weight must be above 0.
func ParseMix(s string) (Mix, error) {
	var m Mix
	var seen [numOps]bool
	if strings.TrimSpace(s) == "" {
		return m, fmt.Errorf("%w: empty; want NAME=WEIGHT items such as send=70,get=25,stream=5", ErrMix)
	}
	for item := range strings.SplitSeq(s, ",") {
		name, weight, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return Mix{}, fmt.Errorf("%w: item %q: want NAME=WEIGHT", ErrMix, item)
		}
		op := Op(-1)
		for i, n := range opNames {
			if n == name {
				op = Op(i)
			}
		}
		if op < 0 {
			return Mix{}, fmt.Errorf("%w: item %q: name %q is not one of send, get, stream", ErrMix, item, name)
		}
		if seen[op] {
			return Mix{}, fmt.Errorf("%w: item %q: %s is given twice", ErrMix, item, name)
		}
		seen[op] = true
		w, err := strconv.Atoi(weight)
		if err != nil || w < 0 || w > maxWeight {
			return Mix{}, fmt.Errorf("%w: item %q: weight %q is not a whole number from 0 to %d", ErrMix, item, weight, maxWeight)
		}
		m[op] = w
	}
	if m.total() == 0 {
		return Mix{}, fmt.Errorf("%w: %q: every weight is 0", ErrMix, s)
	}
	return m, nil
}

// String writes m as ParseMix reads it.
func (m Mix) String() string {
	parts := make([]string, 0, numOps)
	for op, w := range m {
		if w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", Op(op), w))
		}
	}
	return strings.Join(parts, ",")
}

func (m Mix) total() int { return m[OpSend] + m[OpGet] + m[OpStream] }

// pick returns the Op drawn by r, a number in [0, total).
func (m Mix) pick(r int) Op {
	for op, w := range m {
		if r < w {
			return Op(op)
		}
		r -= w
	}
	return OpSend
}
