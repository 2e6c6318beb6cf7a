package snapnostr

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// Shares divides the Nostr requests among the replicas of one identity:
// processes sharing one key and one database, each subscribed to the same
// relays and so receiving every request. An Inbox with Shares opens,
// verifies and answers only the requests that are Mine, and keeps the
// others for Grace; a request still not Mine then is left to its owner.
// A request another replica owned becomes Mine when that replica stops
// receiving, and is then taken up at once.
//
// Sharing saves work and never decides an answer: a request taken by two
// replicas is answered once (the replay record in the shared database
// decides, as without Shares), and one taken by none is the only failure
// it could cause, which Grace rules out as long as a replica that stops
// receiving leaves the others' view within it. Implementations must be
// safe for concurrent use; Mine must be cheap (it runs for every event).
type Shares interface {
	// Mine reports whether this process takes the request whose Nostr
	// event has this id.
	Mine(id [32]byte) bool
	// Grace is how long a request that is not Mine is kept in case its
	// owner turns out gone.
	Grace() time.Duration
}

var _ Shares = (*Replicas)(nil)

// ReplicasConfig configures Replicas.
type ReplicasConfig struct {
	// Beat is how often this process writes its beat and reads the
	// others' (default 500 ms); a replica whose beat has not moved for
	// Expire (default 4 × Beat) is taken to be gone.
	Beat, Expire time.Duration
	// Receiving reports whether this process receives requests now (its
	// inbox subscribed and a relay connected); while it does not, the
	// others take its share. Nil: always.
	Receiving func() bool
	// OnChange, when set, is told how many replicas share the requests
	// (Alive) each time that changes, in Run's goroutine.
	OnChange func(alive int)
	Logger   *slog.Logger
	Now      func() time.Time // default time.Now
}

// Replicas is the Shares of the processes that keep their inbox's
// checkpoint in one database: each beats its row in inbox_replicas, reads
// the others', and takes the requests whose event id scores highest for
// it among those alive and receiving (rendezvous hashing: when a replica
// comes or goes, only the requests that were or become its own change
// hands). The view is this process's own: it needs no clock shared with
// the others, since a replica counts as alive while its beat keeps moving
// as seen here. A replica seen for the first time counts once its beat
// has moved: until then its share is taken here too (work done twice,
// answered once), never left waiting.
//
// A peer that chooses its events' ids can steer its own requests to one
// replica (the score is public); it cannot make a request be skipped.
type Replicas struct {
	db   *sqldb.DB
	cfg  ReplicasConfig
	id   string
	seed uint64
	view atomic.Pointer[replicaView]
	// seen is the last beat read of each other replica and when, by this
	// process's clock, it last moved; only Run's goroutine touches it.
	seen map[string]beatSeen
}

// replicaView is what Mine reads: the seeds of the other replicas alive
// and receiving, whether this one receives, and until when the view holds
// (Expire after the read it comes from: a process that cannot read the
// others' beats for that long takes every request, since it can no longer
// tell that their owners are alive).
type replicaView struct {
	others    []uint64
	receiving bool
	until     time.Time
}

type beatSeen struct {
	beat  int64
	seed  uint64 // replicaSeed of its id
	moved time.Time
	alive bool // moved at least once since first seen
}

// alive is how many replicas v counts as alive and receiving, this one
// included when it receives.
func (v *replicaView) alive() int { return len(v.others) + b2i(v.receiving) }

// OpenReplicas returns this process's Replicas on db, after bringing the
// table up to date; it beats only once Run runs. Until the first beat
// is read, every request is Mine.
func OpenReplicas(ctx context.Context, db *sqldb.DB, cfg ReplicasConfig) (*Replicas, error) {
	if err := db.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("snapnostr: replicas: %w", err)
	}
	defaults.Positive(&cfg.Beat, 500*time.Millisecond)
	defaults.Positive(&cfg.Expire, 4*cfg.Beat)
	if cfg.Receiving == nil {
		cfg.Receiving = func() bool { return true }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("snapnostr: replicas: %w", err)
	}
	r := &Replicas{db: db, cfg: cfg, id: hex.EncodeToString(b[:]), seen: make(map[string]beatSeen)}
	r.seed = replicaSeed(r.id)
	r.view.Store(&replicaView{receiving: true, until: cfg.Now().Add(cfg.Expire)})
	return r, nil
}

// ID names this process among the replicas (random, new at each start).
func (r *Replicas) ID() string { return r.id }

// ownerMargin is how long a replica may hold a request it received
// before it records it as taken (its queue, its checks): a request that
// came that long before its owner died is still taken up by another.
const ownerMargin = 2 * time.Second

// Grace implements Shares: the longest a replica that died (or stopped
// receiving) stays in another's view — seen beating up to a Beat after its
// last beat, counted gone Expire after that, at the next read a Beat
// later — and ownerMargin more.
func (r *Replicas) Grace() time.Duration { return r.cfg.Expire + 2*r.cfg.Beat + ownerMargin }

// Mine implements Shares.
func (r *Replicas) Mine(id [32]byte) bool {
	v := r.view.Load()
	if !v.receiving || len(v.others) == 0 || r.cfg.Now().After(v.until) {
		// Not receiving: nothing comes here but what a relay still
		// brings, which this process may as well answer.
		return true
	}
	key := binary.LittleEndian.Uint64(id[:8])
	mine := score(r.seed, key)
	for _, s := range v.others {
		if score(s, key) > mine {
			return false
		}
	}
	return true
}

// Alive returns how many replicas this process counts as alive and
// receiving, itself included when it receives.
func (r *Replicas) Alive() int { return r.view.Load().alive() }

// Run beats and reads the others' beats every Beat until ctx ends, then
// deletes this process's row, so that the others take its share at once.
// A failed beat or read is logged and tried again at the next.
func (r *Replicas) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Beat)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, r.cfg.Expire)
		err := r.step(sctx, r.cfg.Now())
		cancel()
		if err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("replicas: beat", "err", err)
			r.expire(r.cfg.Now())
		}
		select {
		case <-ctx.Done():
			leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := r.remove(leave, r.db.Write, r.id); err != nil {
				return fmt.Errorf("snapnostr: replicas: leave: %w", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// expire drops the others from a view that has not been renewed for
// Expire (Mine takes every request from then on anyway), and says so.
func (r *Replicas) expire(now time.Time) {
	v := r.view.Load()
	if len(v.others) == 0 || !now.After(v.until) {
		return
	}
	nv := &replicaView{receiving: v.receiving, until: v.until}
	r.view.Store(nv)
	r.cfg.Logger.Warn("replicas: the others' beats could not be read for a while; taking every request", "for", now.Sub(v.until)+r.cfg.Expire)
	if r.cfg.OnChange != nil {
		r.cfg.OnChange(nv.alive())
	}
}

// remove deletes the row of replica id with write (the database's Write
// or WriteNoSync).
func (r *Replicas) remove(ctx context.Context, write func(context.Context, func(context.Context, *sql.Tx) error) error, id string) error {
	return write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, r.db.Dialect.Rebind(`DELETE FROM inbox_replicas WHERE replica = ?`), id)
		return err
	})
}

// step writes this process's beat, reads every row and updates the view.
func (r *Replicas) step(ctx context.Context, now time.Time) error {
	receiving := r.cfg.Receiving()
	// A beat lost to a power cut is of no concern: the next one counts.
	err := r.db.WriteNoSync(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, r.db.Dialect.Rebind(`INSERT INTO inbox_replicas (replica, beat, receiving) VALUES (?, 1, ?)
			ON CONFLICT (replica) DO UPDATE SET beat = inbox_replicas.beat + 1, receiving = excluded.receiving`), r.id, b2i(receiving))
		return err
	})
	if err != nil {
		return err
	}
	rows, err := r.db.R.QueryContext(ctx, `SELECT replica, beat, receiving FROM inbox_replicas`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var others []uint64
	var gone []string
	present := make(map[string]bool, len(r.seen))
	for rows.Next() {
		var id string
		var beat, recv int64
		if err := rows.Scan(&id, &beat, &recv); err != nil {
			return err
		}
		if id == r.id {
			continue
		}
		present[id] = true
		s, known := r.seen[id]
		switch {
		case !known:
			s = beatSeen{beat: beat, seed: replicaSeed(id), moved: now}
		case beat != s.beat:
			s.beat, s.moved, s.alive = beat, now, true
		}
		r.seen[id] = s
		fresh := now.Sub(s.moved) < r.cfg.Expire
		if s.alive && fresh && recv == 1 {
			others = append(others, s.seed)
		}
		if !fresh && now.Sub(s.moved) > 10*r.cfg.Expire {
			gone = append(gone, id) // killed long ago: its row goes
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for id := range r.seen {
		if !present[id] {
			delete(r.seen, id)
		}
	}
	slices.Sort(others)
	old, v := r.view.Load(), &replicaView{others: others, receiving: receiving, until: now.Add(r.cfg.Expire)}
	r.view.Store(v)
	if old.receiving != receiving || !slices.Equal(old.others, others) {
		r.cfg.Logger.Info("replicas: sharing the requests", "alive", v.alive(), "receiving", receiving)
		if r.cfg.OnChange != nil && old.alive() != v.alive() {
			r.cfg.OnChange(v.alive())
		}
	}
	for _, id := range gone {
		if err := r.remove(ctx, r.db.WriteNoSync, id); err != nil {
			return err
		}
		delete(r.seen, id)
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// replicaSeed is a replica's part of every score: the first 8 bytes of
// the SHA-256 of its id.
func replicaSeed(id string) uint64 {
	sum := sha256.Sum256([]byte(id))
	return binary.LittleEndian.Uint64(sum[:8])
}

// score is a replica's claim on a request: SplitMix64's finalizer over
// the replica's seed and the first 8 bytes of the event id (themselves
// SHA-256 output), so every replica computes every score alike and each
// request's highest score falls to each replica in turn.
func score(seed, key uint64) uint64 {
	z := seed ^ key
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
