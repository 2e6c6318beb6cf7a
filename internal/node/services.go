package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Option adds to a node what settings cannot: code.
type Option func(*options)

type options struct {
	services []namedService
	level    *slog.LevelVar
	// pause, when set, is called at the points of a proposal's run that
	// a crash test stops the process at (proposals.PointRun, PointRan,
	// PointDecided).
	pause func(point string)
	// cardWait, when set (tests), replaces cardStartWait.
	cardWait time.Duration
	// uid, when set (tests), is taken for the user the node runs as, in
	// place of os.Geteuid, in the checks of the data folder's owner.
	uid *int
	// stepsGrace, when set (tests), replaces snaphttp.DefaultShutdownTimeout
	// as the time the steps after requests' commits have, once the node's
	// context ended, before they are stopped.
	stepsGrace time.Duration
	// loopEvery, when set (tests), replaces the interval of each of the
	// node's periodic loops on the database (options.loopInterval).
	loopEvery time.Duration
	// sandboxDuration, when set (tests), is the sandbox's MaxDuration.
	sandboxDuration time.Duration
}

type namedService struct {
	name    string
	h       servicecall.Handler
	timeout time.Duration // 0: service_timeout
}

// WithService offers h as the service name over service/call. Only the
// identities in the settings' service_callers may call it. The node
// offers "status" itself; Start fails on that name, on a name given
// twice, and on a name servicecall.CheckName refuses. A node with such a
// service commits every request's replay record to the disk before the
// request is handled (h may act outside the node's database, where no
// later write would carry the record there); without one, only the writes
// a request makes wait for the disk.
//
// Each call of h is bounded by service_timeout, not request_timeout: its
// context ends when it passes, and a call that has not answered then is
// answered 2006 (the id was spent before h ran: a new call needs a new
// id), as is one that fails with 5001, 5002 or 5003 or a plain error. A
// service that may take longer declares its own bound with
// WithServiceTimeout.
func WithService(name string, h servicecall.Handler) Option {
	return WithServiceTimeout(name, 0, h)
}

// WithServiceTimeout is WithService for a service whose calls are bounded
// by timeout in place of service_timeout (0: service_timeout).
func WithServiceTimeout(name string, timeout time.Duration, h servicecall.Handler) Option {
	return func(o *options) { o.services = append(o.services, namedService{name, h, timeout}) }
}

// WithLogLevel gives the node the level of its logger, so that Reload
// can change it (log_level); without it, log_level needs a restart.
func WithLogLevel(v *slog.LevelVar) Option {
	return func(o *options) { o.level = v }
}

// startServices makes the registry of the node's services, the built-in
// status and those of opts, and registers it on router.
func (n *Node) startServices(router *snap.Router, store tasks.Store, opts options) error {
	reg, err := servicecall.New(servicecall.Config{Allow: n.cfg.ServiceCallers, Logger: n.logger.With("part", "service"),
		Timeout: n.cfg.ServiceTimeout.Duration})
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	// status reads the database, as any request does: request_timeout
	// bounds it.
	all := append([]namedService{{"status", n.statusService(store), n.cfg.RequestTimeout.Duration}}, opts.services...)
	seen := map[string]bool{}
	for _, s := range all {
		if err := servicecall.CheckName(s.name); err != nil {
			return fmt.Errorf("node: %w", err)
		}
		if seen[s.name] {
			return fmt.Errorf("node: service %q offered twice", s.name)
		}
		seen[s.name] = true
		timeout := s.timeout
		if timeout <= 0 {
			timeout = n.cfg.ServiceTimeout.Duration
		}
		reg.HandleTimeout(s.name, timeout, s.h)
	}
	router.Handle(servicecall.Method, reg.Serve)
	n.services = reg
	return nil
}

// statusService answers "status": who the node is, since when it runs,
// its relays and their states, its HTTP endpoint, and its tasks by state.
func (n *Node) statusService(store tasks.Store) servicecall.Handler {
	started := time.Now()
	return func(ctx context.Context, c *servicecall.Call) (any, error) {
		if err := c.Bind(&struct{}{}); err != nil {
			return nil, err
		}
		counts, err := store.CountByState(ctx)
		if err != nil {
			return nil, err
		}
		byState := map[string]int64{}
		for _, st := range tasks.States() {
			byState[string(st)] = counts[st]
		}
		type relayState struct {
			URL   string `json:"url"`
			State string `json:"state"`
		}
		var relays []relayState
		for _, h := range n.pool.Health() {
			relays = append(relays, relayState{h.URL, string(h.State)})
		}
		card := n.Card()
		reply := map[string]any{
			"address": n.Address(), "name": card.Name, "version": card.Version,
			"protocolVersion": snap.ProtocolVersion,
			"uptimeSeconds":   int64(time.Since(started) / time.Second),
			"relays":          relays, "tasks": byState,
		}
		if u := n.HTTPURL(); u != "" {
			reply["http"] = u + "/snap"
		}
		return reply, nil
	}
}
