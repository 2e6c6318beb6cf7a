package relay

import (
	"context"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/wshandshake"
)

// Conn is one connection to one relay, reduced to what the Pool needs. The
// Pool owns reconnection, resubscription, verification and dedupe; a Conn
// only moves NIP-01 frames. Implementations must be safe for concurrent
// use. PoolConfig.Dial returns one; DialWebsocket is the default, and unit
// tests use fakes.
type Conn interface {
	// Req opens, or replaces, subscription id with filter f (NIP-01 REQ).
	// It must not wait on the network: frames are queued and written in
	// the order Req and CloseReq were called.
	Req(id string, f nostr.Filter) error
	// CloseReq ends subscription id (NIP-01 CLOSE), queued like Req.
	CloseReq(id string) error
	// Publish sends ev (NIP-01 EVENT) and waits, until ctx ends or the
	// connection drops, for the relay's OK; accepted and reason are that
	// OK's second and third fields.
	Publish(ctx context.Context, ev nostr.Event) (accepted bool, reason string, err error)
	// Messages delivers the relay's EVENT, EOSE, CLOSED and NOTICE
	// messages. It is closed when the connection ends.
	Messages() <-chan ConnMessage
	// Err reports why the connection ended; it is set before Messages is
	// closed.
	Err() error
	// Close ends the connection and waits for its goroutines.
	Close() error
}

// ConnMessage is one relay-to-client message, as a Conn delivers it.
type ConnMessage struct {
	Label  string       // "EVENT", "EOSE", "CLOSED" or "NOTICE"
	SubID  string       // EVENT, EOSE, CLOSED
	Event  *nostr.Event // EVENT, not yet verified (but see Verified)
	Reason string       // CLOSED reason or NOTICE text
	// Verified: Event was checked (id and signature) by a relay in this
	// process with this process's Verifier before it was forwarded, and
	// is a copy no one else holds. The pool believes it only of the
	// messages an InProcessConn hands to its deliver function, never of
	// those read from Messages.
	Verified bool

	// backlog, when set, counted size bytes for this message (see
	// connBacklog): the pool gives them back once it has handled it.
	backlog *connBacklog
	size    int64
}

// InProcessConn is a Conn to a relay running in this process (the
// embedded relay's LocalConn). The pool calls Deliver once, before it
// sends any REQ; from then on the connection hands each message to
// deliver, from the relay's own goroutines (several may call it at once),
// instead of queueing it on Messages for the pool's reader: goroutine
// hand-offs, and so wake-ups, fewer for every event. A subscription's
// stored events come in order, then its EOSE, then its live events, which
// may come out of order among themselves. deliver may block, for at most
// the pool's SlowConsumerTimeout. Messages is still closed when the
// connection ends, after Err is set.
//
// Events marked Verified that reach deliver are delivered without being
// checked a second time. Only code in this process can implement this
// interface: a connection that reads the network (DialWebsocket's) does
// not, and the pool checks everything it reads from Messages.
type InProcessConn interface {
	Conn
	Deliver(deliver func(ConnMessage))
}

// ErrConnClosed is the Err of a Conn closed by its owner.
var ErrConnClosed = errors.New("connection closed")

// Limits of the default websocket Conn.
const (
	wsHandshakeTimeout = 10 * time.Second
	wsWriteTimeout     = 10 * time.Second
	wsPingEvery        = 25 * time.Second
	wsPongWait         = 60 * time.Second // no frame nor pong for this long: the connection is dead
	wsReadLimit        = 1 << 20          // bytes of one relay message
	wsWriteQueue       = 256              // frames waiting to be written; when full the connection is failed
	wsInbox            = 256              // messages waiting for the pool's reader
)

// MaxConnBacklog bounds the bytes (as held in memory: an event's text and
// its tags) of the messages a relay connection read that the pool has not
// yet handled, the one in the pool's hands included. Past it the
// connection reads nothing more from its socket until the pool catches
// up: the relay meets TCP's flow control, nothing read is dropped. The
// pool's reader of a relay handles its messages in order, so a message
// waiting in this backlog holds up every later one of that relay anyway;
// reading on would only move them from the relay into the node's memory.
// One message may take the backlog past the bound: a frame is at most 1
// MiB, which as an event of many one-letter tags holds about 18 MiB. The
// bound is each connection's: a budget shared by the pool's relays would
// let one hostile relay hold up the others' readers.
const MaxConnBacklog = 4 << 20

// connBacklog counts the bytes of the messages a connection queued and
// its reader has not given back. Its one writer (the connection's read
// loop) waits for room; readers give back with release.
type connBacklog struct {
	held atomic.Int64
	room chan struct{} // a token once bytes were given back
}

// release gives back n bytes of a message handled.
func (b *connBacklog) release(n int64) {
	b.held.Add(-n)
	select {
	case b.room <- struct{}{}:
	default: // a token is waiting already
	}
}

// full reports whether the backlog holds max bytes or more.
func (b *connBacklog) full(max int64) bool { return b.held.Load() >= max }

// wait returns once the backlog is under max bytes, or false when done
// closes first.
func (b *connBacklog) wait(max int64, done <-chan struct{}) bool {
	for b.full(max) {
		select {
		case <-b.room:
		case <-done:
			return false
		}
	}
	return true
}

// messageSize is about what m holds in memory: its strings and, for an
// event, EventSize.
func messageSize(m *ConnMessage) int64 {
	n := int64(128 + len(m.SubID) + len(m.Reason))
	if m.Event != nil {
		n += EventSize(m.Event)
	}
	return n
}

// EventSize is about what ev holds in memory: its text and its tags (a
// slice and string headers for each, besides their text: a frame of many
// short tags takes many times its bytes, a 1 MiB one of one-letter tags
// about 18 MiB). Every bound in bytes on events the node holds counts
// them with it: the relay connections' backlog, a subscription's buffer,
// a query's result, the inbox's requests.
func EventSize(ev *nostr.Event) int64 {
	n := 128 + len(ev.ID) + len(ev.PubKey) + len(ev.Sig) + len(ev.Content) + 24*cap(ev.Tags)
	for _, tag := range ev.Tags {
		n += 16 * cap(tag)
		for _, v := range tag {
			n += len(v)
		}
	}
	return int64(n)
}

// DialWebsocket connects to the relay at url (ws:// or wss://) and
// returns a Conn that speaks NIP-01 over gorilla/websocket, with go-nostr
// encoding the envelopes. It is the Pool's default Dial. One goroutine
// reads and one writes (with a keep-alive ping); both end with the
// connection. Frames are written from a bounded queue, so Req and CloseReq
// never wait on the network; a relay that does not drain it is dropped.
// Messages holds at most 256 messages; read by a Pool, they and the one
// the pool is handling hold at most MaxConnBacklog bytes, the connection
// reading nothing more from the relay meanwhile.
//
// go-nostr's own Relay is not used: in v0.38.2 it races on its connection
// field whenever a connection closes (go test -race reports it) and starts
// a goroutine per received event, which nothing bounds.
func DialWebsocket(ctx context.Context, url string) (Conn, error) {
	return dialWebsocket(ctx, url, wsPongWait)
}

// dialWebsocket is DialWebsocket, a connection silent for pongWait (and
// a message not read whole pongWait after its first frame) being dead.
func dialWebsocket(ctx context.Context, url string, pongWait time.Duration) (Conn, error) {
	// The relay's answer to the upgrade is read within wshandshake.Max.
	d, handshake := wshandshake.Bounded(&websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: wsHandshakeTimeout})
	ws, resp, err := d.DialContext(ctx, url, nil)
	handshake.Done()
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("relay: dial %s: %w", url, err)
	}
	c := &wsConn{
		url:      url,
		ws:       ws,
		pongWait: pongWait,
		out:      make(chan []byte, wsWriteQueue),
		in:       make(chan ConnMessage, wsInbox),
		done:     make(chan struct{}),
		backlog:  connBacklog{room: make(chan struct{}, 1)},
	}
	ws.SetReadLimit(wsReadLimit)
	c.wg.Add(2)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

type wsConn struct {
	url      string
	ws       *websocket.Conn
	pongWait time.Duration // see dialWebsocket
	out      chan []byte
	in       chan ConnMessage
	done     chan struct{}
	wg       sync.WaitGroup

	failOnce sync.Once
	errMu    sync.Mutex
	err      error

	oks OKWaiters // publishers waiting for their OK

	// counted: the reader of Messages gives each message's bytes back to
	// backlog (the pool does; see countBacklog). Until then the queue is
	// bounded by its count alone.
	counted atomic.Bool
	backlog connBacklog
	stalls  atomic.Uint64 // times the read loop waited for the backlog
}

// countBacklog bounds the messages read and not yet handled by
// MaxConnBacklog bytes: whoever reads Messages from now on calls
// m.backlog.release(m.size) for each message once done with it.
func (c *wsConn) countBacklog() { c.counted.Store(true) }

// fail ends the connection with err (the first error wins).
func (c *wsConn) fail(err error) {
	c.failOnce.Do(func() {
		c.errMu.Lock()
		c.err = err
		c.errMu.Unlock()
		close(c.done)
		c.ws.Close()
	})
}

func (c *wsConn) Err() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

func (c *wsConn) Messages() <-chan ConnMessage { return c.in }

func (c *wsConn) Close() error {
	// Say goodbye if the socket is still up; errors mean it is not.
	_ = c.ws.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.fail(ErrConnClosed)
	c.wg.Wait()
	return nil
}

func (c *wsConn) readLoop() {
	defer c.wg.Done()
	defer close(c.in)
	// reading: a message has begun and is not read whole yet. It must be
	// within pongWait of its first frame: a pong proves the relay alive,
	// not its message coming, and a relay that sent pongs between the
	// fragments of a message it never ended held the connection, and
	// what it had sent of the message (up to wsReadLimit), while it
	// looked connected. The pong handler runs in this goroutine.
	reading := false
	_ = c.ws.SetReadDeadline(time.Now().Add(c.pongWait))
	c.ws.SetPongHandler(func(string) error {
		if reading {
			return nil
		}
		return c.ws.SetReadDeadline(time.Now().Add(c.pongWait))
	})
	for {
		if c.counted.Load() && c.backlog.full(MaxConnBacklog) {
			c.stalls.Add(1)
			if !c.backlog.wait(MaxConnBacklog, c.done) {
				return
			}
			// The relay is not to blame for the pool's wait.
			_ = c.ws.SetReadDeadline(time.Now().Add(c.pongWait))
		}
		reading = false
		_, r, err := c.ws.NextReader()
		var data []byte
		if err == nil {
			reading = true
			_ = c.ws.SetReadDeadline(time.Now().Add(c.pongWait))
			data, err = io.ReadAll(r)
		}
		if err != nil {
			c.fail(fmt.Errorf("relay: read %s: %w", c.url, err))
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(c.pongWait))
		var m ConnMessage
		switch env := nostr.ParseMessage(data).(type) {
		case *nostr.EventEnvelope:
			if env.SubscriptionID == nil {
				continue
			}
			ev := env.Event
			m = ConnMessage{Label: "EVENT", SubID: cut(*env.SubscriptionID), Event: &ev}
		case *nostr.EOSEEnvelope:
			m = ConnMessage{Label: "EOSE", SubID: cut(string(*env))}
		case *nostr.ClosedEnvelope:
			m = ConnMessage{Label: "CLOSED", SubID: cut(env.SubscriptionID), Reason: cut(env.Reason)}
		case *nostr.NoticeEnvelope:
			m = ConnMessage{Label: "NOTICE", Reason: cut(string(*env))}
		case *nostr.OKEnvelope:
			c.oks.Resolve(env.EventID, OK{Accepted: env.OK, Reason: cut(env.Reason)})
			continue
		default: // AUTH, COUNT, unknown or malformed: not used by the pool
			continue
		}
		if c.counted.Load() {
			m.backlog, m.size = &c.backlog, messageSize(&m)
			c.backlog.held.Add(m.size)
		}
		select {
		case c.in <- m:
		case <-c.done:
			return
		}
	}
}

// MaxRelayText bounds what the pool keeps, and logs, of a relay's own
// words: a NOTICE, a CLOSED reason (and subscription id), an OK message.
// A relay's frame may be a megabyte of them.
const MaxRelayText = 256

// cut returns a copy of s cut to MaxRelayText bytes, at a character's
// start, marked with "…" when cut. A copy: s, as go-nostr parses it, is a
// piece of the whole frame, which it would keep.
func cut(s string) string {
	if len(s) <= MaxRelayText {
		return strings.Clone(s)
	}
	return textcut.Prefix(s, MaxRelayText) + "…" // a new string
}

func (c *wsConn) writeLoop() {
	defer c.wg.Done()
	ping := time.NewTicker(wsPingEvery)
	defer ping.Stop()
	for {
		select {
		case <-c.done:
			return
		case frame := <-c.out:
			_ = c.ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
			if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
				c.fail(fmt.Errorf("relay: write %s: %w", c.url, err))
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				c.fail(fmt.Errorf("relay: ping %s: %w", c.url, err))
				return
			}
		}
	}
}

// enqueue queues one frame without waiting; a full queue fails the
// connection, which the pool then re-establishes.
func (c *wsConn) enqueue(frame []byte) error {
	select {
	case <-c.done:
		return fmt.Errorf("relay: %s: %w", c.url, c.Err())
	default:
	}
	select {
	case c.out <- frame:
		return nil
	default:
		err := fmt.Errorf("relay: %s: write queue full (%d frames)", c.url, wsWriteQueue)
		c.fail(err)
		return err
	}
}

func (c *wsConn) Req(id string, f nostr.Filter) error {
	frame, err := nostr.ReqEnvelope{SubscriptionID: id, Filters: nostr.Filters{f}}.MarshalJSON()
	if err != nil {
		return fmt.Errorf("relay: encode REQ: %w", err)
	}
	return c.enqueue(frame)
}

func (c *wsConn) CloseReq(id string) error {
	frame, err := nostr.CloseEnvelope(id).MarshalJSON()
	if err != nil {
		return fmt.Errorf("relay: encode CLOSE: %w", err)
	}
	return c.enqueue(frame)
}

func (c *wsConn) Publish(ctx context.Context, ev nostr.Event) (bool, string, error) {
	frame, err := nostr.EventEnvelope{Event: ev}.MarshalJSON()
	if err != nil {
		return false, "", fmt.Errorf("relay: encode EVENT: %w", err)
	}
	reply, cancel := c.oks.Wait(ev.ID)
	defer cancel()

	if err := c.enqueue(frame); err != nil {
		return false, "", err
	}
	select {
	case r := <-reply:
		return r.Accepted, r.Reason, nil
	case <-ctx.Done():
		return false, "", fmt.Errorf("relay: %s: no OK for %s: %w", c.url, ev.ID, context.Cause(ctx))
	case <-c.done:
		return false, "", fmt.Errorf("relay: %s: no OK for %s: %w", c.url, ev.ID, c.Err())
	}
}
