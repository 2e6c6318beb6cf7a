package snaphttp

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// answerWait bounds how long a request waits for its reservation in
// AnswerMemory before its peer is told the node is busy, and how long an
// answer larger than its reservation waits for room for the rest before
// it is sent abridged. An answer to a peer that reads at the speed of a
// network is written in milliseconds: a longer wait would only hold more
// answers, each for longer, for peers that read slowly or not at all.
const answerWait = 250 * time.Millisecond

// answerFloor is what a request reserves of AnswerMemory beyond its own
// length before it is handled (see answerBudget.reservation): room for a
// small answer whole, a task's id, status and a reply, and the envelope
// and signature around it (about 450 bytes). A message/send's answer
// holds its request's message in the task's history: it is seldom
// smaller than the request.
const answerFloor = 4 << 10

// ErrAnswerMemory ends an exchange whose request found no room in
// AnswerMemory before it was handled: its peer got the busy refusal in
// its place.
var ErrAnswerMemory = errors.New("snaphttp: too many answers are being written at once")

// answerBudget bounds the bytes of the answers held at once while they
// are written: in all, and per peer to a sixteenth of that (at least one
// answer of MaxResponse). It is not first come, first served, unlike
// bodyBudget's semaphores: a small answer takes room as soon as there is
// some, and is not queued behind a large one waiting for more.
type answerBudget struct {
	total, perPeer int64

	mu    sync.Mutex
	used  int64
	peers map[netip.Addr]int64 // peers holding bytes; removed at 0
	// waiting counts the bytes of the answers waiting for room, which
	// hold their serialized form meanwhile, bounded as used is (total,
	// perPeer), so that they hold at most as much again.
	waiting     int64
	peerWaiting map[netip.Addr]int64 // removed at 0
	// freed is closed, and replaced, whenever bytes are given back.
	freed chan struct{}
}

// newAnswerBudget bounds the bytes held to total, a peer's to a
// sixteenth of it or maxAnswer, whichever is larger (never above total).
func newAnswerBudget(total, maxAnswer int64) *answerBudget {
	return &answerBudget{total: total, perPeer: min(total, max(total/16, maxAnswer)),
		peers: make(map[netip.Addr]int64), peerWaiting: make(map[netip.Addr]int64), freed: make(chan struct{})}
}

// size is what an answer of n bytes holds of the budget: n, or all a
// peer may hold when n is larger (an answer of MaxResponse plus its
// framing), so that every answer can be written once the others are.
func (b *answerBudget) size(n int) int64 {
	return min(int64(n), b.perPeer)
}

// reservation is what a request of n bytes reserves of the budget before
// it is handled: its length and answerFloor (see size).
func (b *answerBudget) reservation(n int) int64 {
	return b.size(n + answerFloor)
}

// grow makes held, what an answer holds of the budget for key, need, at
// once when there is room, else after brief is called (the caller makes
// the answer it sends when there is none, and lets the whole one go
// meanwhile) and the rest waited for as take waits. It reports what the
// answer holds then, and false when the rest found no room: the answer
// keeps held, and brief's answer is sent in its place.
func (b *answerBudget) grow(ctx context.Context, key netip.Addr, held, need int64, brief func()) (int64, bool) {
	if need <= held {
		return held, true
	}
	if scope, _ := b.tryTake(key, need-held); scope == "" {
		return need, true
	}
	brief()
	if scope := b.take(ctx, key, need-held); scope == "" {
		return need, true
	}
	return held, false
}

// tryTake takes n bytes for key, or names the scope without room: "peer"
// or "node".
func (b *answerBudget) tryTake(key netip.Addr, n int64) (scope string, freed <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.peers[key]+n > b.perPeer:
		return "peer", b.freed
	case b.used+n > b.total:
		return "node", b.freed
	}
	b.peers[key] += n
	b.used += n
	return "", nil
}

// take takes n bytes for key (see size), waiting until they are free, up
// to answerWait or until ctx ends; it names the scope that had no room
// when they are not taken. It does not wait when the answers already
// waiting hold as much as the budget, or key's its share (see
// startWaiting).
func (b *answerBudget) take(ctx context.Context, key netip.Addr, n int64) (scope string) {
	scope, freed := b.tryTake(key, n)
	if scope == "" {
		return ""
	}
	if s := b.startWaiting(key, n); s != "" {
		return s
	}
	defer b.stopWaiting(key, n)
	t := time.NewTimer(answerWait)
	defer t.Stop()
	for {
		select {
		case <-freed:
		case <-t.C:
			return scope
		case <-ctx.Done():
			return scope
		}
		if scope, freed = b.tryTake(key, n); scope == "" {
			return ""
		}
	}
}

// startWaiting counts n bytes of key's as waiting, or names the scope
// whose waiting answers leave no room for them: "node" when they hold
// total, "peer" when key's hold perPeer.
func (b *answerBudget) startWaiting(key netip.Addr, n int64) (scope string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.peerWaiting[key]+n > b.perPeer:
		return "peer"
	case b.waiting+n > b.total:
		return "node"
	}
	b.peerWaiting[key] += n
	b.waiting += n
	return ""
}

// stopWaiting gives back what startWaiting counted.
func (b *answerBudget) stopWaiting(key netip.Addr, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiting -= n
	if b.peerWaiting[key] -= n; b.peerWaiting[key] <= 0 {
		delete(b.peerWaiting, key)
	}
}

// release gives back n bytes of key's.
func (b *answerBudget) release(key netip.Addr, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.peers[key] -= n; b.peers[key] <= 0 {
		delete(b.peers, key)
	}
	close(b.freed)
	b.freed = make(chan struct{})
}

// answerBusy is the error answering a request that found no room in
// AnswerMemory for its reservation within answerWait: the node was
// writing too many answers at once (scope "node"), or to this peer
// (scope "peer"). The request was not handled: a retry is safe.
func answerBusy(scope string) *snap.Error {
	return &snap.Error{Code: snap.CodeServiceUnavailable,
		Message: "too many answers are being written at once: the request was not handled; retry later",
		Data:    map[string]any{"retryAfter": 1, "limit": "answer_memory", "scope": scope}}
}

// answerUnsent is the error in place of an answer larger than its
// reservation that found no room for the rest within answerWait (see
// Server.abridge): the request was handled, its answer is not sent. It
// is 5001, not 5003, and says when to come back nowhere: a peer that
// sent the request again would have it handled again (a second task).
func answerUnsent() *snap.Error {
	return &snap.Error{Code: snap.CodeInternal,
		Message: "the request was handled, but its answer found no memory free to be written and is left out: " +
			"do not send the request again; tasks/get returns a task whole",
		Data: map[string]any{"limit": "answer_memory", "handled": true}}
}

// abridge is the answer sent in place of resp, an answer to a request
// handled that found no room to be written whole: the Handler's
// abridged form (snap.Abridger: a task without its history and
// artifacts), else its signed answerUnsent.
func (s *Server) abridge(resp *snap.Message) *snap.Message {
	if a, ok := s.cfg.Handler.(snap.Abridger); ok {
		return a.Abridge(resp, answerUnsent())
	}
	return s.cfg.Handler.Refuse(answerUnsent())
}

// refuseAnswer answers a POST that found no room for its reservation in
// AnswerMemory, before it was handled: 503 with Retry-After, as small as
// any refusal.
func refuseAnswer(w http.ResponseWriter, scope string) {
	e := answerBusy(scope)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, e.Code, e.Message, e.Data)
}

// writeUnsent answers a service/call over HTTP whose reply found no room
// to be written (see answerUnsent): 500, which a peer does not take for
// a request not handled, with no Retry-After.
func writeUnsent(w http.ResponseWriter) {
	e := answerUnsent()
	writeError(w, http.StatusInternalServerError, e.Code, e.Message, e.Data)
}
