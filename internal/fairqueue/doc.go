// Package fairqueue is a bounded work queue that serves its senders in
// turn: items wait in one FIFO per key (a sender), and Pop takes the next
// item of each key with items, round robin. When the queue is full, an
// item from a key with fewer waiting than the busiest key pushes out the
// newest item of the busiest key; a key that is itself the busiest is
// refused. So a flood, from one key or from many, delays another sender
// by at most one item per key with work waiting, and never shuts it out.
//
//	q := fairqueue.New[string, *Job](256)
//	go func() {
//		for job, ok := q.Pop(); ok; job, ok = q.Pop() { handle(job) }
//	}()
//	switch out, res := q.Push(sender, job); res {
//	case fairqueue.Refused:      // the queue is full of sender's own work
//		refuse(job)
//	case fairqueue.Displaced:    // job is queued; out was pushed out
//		refuse(out)
//	}
//	q.Close() // Pop drains what is queued, then reports false
//
// Wait adds an item once there is room instead, pushing nothing out, for
// work that may wait (a backlog) where Push's would be refused. Hold sets
// one key's items aside until Release (a key over its rate, say) while
// the other keys are served, and Return puts items popped back at the
// head of their key's turn.
//
// It is written here because the standard library and the usual
// packages offer bounded channels and priority queues, not per-sender
// round robin with longest-queue eviction.
package fairqueue
