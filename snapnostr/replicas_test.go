package snapnostr

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
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

func (c *testClock) now() time.Time    { return time.Unix(0, c.ns.Load()) }
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
// others' beats move: each id is exactly one replica's, about evenly;
// a replica that stops receiving, or stops beating for Expire, leaves
// its share to the others; one that leaves moves only its own share
// (rendezvous hashing); and Run deletes its row when it stops.
func TestReplicasShareRequests(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		var recvB atomic.Bool
		recvB.Store(true)
		clock := &testClock{}
		var changes []int
		a, b, c := openReplicas(t, db, clock, nil, &changes), openReplicas(t, db, clock, &recvB, nil), openReplicas(t, db, clock, nil, nil)
		all := ids(3000)
		step := func(at time.Time, rs ...*Replicas) {
			t.Helper()
			clock.set(at)
			for _, r := range rs {
				if err := r.step(ctx, at); err != nil {
					t.Fatal(err)
				}
			}
		}
		count := func(own []int, want int) (exact int) {
			for _, o := range own {
				if o == want {
					exact++
				}
			}
			return exact
		}

		// Before any beat is read, and while the others' beats have not
		// moved yet, everything is each replica's own.
		t0 := time.Unix(1_800_000_000, 0)
		step(t0, a, b, c)
		if n := count(owners([]*Replicas{a, b, c}, all), 0b111); n != len(all) {
			t.Fatalf("first beats: %d of %d ids taken by all three, want all", n, len(all))
		}
		// Each counts another alive once it has seen its beat move: two
		// more rounds for the last to beat first to see the others move.
		step(t0.Add(time.Second), a, b, c)
		step(t0.Add(2*time.Second), a, b, c)
		own := owners([]*Replicas{a, b, c}, all)
		for i, o := range own {
			if o != 0b001 && o != 0b010 && o != 0b100 {
				t.Fatalf("id %d: taken by replicas %03b, want exactly one", i, o)
			}
		}
		for j, want := range []int{0b001, 0b010, 0b100} {
			if n := count(own, want); n < len(all)/4 || n > len(all)/2 {
				t.Errorf("replica %d takes %d of %d ids, want about a third", j, n, len(all))
			}
		}
		if a.Alive() != 3 || len(changes) == 0 || changes[len(changes)-1] != 3 {
			t.Errorf("a counts %d alive, was told of %v; want 3, the last told", a.Alive(), changes)
		}

		// A replica that cannot read the others' beats for Expire can no
		// longer tell that their owners are alive: it takes everything.
		clock.set(t0.Add(2*time.Second + 4*time.Second + time.Millisecond))
		for i, id := range all {
			if !a.Mine(id) {
				t.Fatalf("a, its view Expire old, refuses id %d", i)
			}
		}

		// b stops receiving: a and c share its part; b takes what comes.
		recvB.Store(false)
		step(t0.Add(3*time.Second), b, a, c) // b first: the others read its new flag
		own2 := owners([]*Replicas{a, c}, all)
		for i := range all {
			was, now := own[i], own2[i]
			switch {
			case now != 0b01 && now != 0b10:
				t.Fatalf("id %d: taken by a|c = %02b once b stopped receiving, want exactly one", i, now)
			case was == 0b001 && now != 0b01, was == 0b100 && now != 0b10:
				t.Fatalf("id %d moved from a or c to the other when b stopped receiving", i)
			}
			if !b.Mine(all[i]) {
				t.Fatalf("b, not receiving, refuses id %d", i)
			}
		}

		// b receives again, then stops beating: after Expire it is gone.
		recvB.Store(true)
		step(t0.Add(4*time.Second), b, a, c)
		if got := owners([]*Replicas{a, b, c}, all); count(got, 0b010) == 0 {
			t.Fatalf("b receiving again takes nothing")
		}
		step(t0.Add(5*time.Second), a, c)
		if got := owners([]*Replicas{a, b, c}, all); count(got, 0b010) == 0 {
			t.Fatalf("b's share gone within Expire of its last beat")
		}
		step(t0.Add(8*time.Second), a, c)
		if got := owners([]*Replicas{a, c}, all); count(got, 0b01)+count(got, 0b10) != len(all) {
			t.Fatalf("b silent for Expire: a and c do not share everything between them")
		}

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
		step(t0.Add(9*time.Second), a)
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
	ev := func(n int) *nostr.Event { return &nostr.Event{Content: string(make([]byte, n)), Tags: nostr.Tags{{"p", "x"}}} }
	big, small := eventSize(ev(400)), eventSize(ev(200))
	if big-small != 200 {
		t.Fatalf("eventSize: %d and %d, want 200 apart", big, small)
	}
	d := newDeferrals(3, 2*big+small)
	now := time.Unix(1_800_000_000, 0)
	all := ids(5)
	if !d.add(all[0], ev(400), now.Add(time.Second), true) || !d.add(all[1], ev(400), now.Add(2*time.Second), false) {
		t.Fatal("add refused within the bounds")
	}
	if d.add(all[2], ev(401), now.Add(2*time.Second), true) {
		t.Fatal("add kept an event past the bound of bytes")
	}
	if !d.add(all[2], ev(200), now.Add(3*time.Second), false) {
		t.Fatal("add refused an event that fits the bound of bytes exactly")
	}
	if !d.add(all[2], ev(200), now.Add(3*time.Second), false) || d.len() != 3 || d.bytes != 2*big+small {
		t.Fatalf("a copy alike to one kept: %d kept holding %d bytes, want it dropped", d.len(), d.bytes)
	}
	if d.add(all[3], ev(0), now.Add(3*time.Second), true) {
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
	if !d.add(all[1], other, now, false) || len(d.byID[all[1]].evs) != 2 {
		t.Fatal("a different copy was not kept beside the first")
	}
	verified := ev(20)
	if !d.add(all[1], verified, now, true) {
		t.Fatal("a verified copy refused")
	}
	if e := d.byID[all[1]]; !e.verified || len(e.evs) != 1 || e.evs[0] != verified || d.bytes != e.size {
		t.Fatal("a verified copy did not replace the unverified ones")
	}
	if !d.add(all[3], ev(400), now.Add(3*time.Second), true) {
		t.Fatal("add refused once review made room")
	}
	if _, due := d.review(now.Add(time.Hour), func([32]byte) bool { return false }); len(due) != 2 || d.len() != 0 || d.bytes != 0 || len(d.byID) != 0 {
		t.Fatalf("review past every time: due %d, kept %d holding %d bytes; want 2, 0, 0", len(due), d.len(), d.bytes)
	}
	if d.kept.Load() != 4 {
		t.Fatalf("kept %d, want 4 (copies counted once)", d.kept.Load())
	}
}

// switchShares is a Shares whose answer the test sets; its grace is an
// hour unless set.
type switchShares struct {
	mine  atomic.Bool
	grace time.Duration
}

func (s *switchShares) Mine([32]byte) bool { return s.mine.Load() }
func (s *switchShares) Grace() time.Duration {
	if s.grace == 0 {
		return time.Hour
	}
	return s.grace
}

// recordedSet is a Recorded that knows the deliveries in it.
type recordedSet map[string]bool

func (r recordedSet) Recorded(_ context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if r[id] {
			out[id] = true
		}
	}
	return out, nil
}

// When its grace passes, a request kept for another replica is forgotten
// if some process took it, and taken up here if nobody did (its owner,
// alive, never received it).
func TestInboxTakesUpWhatNobodyTook(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	var taken, missed nostr.Event
	for i, ev := range []*nostr.Event{&taken, &missed} {
		*ev = nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}, Content: []string{"taken", "missed"}[i]}
		if err := relay.SignEvent(peer, ev); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(1_800_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	in := NewInbox(InboxConfig{Key: agent, Shares: &switchShares{grace: time.Second}, Recorded: recordedSet{taken.ID: true},
		Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	jobs := fairqueue.New[string, *nostr.Event](16)
	refusals := in.startRefuser(ctx)
	defer refusals.stop()
	in.setAside(ctx, &taken, jobs, refusals)
	in.setAside(ctx, &missed, jobs, refusals)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { in.reviewDeferred(rctx, time.Millisecond, jobs, refusals); close(done) }()
	clock.Store(now.Add(time.Second).UnixNano()) // the grace has passed
	for st := in.Shared(); st.Taken+st.Left < 2; st = in.Shared() {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	if st := in.Shared(); st.Taken != 1 || st.Left != 1 || jobs.Len() != 1 {
		t.Fatalf("after the grace: %+v, %d queued; want the taken one left, the missed one taken up and queued", st, jobs.Len())
	}
	if ev, _ := jobs.Pop(); ev.Content != "missed" {
		t.Fatalf("queued %q, want the request nobody took", ev.Content)
	}
}

// A request the pool passed over unverified (another replica's share) is
// verified when it is taken up after all: a forged one is dropped, the
// genuine one queued once, however many copies came aside, and a forged
// copy claiming its id that came first does not shut it out.
func TestInboxVerifiesWhatItTakesUp(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	sh := &switchShares{}
	in := NewInbox(InboxConfig{Key: agent, Shares: sh, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	jobs := fairqueue.New[string, *nostr.Event](16)
	refusals := in.startRefuser(ctx)
	defer refusals.stop()
	request := func(content string) *nostr.Event {
		ev := &nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}, Content: content}
		if err := relay.SignEvent(peer, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	genuine, forged := request("genuine"), request("forged")
	forged.Sig = genuine.Sig // a valid signature, of another event
	sameID := *genuine
	sameID.Content = "altered" // claims the genuine event's id and signature
	copyOf := *genuine
	for _, ev := range []*nostr.Event{&sameID, genuine, &copyOf, forged} {
		in.setAside(ctx, ev, jobs, refusals)
	}
	if st := in.Shared(); st.Now != 2 || st.Kept != 2 || jobs.Len() != 0 {
		t.Fatalf("set aside: %+v, %d queued; want 2 requests kept (the copies of one id together), none queued", st, jobs.Len())
	}
	sh.mine.Store(true)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { in.reviewDeferred(rctx, time.Millisecond, jobs, refusals); close(done) }()
	for in.Shared().Taken < 2 {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	if jobs.Len() != 1 {
		t.Fatalf("%d requests queued, want 1 (the genuine one, once)", jobs.Len())
	}
	if ev, _ := jobs.Pop(); ev.Content != "genuine" {
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
