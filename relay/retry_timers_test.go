package relay

import (
	"testing"
	"testing/synctest"
	"time"
)

// A REQ or catch-up page a relay refused for a while waits on a timer to
// be asked again. That timer stops with what it serves: the pool, the
// connection, the subscription. Before, it ran out its backoff (up to
// BackoffMax) after all of them had ended, holding the subscription and
// the pool meanwhile.
func TestPoolRetryTimersStopWithTheirOwner(t *testing.T) {
	refusals := map[string]func(a *ptConn, sub *Subscription) string{
		"REQ": func(a *ptConn, sub *Subscription) string {
			a.send(ConnMessage{Label: "CLOSED", SubID: sub.wireID, Reason: "rate-limited: one at a time"})
			return sub.wireID
		},
		"page": func(a *ptConn, sub *Subscription) string {
			page := a.pages()[0].id
			a.send(ConnMessage{Label: "CLOSED", SubID: page, Reason: "rate-limited: later"})
			return page
		},
	}
	ends := map[string]func(a *ptConn, sub *Subscription){
		"pool closed":         func(_ *ptConn, sub *Subscription) { sub.p.Close() },
		"subscription closed": func(_ *ptConn, sub *Subscription) { sub.Close() },
		"connection dropped":  func(a *ptConn, _ *Subscription) { a.drop(ErrConnClosed) },
	}
	for what, refuse := range refusals {
		for how, end := range ends {
			t.Run(what+"/"+how, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := PoolConfig{BackoffBase: time.Second, BackoffMax: time.Hour}
					_, sub, a, _ := catchUpFixture(t, cfg)
					r := sub.p.relays[0]
					refuse(a, sub)
					synctest.Wait()
					if n := r.retryTimers.Load(); n != 1 {
						t.Fatalf("%d retry timers after a refusal, want 1", n)
					}
					before := len(a.reqs())
					end(a, sub)
					synctest.Wait()
					if n := r.retryTimers.Load(); n != 0 {
						t.Fatalf("%d retry timers left after the %s, want none", n, how)
					}
					time.Sleep(time.Minute) // past the retry's backoff
					synctest.Wait()
					if fs := a.reqs()[before:]; len(fs) != 0 {
						for _, f := range fs {
							if !f.close {
								t.Fatalf("asked %s again after the %s: frames %+v", f.id, how, fs)
							}
						}
					}
				})
			})
		}
	}
}
