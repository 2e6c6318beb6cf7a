package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"syscall"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/metrics"
	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// httpPart is the node's SNAP transport over HTTP, SSE and WebSocket.
type httpPart struct {
	url  string // http://host:port
	srv  *snaphttp.Server
	done chan error
}

// startHTTP serves server and the node's card over HTTP on
// cfg.HTTPListen until ctx ends or stop is called (stop waits for the
// requests in flight; see snaphttp.Server); the metrics at /metrics
// unless cfg.MetricsListen puts them on an address of its own
// (startMetrics), to clients on loopback only unless cfg.MetricsPublic,
// logging where they are served and to whom; and, when the node runs
// proposals, the operator console at /console. With no address it does
// nothing. When the
// address is the default one and it is taken (another node on this
// machine), the node runs without HTTP and says so: only an address set
// on purpose must be free.
func (n *Node) startHTTP(ctx context.Context, server *snap.Server, mx *metrics.Metrics) (stop func() error, err error) {
	nothing := func() error { return nil }
	if n.cfg.HTTPListen == "" {
		return nothing, nil
	}
	metricsHandler := mx.Handler()
	if n.cfg.MetricsListen != "" {
		metricsHandler = nil // 404 here
	}
	ln, err := net.Listen("tcp", n.cfg.HTTPListen)
	if err != nil {
		if n.cfg.HTTPListen == config.DefaultHTTPListen && errors.Is(err, syscall.EADDRINUSE) {
			n.logger.Warn("HTTP transport off: its default address is taken; set --http-listen to serve it", "addr", n.cfg.HTTPListen, "err", err)
			return nothing, nil
		}
		return nil, fmt.Errorf("node: http: http_listen (--http-listen): %w: give a free address, or off", err)
	}
	con, err := n.newConsole(mx)
	if err != nil {
		ln.Close()
		return nil, err
	}
	cfg := snaphttp.Config{
		Handler: server,
		Key:     n.key, Card: n.Card, Address: n.Address(), Metrics: metricsHandler, MetricsPublic: n.cfg.MetricsPublic,
		Logger:  n.logger.With("part", "http"),
		MaxBody: n.cfg.HTTPMaxBody, Rate: perSecond(n.cfg.HTTPRate), Burst: n.cfg.HTTPBurst, BodyMemory: n.cfg.HTTPBodyMemory,
		MaxResponse: int(n.cfg.HTTPMaxResponse), AnswerMemory: n.cfg.HTTPAnswerMemory,
		MaxTCPConns: n.cfg.HTTPMaxConns, MaxTCPConnsPerPeer: n.cfg.HTTPMaxConnsPerPeer,
		MonitorRate: perSecond(n.cfg.MonitorRate), MonitorBurst: n.cfg.MonitorBurst,
		AllowedOrigins: n.cfg.HTTPAllowedOrigins, AllowedHosts: httpHosts(n.cfg),
	}
	if con != nil {
		cfg.Console = con
	}
	srv, err := snaphttp.New(cfg)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("node: http: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	n.http = &httpPart{url: "http://" + dialAddr(ln.Addr()), srv: srv, done: make(chan error, 1)}
	go func() { n.http.done <- srv.Serve(ctx, ln) }()
	n.logger.Info("serving SNAP over HTTP and WebSocket", "url", n.http.url+"/snap")
	switch {
	case metricsHandler == nil:
	case n.cfg.MetricsPublic:
		n.logger.Info("serving metrics", "url", n.http.url+"/metrics", "clients", "any")
	default:
		n.logger.Info("serving metrics", "url", n.http.url+"/metrics", "clients", "loopback",
			"others", "get 404; set metrics_listen, or metrics_public, to serve Prometheus on another machine")
	}
	if con != nil {
		n.console.Store(&consoleLogin{c: con, base: loginBase(ln.Addr())})
		n.logger.Info("serving the operator console; snapnode console-url prints a login link", "url", n.http.url+"/console/", "remote_clients", n.cfg.ConsoleRemote)
	}
	return func() error { cancel(); return <-n.http.done }, nil
}

// httpHosts are the host names the HTTP transport answers to besides IP
// addresses and loopback names: http_allowed_hosts, the names of
// http_listen, http_public_url and the card's endpoints, and the
// machine's own name (and its mDNS form, NAME.local), by which a node
// listening beyond loopback is reached on its network: a name a
// rebinding page, whose Host is a domain of its own, cannot take.
func httpHosts(cfg config.Config) []string {
	hosts := slices.Clone(cfg.HTTPAllowedHosts)
	if name, err := os.Hostname(); err == nil && name != "" {
		for _, h := range []string{name, name + ".local"} {
			if _, err := origins.ParseHosts([]string{h}); err == nil { // a name the list takes
				hosts = append(hosts, h)
			}
		}
	}
	if h, _, err := net.SplitHostPort(cfg.HTTPListen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	urls := []string{cfg.HTTPPublicURL}
	for _, e := range cfg.Card.Endpoints {
		urls = append(urls, e.URL)
	}
	for _, s := range urls {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			hosts = append(hosts, u.Hostname())
		}
	}
	return hosts
}

// perSecond is a rate setting (http_rate, monitor_rate) as snaphttp
// takes it: 0 is no limit.
func perSecond(r float64) rate.Limit {
	if r == 0 {
		return rate.Inf
	}
	return rate.Limit(r)
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

// metricsPart serves /metrics on an address of its own.
type metricsPart struct {
	url  string // http://host:port
	srv  *snaphttp.MonitorServer
	done chan error
}

// startMetrics serves metrics at /metrics on cfg.MetricsListen with the
// HTTP transport's guards (snaphttp.MonitorServer): limited per peer
// like its monitoring (monitor_rate), to the host names it answers to
// (metricsHosts), with capped connections; until ctx ends or stop is
// called (stop waits for it and returns why it stopped). With no address
// it does nothing.
func (n *Node) startMetrics(ctx context.Context, metrics http.Handler) (stop func() error, err error) {
	if n.cfg.MetricsListen == "" {
		return func() error { return nil }, nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv, err := snaphttp.NewMonitor(mux, snaphttp.MonitorConfig{
		Rate: perSecond(n.cfg.MonitorRate), Burst: n.cfg.MonitorBurst,
		AllowedHosts: metricsHosts(n.cfg), Logger: n.logger.With("part", "metrics"),
	})
	if err != nil {
		return nil, fmt.Errorf("node: metrics: %w", err)
	}
	ln, err := net.Listen("tcp", n.cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("node: metrics: metrics_listen (--metrics-listen): %w: give a free address", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	n.metrics = &metricsPart{url: "http://" + ln.Addr().String(), srv: srv, done: make(chan error, 1)}
	go func() { n.metrics.done <- srv.Serve(ctx, ln) }()
	n.logger.Info("serving metrics", "url", n.metrics.url+"/metrics", "clients", "any")
	if n.cfg.MetricsPublic {
		n.logger.Warn("metrics_public does nothing with metrics_listen: the address of metrics_listen serves every client that reaches it")
	}
	return func() error { cancel(); return <-n.metrics.done }, nil
}

// metricsHosts are the host names metrics_listen answers to: those of
// the HTTP transport (httpHosts) and the host of metrics_listen.
func metricsHosts(cfg config.Config) []string {
	hosts := httpHosts(cfg)
	if h, _, err := net.SplitHostPort(cfg.MetricsListen); err == nil && h != "" {
		hosts = append(hosts, h)
	}
	return hosts
}

// MetricsURL returns the base URL /metrics is served at on an address of
// its own (metrics_listen), or "" when it is served by the HTTP transport
// or not at all.
func (n *Node) MetricsURL() string {
	if n.metrics == nil {
		return ""
	}
	return n.metrics.url
}
