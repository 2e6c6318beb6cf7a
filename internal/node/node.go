package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Node is a running snapnode.
type Node struct {
	cfg     config.Config
	key     *identity.Key
	network identity.Network
	logger  *slog.Logger
	// parts are the started parts, which Wait stops in reverse order.
	parts lifecycle
	// loops counts the passes of the periodic loops on the database.
	loops loopPasses
	// stepsLife is the lifetime of the steps after requests' commits
	// (tasks.ServiceOptions.Lifetime).
	stepsLife context.Context
	relay     *embedded.Relay // nil when relays are configured
	urls      []string
	pool      *relay.Pool
	http      *httpPart    // nil when HTTP is off
	metrics   *metricsPart // nil unless metrics_listen is set
	// exec carries proposals out, props owns their lifecycle (decisions,
	// reconcile); both nil on the memory database.
	exec  *executorPart
	props *proposals.Proposals
	// console, once the HTTP listener serves it, issues the login URLs
	// the admin socket hands out.
	console atomic.Pointer[consoleLogin]
	// agent works on free-text tasks; nil when none is configured.
	agent *agent.Runtime
	// cardMu guards cfg's settings that change live and the card's state
	// below; it serializes UpdateCard and Reload. It is never held while
	// the card is published.
	cardMu sync.Mutex
	// card is the card in force, read without cardMu (Card): a reader
	// (the HTTP well-known card) never waits for a publication.
	card atomic.Pointer[snap.Card]
	// cardGen counts the cards put in force (setCard), so that a
	// publication of one replaced meanwhile is not taken for the new one's.
	cardGen uint64
	// cardOut: a relay took the card in force; until then publishCards
	// keeps trying. cardDone is closed when it becomes true.
	cardOut  bool
	cardDone chan struct{}
	// cardNew tells publishCards of a new card (setCard); cardTry, while
	// a try runs, gives it up.
	cardNew chan struct{}
	cardTry context.CancelFunc
	// The settings that change live (see Reload) are applied to these.
	services       *servicecall.Registry
	identityLimits *ratelimit.Limiter
	nostrKeyLimits *ratelimit.Limiter
	// nostrKeyShare sets nostrKeyLimits to this process's share of the
	// configured allowance when replicas share the requests out.
	nostrKeyShare *keyLimitShare
	level         *slog.LevelVar // nil: log_level needs a restart
	Tasks         *tasks.Service
	// DB is the database of tasks, replay records and the audit log; nil
	// when the node runs on the memory store.
	DB *sqldb.DB
}

// dialAddr is host:port to reach the listener at a from this machine: a
// listener on every interface (0.0.0.0 or ::, as in a container) is
// reached on loopback, which is also the only host a ws:// relay URL in
// the card may have.
func dialAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
	}
	return a.String()
}

// limiter returns token buckets of rate a second and bursts of burst per
// key; a rate of 0 limits nothing until Reload sets one.
func limiter(rate float64, burst int) *ratelimit.Limiter {
	return ratelimit.New(ratelimit.Config{Rate: rate, Burst: burst})
}

// ErrNoKeyFile: the key file the operator named does not exist. Only the
// default file in the data folder is created on first start; a named one
// that is missing is a mistake (a wrong path would otherwise silently give
// the node a new identity).
var ErrNoKeyFile = errors.New("the key file does not exist")

// ExistingKey returns the node's identity key as `snapnode run` finds it:
// the key in SNAPNODE_KEY, else in the key file; nil when there is no key
// file yet.
func ExistingKey(cfg config.Config) (*identity.Key, error) {
	if k, err := identity.FromEnv(); k != nil || err != nil {
		return k, err
	}
	k, err := identity.LoadKeyFile(cfg.KeyPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return k, err
}

// nonEmptyFile reports whether path names a file that holds bytes.
func nonEmptyFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// loadOrCreateKey returns ExistingKey, creating the default key file
// (0600) with a new key on first start.
func loadOrCreateKey(cfg config.Config, logger *slog.Logger) (*identity.Key, error) {
	k, err := ExistingKey(cfg)
	if k != nil || err != nil {
		return k, err
	}
	path := cfg.KeyPath()
	if cfg.KeyFile != "" {
		return nil, fmt.Errorf("%w: %s (snapnode keygen --out %s makes one; without --key the node keeps its identity in its data folder)", ErrNoKeyFile, path, path)
	}
	// A task database already written is an identity's: without its key
	// (a restore that left identity.key out), a new one would carry its
	// tasks and audit log on under another address. (privateFiles made
	// an empty one on a first start.)
	if db, ok := sqldb.SQLitePath(cfg.DatabaseDSN()); ok && cfg.DatabaseDSN() != config.MemoryDatabase && nonEmptyFile(db) {
		return nil, fmt.Errorf("%w: %s, but the task database %s exists: it holds the tasks and audit log of the identity that key was; put its key file back (a backup has it as identity.key), or move the database away to start a new identity", ErrNoKeyFile, path, db)
	}
	if k, err = identity.Generate(); err != nil {
		return nil, err
	}
	if err := identity.SaveKeyFile(path, k); err != nil {
		return nil, err
	}
	logger.Info("created a new identity", "file", path, "address", k.Address(identity.Mainnet))
	return k, nil
}

// Address returns the node's P2TR address.
func (n *Node) Address() string { return n.key.Address(n.network) }

// NostrPublicKey returns the node's Nostr key (hex).
func (n *Node) NostrPublicKey() string { return n.key.NostrPublicKey() }

// RelayURLs returns the relays the node uses.
func (n *Node) RelayURLs() []string { return n.urls }

// Card returns the card in force: the one served over HTTP, published
// to the relays (or being published, see publishCards).
func (n *Node) Card() *snap.Card { return n.card.Load() }
