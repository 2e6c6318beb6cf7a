package relaytest

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
)

// Serve starts an embedded relay configured by cfg on a loopback port and
// returns its WebSocket URL; the relay is stopped and closed when tb
// ends. An empty cfg.DBPath keeps its events in memory, a nil cfg.Logger
// discards its log.
func Serve(tb testing.TB, cfg embedded.Config) string {
	tb.Helper()
	if cfg.DBPath == "" {
		cfg.DBPath = ":memory:"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rel, err := embedded.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rel.Close()
		tb.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- rel.Serve(ctx, ln) }()
	tb.Cleanup(func() { stop(); <-served; rel.Close() })
	return embedded.WebSocketURL(ln.Addr())
}

// Cuttable dials relays as relay.DialWebsocket does, except that the
// relay at URL can be made unreachable: while it is cut, dialing it fails
// with net.ErrClosed. Use its Dial as a relay.PoolConfig's. It is safe for
// concurrent use.
type Cuttable struct {
	URL string

	cut  atomic.Bool
	mu   sync.Mutex
	conn relay.Conn // the last connection made to URL
}

// Dial connects to url, unless url is c's and c is cut.
func (c *Cuttable) Dial(ctx context.Context, url string) (relay.Conn, error) {
	if url == c.URL && c.cut.Load() {
		return nil, net.ErrClosed
	}
	conn, err := relay.DialWebsocket(ctx, url)
	if err == nil && url == c.URL {
		c.mu.Lock()
		c.conn = conn
		c.mu.Unlock()
	}
	return conn, err
}

// Cut makes c's relay unreachable and closes the connection last made to
// it, if any.
func (c *Cuttable) Cut() {
	c.cut.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		c.conn.Close()
	}
}

// Restore lets c's relay be dialed again.
func (c *Cuttable) Restore() { c.cut.Store(false) }
