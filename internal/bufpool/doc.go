// Package bufpool lends byte buffers for the time one message is read and
// handled, so that a reader allocates nothing for a small message and an
// idle reader holds no buffer.
//
//	var reads bufpool.Buffers
//	bp := reads.Get(4096)
//	defer reads.Put(bp) // after nothing keeps *bp's bytes
//	n, err := io.ReadFull(r, (*bp)[:size])
package bufpool
