package snaphttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/peercap"
)

// Monitor returns h limited per peer (an IPv4 address or an IPv6 /64) to
// r requests a second with bursts of burst, as a Server limits its
// /healthz and /metrics (Config.MonitorRate): without a token a request
// gets 429 with Retry-After and h is not called. It is for monitoring
// endpoints served on a listener of their own; r <= 0 takes
// DefaultMonitorRate, burst <= 0 DefaultMonitorBurst, rate.Inf disables.
// A MonitorServer also checks the host names and caps the connections.
func Monitor(h http.Handler, r rate.Limit, burst int) http.Handler {
	if r <= 0 {
		r = DefaultMonitorRate
	}
	if burst <= 0 {
		burst = DefaultMonitorBurst
	}
	l := newLimits(r, burst, DefaultMaxPeers, time.Now)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if admitPeer(l, w, req) {
			h.ServeHTTP(w, req)
		}
	})
}

// Defaults of MonitorConfig's connection caps: a scraper holds one
// connection, a few at most.
const (
	DefaultMonitorConns        = 64
	DefaultMonitorConnsPerPeer = 8
)

// MonitorConfig configures a MonitorServer. Every zero limit takes its
// default.
type MonitorConfig struct {
	// Rate and Burst limit each peer as Monitor does.
	Rate  rate.Limit
	Burst int
	// AllowedHosts are the host names a request may be addressed to
	// besides IP addresses and loopback names, as Config.AllowedHosts:
	// a request to another name gets 421 (DNS rebinding).
	AllowedHosts []string
	// MaxTCPConns and MaxTCPConnsPerPeer cap the connections held, as
	// Config's do (DefaultMonitorConns, DefaultMonitorConnsPerPeer).
	MaxTCPConns, MaxTCPConnsPerPeer int
	Logger                          *slog.Logger
}

// MonitorServer serves a monitoring handler (the node's /metrics) on a
// listener of its own with the HTTP transport's guards: the host names
// it answers to (421 for another), a rate per peer (429), caps on the
// connections in all and per peer (as Config.MaxTCPConns), bounded
// headers and time-outs for reading and writing.
type MonitorServer struct {
	h           http.Handler
	cfg         MonitorConfig
	hosts       atomic.Pointer[origins.Hosts]
	refusedHost atomic.Bool
	serving     atomic.Bool
}

// NewMonitor returns a MonitorServer of h.
func NewMonitor(h http.Handler, cfg MonitorConfig) (*MonitorServer, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxTCPConns <= 0 {
		cfg.MaxTCPConns = DefaultMonitorConns
	}
	if cfg.MaxTCPConnsPerPeer <= 0 {
		cfg.MaxTCPConnsPerPeer = DefaultMonitorConnsPerPeer
	}
	cfg.MaxTCPConnsPerPeer = min(cfg.MaxTCPConnsPerPeer, cfg.MaxTCPConns)
	m := &MonitorServer{h: Monitor(h, cfg.Rate, cfg.Burst), cfg: cfg}
	if err := m.SetAllowedHosts(cfg.AllowedHosts); err != nil {
		return nil, err
	}
	return m, nil
}

// SetAllowedHosts changes the host names answered to, as
// Server.SetAllowedHosts does.
func (m *MonitorServer) SetAllowedHosts(list []string) error {
	hosts, err := origins.ParseHosts(list)
	if err != nil {
		return fmt.Errorf("snaphttp: monitor: allowed hosts: %w", err)
	}
	m.hosts.Store(&hosts)
	return nil
}

// ServeHTTP implements http.Handler.
func (m *MonitorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !m.hosts.Load().Allows(r.Host) {
		refuseHost(w, r, m.cfg.Logger, &m.refusedHost)
		return
	}
	m.h.ServeHTTP(w, r)
}

// Serve serves on ln until ctx ends, then shuts down, waiting up to 5
// seconds for the requests in flight. A MonitorServer serves once.
func (m *MonitorServer) Serve(ctx context.Context, ln net.Listener) error {
	if !m.serving.CompareAndSwap(false, true) {
		ln.Close()
		return ErrServing
	}
	limited := peercap.NewListener(ln, peercap.ListenerConfig{Total: m.cfg.MaxTCPConns, PerPeer: m.cfg.MaxTCPConnsPerPeer, Refuse: refuseConns(m.cfg.MaxTCPConns, m.cfg.MaxTCPConnsPerPeer)})
	srv := &http.Server{
		Handler:           m,
		ReadHeaderTimeout: DefaultHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultReadTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnState:         limited.ConnState,
		ErrorLog:          slog.NewLogLogger(m.cfg.Logger.Handler(), slog.LevelDebug),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(limited) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	grace, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(grace)
	if errors.Is(err, context.DeadlineExceeded) {
		srv.Close()
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}
