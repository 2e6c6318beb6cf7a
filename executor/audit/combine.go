package audit

import (
	"context"
	"database/sql"
	"sync"
)

// combiner joins the appends that a process makes at the same moment into
// one transaction: one hold of the head row, one commit. The chain is
// sequential by nature; without this, concurrent appenders on PostgreSQL
// would queue on the head row one transaction each. (SQLite's group commit
// would share the commit anyway, but not the statements.)
//
// There is no goroutine of its own: the first appender to find no write
// in progress leads, writes every append waiting, and hands the lead to
// the first appender that arrived meanwhile, who writes the next batch. An
// appender waits only for the batch before its own and its own.
type combiner struct {
	mu      sync.Mutex
	pending []*appendReq
	busy    bool // an appender leads
}

type appendReq struct {
	ctx     context.Context
	entries []Entry // checked
	out     []Entry
	err     error
	// wake is signalled once: the request is done, or (lead) it must
	// write the next batch.
	wake chan struct{}
	lead bool // set under mu
	done bool
}

// maxCombined bounds the entries of one combined transaction.
const maxCombined = 4 * MaxBatch

// appendCombined appends es (checked) in the next combined transaction
// and returns them as stored.
func (l *Log) appendCombined(ctx context.Context, es []Entry) ([]Entry, error) {
	c := &l.comb
	r := &appendReq{ctx: ctx, entries: es, wake: make(chan struct{}, 1)}
	c.mu.Lock()
	c.pending = append(c.pending, r)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if !lead {
		select {
		case <-r.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if i := indexOf(c.pending, r); i >= 0 && !r.lead {
				// Not taken yet: leave the queue.
				c.pending = append(c.pending[:i], c.pending[i+1:]...)
				c.mu.Unlock()
				return nil, ctx.Err()
			}
			c.mu.Unlock()
			// Taken into a batch, or chosen to lead: see it through, so
			// that no write that committed is reported as failed.
			<-r.wake
		}
		if r.done {
			return r.out, r.err
		}
	}
	l.writeBatch(c.take())
	c.handOff()
	return r.out, r.err
}

func indexOf(rs []*appendReq, r *appendReq) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

// take removes the requests of the next batch from the queue: the first
// always, then others up to maxCombined entries.
func (c *combiner) take() []*appendReq {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, k := 0, 0
	for k < len(c.pending) && (k == 0 || n+len(c.pending[k].entries) <= maxCombined) {
		n += len(c.pending[k].entries)
		k++
	}
	batch := append([]*appendReq(nil), c.pending[:k]...)
	c.pending = append(c.pending[:0], c.pending[k:]...)
	return batch
}

// handOff passes the lead to the first request waiting, or ends it.
func (c *combiner) handOff() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		c.busy = false
		return
	}
	next := c.pending[0]
	next.lead = true
	next.wake <- struct{}{}
}

// writeBatch writes the requests of batch in one transaction, in order,
// and wakes each but the caller's own (the first). A request whose
// context ended before the write is refused with its error.
func (l *Log) writeBatch(batch []*appendReq) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
	}
	if len(live) > 0 {
		// The write is everyone's: it does not end with the leader's
		// context.
		ctx := context.WithoutCancel(live[0].ctx)
		err := l.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			h, err := l.readHeadForUpdate(ctx, tx)
			if err != nil {
				return err
			}
			for _, r := range live {
				if r.out, err = l.appendTx(ctx, tx, &h, r.entries); err != nil {
					return err
				}
			}
			return nil
		})
		for _, r := range live {
			if err != nil {
				r.out, r.err = nil, err
			}
		}
		if err == nil {
			l.Committed(live[len(live)-1].out)
		}
	}
	for i, r := range batch {
		r.done = true
		if i > 0 {
			r.wake <- struct{}{}
		}
	}
}
