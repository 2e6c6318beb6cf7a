package relay

import "sync"

// OK is a relay's answer to a published event (NIP-01 ["OK", id, ok, msg]).
type OK struct {
	Accepted bool
	Reason   string
}

// OKWaiters matches OK answers to the publishers waiting for them, for a
// Conn implementation: several publishers may wait for one event id, and
// each gets every answer for it. The zero value is ready to use.
type OKWaiters struct {
	mu sync.Mutex
	m  map[string][]chan OK
}

// Wait registers interest in the OK for id. Call the returned cancel when
// done waiting (typically deferred); the channel holds one answer.
func (w *OKWaiters) Wait(id string) (answer <-chan OK, cancel func()) {
	ch := make(chan OK, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = make(map[string][]chan OK)
	}
	w.m[id] = append(w.m[id], ch)
	w.mu.Unlock()
	return ch, func() { w.drop(id, ch) }
}

// Resolve hands r to everyone waiting for id, without blocking.
func (w *OKWaiters) Resolve(id string, r OK) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.m[id] {
		select {
		case ch <- r:
		default:
		}
	}
	delete(w.m, id)
}

func (w *OKWaiters) drop(id string, ch chan OK) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.m[id]
	for i, c := range ws {
		if c == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(w.m, id)
	} else {
		w.m[id] = ws
	}
}
