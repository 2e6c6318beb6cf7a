package snapnostr

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// ids returns n event ids as a relay would bring them (SHA-256 output).
func ids(n int) [][32]byte {
	out := make([][32]byte, n)
	for i := range out {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(i))
		out[i] = sha256.Sum256(b[:])
	}
	return out
}

// owners returns, for each id, which of rs take it (a bit per replica).
func owners(rs []*Replicas, all [][32]byte) []int {
	out := make([]int, len(all))
	for i, id := range all {
		for j, r := range rs {
			if r.Mine(id) {
				out[i] |= 1 << j
			}
		}
	}
	return out
}

// testClock is the replicas' clock in a test.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time   { return time.Unix(0, c.ns.Load()) }
func (c *testClock) set(at time.Time) { c.ns.Store(at.UnixNano()) }

// openReplicas opens a Replicas beating every second on clock, whose
// receiving flag is receiving (always when nil); onChange, when set,
// records each count of replicas it is told.
func openReplicas(t *testing.T, db *sqldb.DB, clock *testClock, receiving *atomic.Bool, onChange *[]int) *Replicas {
	t.Helper()
	cfg := ReplicasConfig{Beat: time.Second, Now: clock.now}
	if receiving != nil {
		cfg.Receiving = receiving.Load
	}
	if onChange != nil {
		cfg.OnChange = func(n int) { *onChange = append(*onChange, n) }
	}
	r, err := OpenReplicas(context.Background(), db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Replicas on one database share the requests out once each has seen the
// others' beats move and is counted by them: each id is exactly one
// replica's, about evenly, and at no beat is an id two replicas' (a
// replica the others do not count yet, or no longer, takes none); a
// replica that stops receiving, or stops beating for Expire, leaves its
// share to the others; one that leaves moves only its own share
// (rendezvous hashing); and Run deletes its row when it stops.
func TestReplicasShareRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		var recvB atomic.Bool
		recvB.Store(true)
		clock := &testClock{}
		t0 := time.Unix(1_800_000_000, 0)
		clock.set(t0)
		var changes []int
		a, b, c := openReplicas(t, db, clock, nil, &changes), openReplicas(t, db, clock, &recvB, nil), openReplicas(t, db, clock, nil, nil)
		all := ids(3000)
		count := func(own []int, want int) (exact int) {
			for _, o := range own {
				if o == want {
					exact++
				}
			}
			return exact
		}
		// step runs each replica's beat at at, and checks after each that
		// no id is two of theirs (a replica left out beats no more: dead,
		// it takes nothing).
		step := func(at time.Time, rs ...*Replicas) {
			t.Helper()
			clock.set(at)
			for _, r := range rs {
				if err := r.step(ctx, at); err != nil {
					t.Fatal(err)
				}
				for i, o := range owners(rs, all) {
					if o&(o-1) != 0 {
						t.Fatalf("%v: id %d taken by replicas %03b, want one at most", at, i, o)
					}
				}
			}
		}
		// each checks that every id is exactly one of rs's, and returns
		// whose.
		each := func(rs ...*Replicas) []int {
			t.Helper()
			own := owners(rs, all)
			for i, o := range own {
				if o == 0 || o&(o-1) != 0 {
					t.Fatalf("id %d: taken by replicas %b, want exactly one", i, o)
				}
			}
			return own
		}

		// Before any beat is read, no request is a replica's. The first to
		// beat is alone and takes everything; the others, not counted by
		// it, nothing.
		if n := count(owners([]*Replicas{a, b, c}, all), 0); n != len(all) {
			t.Fatalf("before the first beats: %d of %d ids taken by none, want all", n, len(all))
		}
		step(t0, a, b, c)
		if n := count(owners([]*Replicas{a, b, c}, all), 0b001); n != len(all) || !a.Counted() || b.Counted() || c.Counted() {
			t.Fatalf("first beats: %d of %d ids a's alone, want all", n, len(all))
		}
		// Each counts another alive once it has seen its beat move, and
		// takes its share once the others count it: two more rounds.
		step(t0.Add(time.Second), a, b, c)
		step(t0.Add(2*time.Second), a, b, c)
		own := each(a, b, c)
		for j, want := range []int{0b001, 0b010, 0b100} {
			if n := count(own, want); n < len(all)/4 || n > len(all)/2 {
				t.Errorf("replica %d takes %d of %d ids, want about a third", j, n, len(all))
			}
		}
		if a.Alive() != 3 || len(changes) == 0 || changes[len(changes)-1] != 3 {
			t.Errorf("a counts %d alive, was told of %v; want 3, the last told", a.Alive(), changes)
		}

		// A replica that cannot read the others' beats for Expire can no
		// longer tell that their owners are alive: it takes everything,
		// and once a beat fails it says so. Once it reads them again it
		// takes its share when the others count it again.
		stale := t0.Add(2*time.Second + 4*time.Second + time.Millisecond)
		clock.set(stale)
		for i, id := range all {
			if !a.Mine(id) {
				t.Fatalf("a, its view Expire old, refuses id %d", i)
			}
		}
		a.expire(stale)
		if a.Alive() != 1 || changes[len(changes)-1] != 1 || a.Counted() {
			t.Errorf("a's view expired: counts %d alive, was told of %v, counted %v; want 1, the last told, not counted", a.Alive(), changes, a.Counted())
		}
		step(t0.Add(3*time.Second), a, b, c)
		if a.Counted() {
			t.Fatal("a counted again before the others read its new run")
		}
		step(t0.Add(4*time.Second), a, b, c)
		if own2 := each(a, b, c); !slices.Equal(own, own2) {
			t.Fatal("a counted again: the shares differ from before")
		}

		// b stops receiving: at once it takes nothing, and a and c share
		// its part once they read its beat.
		recvB.Store(false)
		step(t0.Add(5*time.Second), b, a, c)
		own2 := each(a, c)
		for i := range all {
			was, now := own[i], own2[i]
			if was == 0b001 && now != 0b01 || was == 0b100 && now != 0b10 {
				t.Fatalf("id %d moved from a or c to the other when b stopped receiving", i)
			}
			if b.Mine(all[i]) {
				t.Fatalf("b, not receiving, takes id %d", i)
			}
		}

		// b receives again: it takes its share once the others count it
		// again, then stops beating: after Expire it is gone.
		recvB.Store(true)
		step(t0.Add(6*time.Second), b, a, c)
		step(t0.Add(7*time.Second), b, a, c)
		if got := each(a, b, c); count(got, 0b010) == 0 {
			t.Fatalf("b receiving again takes nothing")
		}
		step(t0.Add(8*time.Second), a, c)
		if got := owners([]*Replicas{a, b, c}, all); count(got, 0b010) == 0 {
			t.Fatalf("b's share gone within Expire of its last beat")
		}
		step(t0.Add(11*time.Second), a, c)
		each(a, c)

		// c stops cleanly: its row goes, and a, reading the rows, takes
		// everything.
		rctx, stop := context.WithCancel(ctx)
		stop()
		if err := c.Run(rctx); err != nil {
			t.Fatal(err)
		}
		var rows int
		if err := db.R.QueryRowContext(ctx, db.Dialect.Rebind(`SELECT count(*) FROM inbox_replicas WHERE replica = ?`), c.ID()).Scan(&rows); err != nil || rows != 0 {
			t.Fatalf("c's rows after Run: %d, %v; want 0", rows, err)
		}
		step(t0.Add(12*time.Second), a)
		for i, id := range all {
			if !a.Mine(id) {
				t.Fatalf("a alone refuses id %d", i)
			}
		}

		// A row whose beat stopped long ago is deleted.
		step(t0.Add(time.Minute), a)
		if err := db.R.QueryRowContext(ctx, db.Dialect.Rebind(`SELECT count(*) FROM inbox_replicas WHERE replica = ?`), b.ID()).Scan(&rows); err != nil || rows != 0 {
			t.Fatalf("b's rows a minute after its last beat: %d, %v; want 0", rows, err)
		}
	})
}

// The deferred requests are bounded in number and in bytes: past either,
// add refuses (the inbox then takes the request itself). Copies of one
// request share its entry: a copy alike to one kept is dropped, a
// different one kept beside it (up to maxCopies), a verified one replaces
// the unverified ones. review returns what became mine and what is due,
// and keeps the rest.
func TestDeferralsBoundedAndReviewed(t *testing.T) {
	ev := func(n int) *nostr.Event {
		return &nostr.Event{Content: string(make([]byte, n)), Tags: nostr.Tags{{"p", "x"}}}
	}
	big, small := int(relay.EventSize(ev(400))), int(relay.EventSize(ev(200)))
	if big-small != 200 {
		t.Fatalf("relay.EventSize: %d and %d, want 200 apart", big, small)
	}
	d := newDeferrals(3, 2*big+small, newWatermark())
	now := time.Unix(1_800_000_000, 0)
	all := ids(5)
	if d.add(all[0], ev(400), now.Add(time.Second), true, false) != kept || d.add(all[1], ev(400), now.Add(2*time.Second), false, false) != kept {
		t.Fatal("add refused within the bounds")
	}
	if d.add(all[2], ev(401), now.Add(2*time.Second), true, false) == kept {
		t.Fatal("add kept an event past the bound of bytes")
	}
	if d.add(all[2], ev(200), now.Add(3*time.Second), false, false) != kept {
		t.Fatal("add refused an event that fits the bound of bytes exactly")
	}
	if d.add(all[2], ev(200), now.Add(3*time.Second), false, false) != kept || d.len() != 3 || d.bytes != 2*big+small {
		t.Fatalf("a copy alike to one kept: %d kept holding %d bytes, want it dropped", d.len(), d.bytes)
	}
	if d.add(all[3], ev(0), now.Add(3*time.Second), true, false) == kept {
		t.Fatal("add kept a fourth request past a bound of 3")
	}
	take, due := d.review(now.Add(time.Second), func(id [32]byte) bool { return id == all[2] })
	if len(take) != 1 || take[0].id != all[2] || take[0].verified || len(due) != 1 || due[0].id != all[0] || d.len() != 1 {
		t.Fatalf("review: took %d, due %d, kept %d; want 1 (the one now mine, unverified), 1 (past its time), 1", len(take), len(due), d.len())
	}
	// A different copy joins the unverified request; a verified one
	// replaces both.
	other := ev(10)
	other.Sig = "another"
	if d.add(all[1], other, now, false, false) != kept || len(d.byID[all[1]].evs) != 2 {
		t.Fatal("a different copy was not kept beside the first")
	}
	for i, sig := range []string{"third", "fourth"} {
		c := ev(10)
		c.Sig = sig
		if got, want := d.add(all[1], c, now, false, false), []addResult{kept, tooMany}[i]; got != want {
			t.Fatalf("copy %d of one request: %v, want %v (at most %d copies)", i+3, got, want, maxCopies)
		}
	}
	verified := ev(20)
	if d.add(all[1], verified, now, true, false) != kept {
		t.Fatal("a verified copy refused")
	}
	if e := d.byID[all[1]]; !e.verified || len(e.evs) != 1 || e.evs[0] != verified || d.bytes != e.size {
		t.Fatal("a verified copy did not replace the unverified ones")
	}
	// A checked copy alike to an unchecked one kept replaces it too (the
	// inbox's take saw it, so the entry must say it was checked).
	d2 := newDeferrals(3, 1<<20, newWatermark())
	same := ev(30)
	if d2.add(all[4], same, now, false, false) != kept || d2.add(all[4], same, now, true, false) != kept || !d2.byID[all[4]].verified {
		t.Fatal("a checked copy alike to the unchecked one kept did not mark the entry checked")
	}
	if d.add(all[3], ev(400), now.Add(3*time.Second), true, false) != kept {
		t.Fatal("add refused once review made room")
	}
	if _, due := d.review(now.Add(time.Hour), func([32]byte) bool { return false }); len(due) != 2 || d.len() != 0 || d.bytes != 0 || len(d.byID) != 0 {
		t.Fatalf("review past every time: due %d, kept %d holding %d bytes; want 2, 0, 0", len(due), d.len(), d.bytes)
	}
	if d.kept.Load() != 4 {
		t.Fatalf("kept %d, want 4 (copies counted once)", d.kept.Load())
	}
}

// switchShares is a Shares whose answers the test sets (counted unless
// uncounted); its grace is an hour unless set.
type switchShares struct {
	mine, uncounted atomic.Bool
	grace           time.Duration
}

func (s *switchShares) Mine([32]byte) bool { return s.mine.Load() }
func (s *switchShares) Counted() bool      { return !s.uncounted.Load() }
func (s *switchShares) Grace() time.Duration {
	if s.grace == 0 {
		return time.Hour
	}
	return s.grace
}

// recordedSet is a SharedReplay whose Recorded knows the deliveries in
// ids.
type recordedSet struct {
	*snap.MemoryReplayStore
	ids map[string]bool
}

func (r recordedSet) Recorded(_ context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if r.ids[id] {
			out[id] = true
		}
	}
	return out, nil
}

// shareRig is an Inbox with Shares, driven by hand: the test sets
// requests aside and runs the review of what was kept.
type shareRig struct {
	t        *testing.T
	in       *Inbox
	agent    *identity.Key
	peer     *identity.Key
	ctx      context.Context
	jobs     *fairqueue.Queue[string, *nostr.Event]
	refusals *refuser
	// stopRefusals sends the refusals waiting and stops (once).
	stopRefusals func()
}

// newShareRig returns a rig whose inbox has cfg (Key and Logger set).
func newShareRig(t *testing.T, cfg InboxConfig) *shareRig {
	r := &shareRig{t: t}
	var err error
	if r.agent, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	if r.peer, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	cfg.Key, cfg.Logger = r.agent, slog.New(slog.DiscardHandler)
	r.in = NewInbox(cfg)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	r.ctx, r.jobs, r.refusals = ctx, fairqueue.New[string, *nostr.Event](16), r.in.startRefuser(ctx)
	r.stopRefusals = sync.OnceFunc(r.refusals.stop)
	t.Cleanup(r.stopRefusals)
	return r
}

// request returns a request event from the peer to the agent.
func (r *shareRig) request(content string) *nostr.Event {
	ev := &nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
	if err := relay.SignEvent(r.peer, ev); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// reviewUntil runs the review every millisecond until done holds.
func (r *shareRig) reviewUntil(done func(ShareStats) bool) {
	ctx, stop := context.WithCancel(r.ctx)
	ended := make(chan struct{})
	go func() { r.in.reviewDeferred(ctx, time.Millisecond, r.jobs, nil, r.refusals); close(ended) }()
	for !done(r.in.Shared()) {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-ended
}

// unknownReplay is a SharedReplay whose Recorded never answers: it
// fails once its context ends.
type unknownReplay struct{ *snap.MemoryReplayStore }

func (unknownReplay) Recorded(ctx context.Context, _ []string) (map[string]bool, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// ctxCheckpoint is a MemoryCheckpoint whose Seen fails on a context
// that ended, as a database's does.
type ctxCheckpoint struct{ *MemoryCheckpoint }

func (c ctxCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return c.MemoryCheckpoint.Seen(ctx, id)
}

// A request nobody is known to have taken, because the database did not
// answer within the review's pass, is taken up and queued all the same:
// its checkpoint Seen is not asked on the pass's ended context. Before,
// Seen failed on it, admit took that for the node stopping, and the
// request was dropped unanswered (and, counted in the watermark, held
// the relays' points back for the rest of the run).
func TestInboxTakesUpWhatTheDatabaseCannotTell(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := &testClock{}
	clock.set(now)
	r := newShareRig(t, InboxConfig{Shares: &switchShares{grace: 100 * time.Millisecond},
		Replay: unknownReplay{snap.NewMemoryReplayStore(0)}, Checkpoint: ctxCheckpoint{NewMemoryCheckpoint()}, Now: clock.now})
	ev := &nostr.Event{CreatedAt: nostr.Timestamp(now.Unix()), Kind: relay.KindMessage,
		Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: "stored"}
	if err := relay.SignEvent(r.peer, ev); err != nil {
		t.Fatal(err)
	}
	r.in.setAside(r.ctx, ev, r.jobs, nil, r.refusals)
	clock.set(now.Add(time.Second)) // the grace has passed
	r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
	if st := r.in.Shared(); st.Taken != 1 {
		t.Fatalf("after the grace: %+v; want the request taken up", st)
	}
	if n := r.jobs.Len(); n != 1 {
		t.Fatalf("%d requests queued, want the one nobody is known to have taken", n)
	}
}

// When its grace passes, a request kept for another replica is forgotten
// if some process took it, and taken up here if nobody did (its owner,
// alive, never received it).
func TestInboxTakesUpWhatNobodyTook(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := &testClock{}
	clock.set(now)
	recorded := recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
	r := newShareRig(t, InboxConfig{Shares: &switchShares{grace: time.Second}, Replay: recorded, Now: clock.now})
	taken, missed := r.request("taken"), r.request("missed")
	recorded.ids[taken.ID] = true
	r.in.setAside(r.ctx, taken, r.jobs, nil, r.refusals)
	r.in.setAside(r.ctx, missed, r.jobs, nil, r.refusals)
	clock.set(now.Add(time.Second)) // the grace has passed
	r.reviewUntil(func(st ShareStats) bool { return st.Taken+st.Left == 2 })
	if st := r.in.Shared(); st.Taken != 1 || st.Left != 1 || r.jobs.Len() != 1 {
		t.Fatalf("after the grace: %+v, %d queued; want the taken one left, the missed one taken up and queued", st, r.jobs.Len())
	}
	if ev, _ := r.jobs.Pop(); ev.Content != "missed" {
		t.Fatalf("queued %q, want the request nobody took", ev.Content)
	}
}

// A request set aside while the other replicas did not count this one
// was taken by them: when this replica is counted and the request is its
// share, it is not taken up at once (its owner then may have refused it,
// leaving no record of the message), only once its grace has passed, and
// only if no process took it.
func TestInboxTakesUpLateWhatCameBeforeItWasCounted(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := &testClock{}
	clock.set(now)
	sh := &switchShares{grace: time.Second}
	sh.uncounted.Store(true)
	recorded := recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
	r := newShareRig(t, InboxConfig{Shares: sh, Replay: recorded, Now: clock.now})
	taken, missed := r.request("taken"), r.request("missed")
	recorded.ids[taken.ID] = true
	r.in.setAside(r.ctx, taken, r.jobs, nil, r.refusals)
	r.in.setAside(r.ctx, missed, r.jobs, nil, r.refusals)
	sh.uncounted.Store(false)
	sh.mine.Store(true)
	r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
	if st := r.in.Shared(); st.Taken != 0 || st.Now != 2 || r.jobs.Len() != 0 {
		t.Fatalf("counted, both requests mine, within their grace: %+v, %d queued; want both kept", st, r.jobs.Len())
	}
	clock.set(now.Add(time.Second))
	r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
	if st := r.in.Shared(); st.Taken != 1 || st.Left != 1 || r.jobs.Len() != 1 {
		t.Fatalf("after the grace: %+v, %d queued; want the taken one left, the missed one taken up", st, r.jobs.Len())
	}
	if ev, _ := r.jobs.Pop(); ev.Content != "missed" {
		t.Fatalf("queued %q, want the request nobody took", ev.Content)
	}
}

// A request the pool passed over unverified (another replica's share) is
// verified when it is taken up after all: a forged one is dropped, the
// genuine one queued once, however many copies came aside, and forged
// copies claiming its id that came first, as many as are kept, do not
// shut it out.
func TestInboxVerifiesWhatItTakesUp(t *testing.T) {
	sh := &switchShares{}
	r := newShareRig(t, InboxConfig{Shares: sh})
	genuine, forged := r.request("genuine"), r.request("forged")
	forged.Sig = genuine.Sig  // a valid signature, of another event
	var sameID []*nostr.Event // claim the genuine event's id and signature
	for i := range maxCopies {
		ev := *genuine
		ev.Content = fmt.Sprintf("altered %d", i)
		sameID = append(sameID, &ev)
	}
	copyOf := *genuine
	for _, ev := range append(sameID, genuine, &copyOf, forged) {
		r.in.setAside(r.ctx, ev, r.jobs, nil, r.refusals)
	}
	if st := r.in.Shared(); st.Now != 2 || st.Kept != 2 || r.jobs.Len() != 0 {
		t.Fatalf("set aside: %+v, %d queued; want 2 requests kept (the copies of one id together), none queued", st, r.jobs.Len())
	}
	sh.mine.Store(true)
	r.reviewUntil(func(st ShareStats) bool { return st.Taken == 2 })
	if r.jobs.Len() != 1 {
		t.Fatalf("%d requests queued, want 1 (the genuine one, once)", r.jobs.Len())
	}
	if ev, _ := r.jobs.Pop(); ev.Content != "genuine" {
		t.Fatalf("queued %q, want the genuine request", ev.Content)
	}
}

// A request that came when its owner last beat is still kept when
// another replica counts the owner gone, however the two replicas' beats
// fall: Grace covers the time to notice a death, with ownerMargin left
// for the owner to have taken the request.
func TestReplicasGraceCoversAnOwnersDeath(t *testing.T) {
	db := testdb.Open(t, testdb.SQLite(t))
	ctx := context.Background()
	all := ids(2000)
	for _, bFirst := range []bool{true, false} {
		clock := &testClock{}
		a, b := openReplicas(t, db, clock, nil, nil), openReplicas(t, db, clock, nil, nil)
		t0 := time.Unix(1_800_000_000, 0)
		var last time.Time
		for k := range 4 { // warm-up, then b's last beat at t0+3s
			last = t0.Add(time.Duration(k) * time.Second)
			clock.set(last)
			order := []*Replicas{a, b}
			if bFirst {
				order = []*Replicas{b, a}
			}
			for _, r := range order {
				if err := r.step(ctx, last); err != nil {
					t.Fatal(err)
				}
			}
		}
		var bs [][32]byte
		for _, id := range all {
			if b.Mine(id) && !a.Mine(id) {
				bs = append(bs, id)
			}
		}
		if len(bs) == 0 {
			t.Fatal("b owns nothing after the warm-up")
		}
		flipped := time.Time{}
		for at := last.Add(time.Second); flipped.IsZero() && at.Before(last.Add(time.Minute)); at = at.Add(time.Second) {
			clock.set(at)
			if err := a.step(ctx, at); err != nil {
				t.Fatal(err)
			}
			if a.Mine(bs[0]) {
				flipped = at
			}
		}
		if limit := last.Add(a.Grace() - ownerMargin); flipped.IsZero() || flipped.After(limit) {
			t.Fatalf("b beat first %v: a took b's share at %v, %v after b's last beat; Grace %v leaves the owner %v, so want by %v",
				bFirst, flipped, flipped.Sub(last), a.Grace(), ownerMargin, limit)
		}
		// Clean up for the next order: both leave.
		for _, r := range []*Replicas{a, b} {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := r.Run(cctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// publishCounter is a Transport that counts what is published.
type publishCounter struct{ published atomic.Int32 }

func (p *publishCounter) Subscribe(context.Context, nostr.Filter) (*relay.Subscription, error) {
	return nil, context.Canceled
}

func (p *publishCounter) Publish(context.Context, nostr.Event) (relay.PublishResult, error) {
	p.published.Add(1)
	return relay.PublishResult{}, nil
}

// refusingLimiter refuses every key.
type refusingLimiter struct{}

func (refusingLimiter) Allow(string) (bool, time.Duration) { return false, time.Second }

// A request taken up late (nobody recorded it when its grace passed) is
// never refused: its owner answered it already, with that refusal or
// another. An on-time request over its key's rate is refused.
func TestInboxRefusesNoLateRequest(t *testing.T) {
	tr := &publishCounter{}
	r := newShareRig(t, InboxConfig{Shares: &switchShares{}, Transport: tr, KeyLimiter: refusingLimiter{}})
	r.in.cfg.Handler = snap.NewServer(snap.ServerConfig{Key: r.agent, Router: snap.NewRouter(), Logger: slog.New(slog.DiscardHandler)})
	r.in.admit(r.ctx, r.request("late"), r.jobs, r.refusals, true)
	r.in.admit(r.ctx, r.request("on time"), r.jobs, r.refusals, false)
	r.stopRefusals()
	if n := tr.published.Load(); n != 1 || r.jobs.Len() != 0 {
		t.Fatalf("%d refusals published, %d queued; want 1 (the on-time request's), none queued", n, r.jobs.Len())
	}
}
