package wshandshake

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/gorilla/websocket"
)

// Max is the handshake bound the project's clients use: 1 MiB, TLS and a
// proxy's answer included.
const Max = 1 << 20

// ErrTooLarge: a handshake went past Max; the dial fails with it and its
// connection is closed.
var ErrTooLarge = fmt.Errorf("the WebSocket handshake is over %d bytes", Max)

// Budget is what is left of one dial's bound.
type Budget struct {
	left atomic.Int64
	done atomic.Bool
}

// Done lifts the bound: the handshake is over (whether it succeeded or
// not), and the connection's frames are bounded by the WebSocket's own
// read limit.
func (b *Budget) Done() { b.done.Store(true) }

// conn reads at most its budget's bytes until the budget is done.
type conn struct {
	net.Conn
	b *Budget
}

func (c *conn) Read(p []byte) (int, error) {
	if c.b.done.Load() {
		return c.Conn.Read(p)
	}
	left := c.b.left.Load()
	if left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	c.b.left.Add(-int64(n))
	return n, err
}

// Bounded returns a copy of d whose connections read at most Max bytes
// until the returned budget is done. It dials as d would: with its
// NetDialTLSContext, NetDialContext or NetDial, else a net.Dialer. Use the
// copy for one dial.
func Bounded(d *websocket.Dialer) (*websocket.Dialer, *Budget) {
	b := &Budget{}
	b.left.Store(Max)
	bd := *d
	wrap := func(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
		return func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &conn{Conn: c, b: b}, nil
		}
	}
	dial := d.NetDialContext
	switch {
	case dial != nil:
	case d.NetDial != nil:
		nd := d.NetDial
		dial = func(_ context.Context, network, addr string) (net.Conn, error) { return nd(network, addr) }
	default:
		dial = new(net.Dialer).DialContext
	}
	bd.NetDialContext = wrap(dial)
	bd.NetDial = nil
	if d.NetDialTLSContext != nil {
		bd.NetDialTLSContext = wrap(d.NetDialTLSContext)
	}
	return &bd, b
}
