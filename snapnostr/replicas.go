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
	"strconv"
	"strings"
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
	// Counted reports whether the other replicas count this process
	// among those sharing the requests. While they do not, they take
	// every request between them and Mine is false for all: a request
	// kept aside then is taken up only once its grace has passed, and
	// only if no process took it, even when it is Mine by then.
	Counted() bool
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
// has moved: until then its share is taken here, never left waiting.
//
// Each row also says whom its replica counts (column counts: the id of
// each, with the run read in its row: a number a replica changes each
// time it begins to receive, or again after its view expired). A replica
// takes no share of its own, and sets every request aside, until every
// other row beating and receiving names it with its present run, and it
// counts each of those rows' replicas in turn (Counted):
// the others, not counting it, take every request between them until
// then, and no request is taken on time by two replicas whose views
// differ, as when a replica starts, or receives again after a pause. A
// row is rewritten as soon as whom it counts changes. What a replica set
// aside before it was counted is taken up only once its grace has passed,
// if no process took it.
//
// A replica that cannot read the rows for Expire no longer knows whom the
// others count or whether their owners are alive: it takes every request
// that reaches it (availability first), and is counted afresh once it
// reads them again. Meanwhile another replica may take the same requests;
// the replay record decides, or, for answers without one, the record of
// the delivery (InboxConfig.Replay), which such a replica may fail to
// write, and then answers all the same.
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
	// process's clock, it last moved; run is this process's present run
	// (see Replicas; 0 while it does not receive), runs the last one
	// begun, counts the column as written last. Only Run's goroutine
	// touches them.
	seen      map[string]beatSeen
	run, runs int64
	counts    string
}

// replicaView is what Mine reads: the seeds of the other replicas alive
// and receiving, whether this one receives, whether the others count it
// (see Replicas), and until when the view holds (Expire after the read it
// comes from: a process that cannot read the others' beats for that long
// takes every request, since it can no longer tell that their owners are
// alive).
type replicaView struct {
	others    []uint64
	receiving bool
	counted   bool
	until     time.Time
}

type beatSeen struct {
	beat  int64
	run   int64  // as its row says
	seed  uint64 // replicaSeed of its id
	moved time.Time
	alive bool // moved at least once since first seen
}

// alive is how many replicas v counts as alive and receiving, this one
// included when it receives.
func (v *replicaView) alive() int { return len(v.others) + b2i(v.receiving) }

// OpenReplicas returns this process's Replicas on db, after bringing the
// table up to date; it beats only once Run runs. Until the others count
// it, no request is Mine; when it cannot read their beats for Expire, every
// request is.
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
	switch {
	case r.cfg.Now().After(v.until):
		return true // the others' beats cannot be read: take what comes
	case !v.counted:
		return false // the others take every request (not receiving: a relay still brings a few)
	case len(v.others) == 0:
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

// Counted implements Shares.
func (r *Replicas) Counted() bool { return r.view.Load().counted }

// Alive returns how many replicas this process counts as alive and
// receiving, itself included when it receives.
func (r *Replicas) Alive() int { return r.view.Load().alive() }

// Run beats and reads the others' beats every Beat until ctx ends, then
// deletes this process's row, so that the others take its share at once.
// A failed beat or read is logged and tried again at the next; a row not
// deleted within 5 s (the database not answering) is logged too: the
// others take the share once its beats expire.
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
				r.cfg.Logger.Warn("replicas: leave not recorded; the others take this process's share once its beats expire",
					"expire", r.cfg.Expire, "err", err)
			}
			return nil
		case <-t.C:
		}
	}
}

// expire drops the others from a view that has not been renewed for
// Expire (Mine takes every request from then on anyway), and says so; the
// others, seeing this process's beat stop, stopped counting it, which
// begins a new run at its next beat.
func (r *Replicas) expire(now time.Time) {
	v := r.view.Load()
	if !now.After(v.until) {
		return
	}
	r.run = 0
	if len(v.others) == 0 && !v.counted {
		return
	}
	nv := &replicaView{receiving: v.receiving, until: v.until}
	r.view.Store(nv)
	r.cfg.Logger.Warn("replicas: the others' beats could not be read for a while; taking every request", "for", now.Sub(v.until)+r.cfg.Expire)
	if r.cfg.OnChange != nil && nv.alive() != v.alive() {
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
	if old := r.view.Load(); old.counted && (!receiving || r.run == 0) {
		// Not counted from before the beat says so: the others, reading
		// it, take this process's share at once.
		nv := *old
		nv.counted = false
		r.view.Store(&nv)
	}
	switch {
	case !receiving:
		r.run = 0
	case r.run == 0:
		r.runs++
		r.run = r.runs
	}
	// A beat lost to a power cut is of no concern: the next one counts.
	err := r.db.WriteNoSync(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, r.db.Dialect.Rebind(`INSERT INTO inbox_replicas (replica, beat, receiving, run, counts) VALUES (?, 1, ?, ?, ?)
			ON CONFLICT (replica) DO UPDATE SET beat = inbox_replicas.beat + 1, receiving = excluded.receiving, run = excluded.run, counts = excluded.counts`),
			r.id, b2i(receiving), r.run, r.counts)
		return err
	})
	if err != nil {
		return err
	}
	rows, err := r.db.R.QueryContext(ctx, `SELECT replica, beat, receiving, run, counts FROM inbox_replicas`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		others  []uint64
		counts  []string // id:run of each replica counted
		gone    []string
		present = make(map[string]bool, len(r.seen))
		found   = false // this process's row is there
		// countedBy is false once a row beating and receiving does not
		// name this process with its run, or its replica is not counted
		// here.
		countedBy = r.run > 0
	)
	for rows.Next() {
		var id string
		var beat, recv int64
		var run sql.NullInt64
		var cs sql.NullString // NULL: written by an older build, which says nothing of whom it counts
		if err := rows.Scan(&id, &beat, &recv, &run, &cs); err != nil {
			return err
		}
		if id == r.id {
			found = true
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
		s.run = run.Int64
		r.seen[id] = s
		fresh := now.Sub(s.moved) < r.cfg.Expire
		if fresh && recv == 1 {
			if s.alive {
				others = append(others, s.seed)
				counts = append(counts, id+":"+strconv.FormatInt(s.run, 10))
			}
			countedBy = countedBy && s.alive && (!cs.Valid || countsFrom(cs.String, r.id) == r.run)
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
	if !found {
		// Deleted meanwhile (this process stopped beating for long, as
		// the others saw it): a new run from the next beat.
		r.run, countedBy = 0, false
	}
	old := r.view.Load()
	counted := r.run > 0 && (old.counted || countedBy)
	slices.Sort(others)
	slices.Sort(counts)
	v := &replicaView{others: others, receiving: receiving, counted: counted, until: now.Add(r.cfg.Expire)}
	r.view.Store(v)
	if old.receiving != receiving || old.counted != counted || !slices.Equal(old.others, others) {
		r.cfg.Logger.Info("replicas: sharing the requests", "alive", v.alive(), "receiving", receiving, "counted", counted)
		if r.cfg.OnChange != nil && old.alive() != v.alive() {
			r.cfg.OnChange(v.alive())
		}
	}
	if cs := strings.Join(counts, " "); cs != r.counts {
		// Whom this process counts changed: a replica waiting to be
		// counted learns it now, not a beat later. Written once the view
		// it reports is Mine's.
		r.counts = cs
		err := r.db.WriteNoSync(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, r.db.Dialect.Rebind(`UPDATE inbox_replicas SET counts = ? WHERE replica = ?`), cs, r.id)
			return err
		})
		if err != nil {
			return err
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

// countsFrom returns the run of replica id that counts (a row's column:
// id:run of each replica its own counts, space separated) names, 0 if it
// names none.
func countsFrom(counts, id string) int64 {
	for f := range strings.FieldsSeq(counts) {
		if name, beat, ok := strings.Cut(f, ":"); ok && name == id {
			n, err := strconv.ParseInt(beat, 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
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
