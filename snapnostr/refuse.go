package snapnostr

import (
	"context"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/snap"
)

// refusalSenders is how many refusals are published at once.
const refusalSenders = 4

// refusalKeys bounds the Nostr keys whose last refusal is remembered; past
// it an arbitrary one is forgotten (and may be refused again within its
// second).
const refusalKeys = 16_384

// refusal is a request refused before it was queued, with why.
type refusal struct {
	ev  *nostr.Event
	err *snap.Error
}

// refuser answers the requests the inbox refuses (rate limited, queue
// full) beside the workers: at most one refusal per Nostr key per second
// (a key that floods learns to back off from the first and is not
// answered again within that second), waiting in a queue of
// InboxConfig.Refusals for refusalSenders goroutines. A flood of many
// events from a few keys thus costs a few refusals, and the refusal of
// another peer waits behind at most one per flooding key rather than
// being dropped. Only a queue full of distinct keys' refusals drops one,
// logged.
type refuser struct {
	in   *Inbox
	last *bounded.Cache[string, time.Time] // Nostr key → its last refusal
	q    chan refusal
	wg   sync.WaitGroup
}

// startRefuser starts the senders, which publish on ctx until stop.
func (in *Inbox) startRefuser(ctx context.Context) *refuser {
	r := &refuser{in: in, last: bounded.NewCache[string, time.Time](refusalKeys), q: make(chan refusal, in.cfg.Refusals)}
	for range refusalSenders {
		r.wg.Go(func() {
			for x := range r.q {
				in.reply(ctx, x.ev, in.cfg.Handler.Refuse(x.err), false)
			}
		})
	}
	return r
}

// refuse queues the refusal of ev, unless its key was refused less than a
// second ago or the queue is full. It never blocks. It is called for one
// request at a time: by the inbox's listener, or by the pool's delivery
// of one event to the inbox's subscription (funcSubscriber).
func (r *refuser) refuse(ev *nostr.Event, e *snap.Error) {
	now := r.in.cfg.Now()
	if at, ok := r.last.Get(ev.PubKey); ok && now.Sub(at) < time.Second && !now.Before(at) {
		r.in.cfg.Logger.Debug("inbox: refusal not sent, its key was refused within the second", "event", ev.ID, "code", int(e.Code))
		return
	}
	select {
	case r.q <- refusal{ev: ev, err: e}:
		r.last.Put(ev.PubKey, now)
	default:
		r.in.cfg.Logger.Debug("inbox: refusal dropped, too many waiting to be sent", "event", ev.ID, "code", int(e.Code), "waiting", cap(r.q))
	}
}

// stop sends the refusals still waiting, then returns.
func (r *refuser) stop() {
	close(r.q)
	r.wg.Wait()
}
