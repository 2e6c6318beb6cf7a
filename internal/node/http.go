package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// httpPart is the node's SNAP transport over HTTP, SSE and WebSocket.
type httpPart struct {
	url  string // http://host:port
	done chan error
}

// startHTTP serves server and the node's card over HTTP on
// cfg.HTTPListen until ctx ends (see snaphttp.Server); metrics, when not
// nil, is served at /metrics. With no address it does nothing. When the
// address is the default one and it is taken (another node on this
// machine), the node runs without HTTP and says so: only an address set
// on purpose must be free.
func (n *Node) startHTTP(ctx context.Context, server *snap.Server, metrics http.Handler) error {
	if n.cfg.HTTPListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.HTTPListen)
	if err != nil {
		if n.cfg.HTTPListen == config.DefaultHTTPListen && errors.Is(err, syscall.EADDRINUSE) {
			n.logger.Warn("HTTP transport off: its default address is taken; set --http-listen to serve it", "addr", n.cfg.HTTPListen, "err", err)
			return nil
		}
		return fmt.Errorf("node: http: %w", err)
	}
	limit := rate.Limit(n.cfg.HTTPRate)
	if n.cfg.HTTPRate == 0 {
		limit = rate.Inf
	}
	srv, err := snaphttp.New(snaphttp.Config{
		Responder: server, IsStream: server.IsStream,
		Key: n.key, Card: n.Card, Address: n.Address(), Metrics: metrics,
		Logger:  n.logger.With("part", "http"),
		MaxBody: n.cfg.HTTPMaxBody, Rate: limit, Burst: n.cfg.HTTPBurst, BodyMemory: n.cfg.HTTPBodyMemory,
		MaxTCPConns: n.cfg.HTTPMaxConns, MaxTCPConnsPerPeer: n.cfg.HTTPMaxConnsPerPeer,
	})
	if err != nil {
		ln.Close()
		return fmt.Errorf("node: http: %w", err)
	}
	n.http = &httpPart{url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	go func() { n.http.done <- srv.Serve(ctx, ln) }()
	n.logger.Info("serving SNAP over HTTP and WebSocket", "url", n.http.url+"/snap")
	return nil
}

// HTTPURL returns the base URL of the node's HTTP transport (its
// endpoint is HTTPURL()+"/snap", its card HTTPURL()+
// "/.well-known/snap-agent.json"), or "" when HTTP is off.
func (n *Node) HTTPURL() string {
	if n.http == nil {
		return ""
	}
	return n.http.url
}

// waitHTTP waits for the HTTP transport to finish its requests in flight
// after the node's context ended.
func (n *Node) waitHTTP() error {
	if n.http == nil {
		return nil
	}
	return <-n.http.done
}
