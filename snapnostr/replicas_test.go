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

func openReplicas(t *testing.T, db *sqldb.DB, receiving *atomic.Bool) *Replicas {
	t.Helper()
	cfg := ReplicasConfig{Beat: time.Second}
	if receiving != nil {
		cfg.Receiving = receiving.Load
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
		a, b, c := openReplicas(t, db, nil), openReplicas(t, db, &recvB), openReplicas(t, db, nil)
		all := ids(3000)
		step := func(at time.Time, rs ...*Replicas) {
			t.Helper()
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
		if a.Alive() != 3 {
			t.Errorf("a counts %d alive, want 3", a.Alive())
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
// add refuses (the inbox then takes the request itself); review takes up
// what became mine, forgets what outlived its grace, keeps the rest.
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
	if d.add(all[3], ev(0), now.Add(3*time.Second), true) {
		t.Fatal("add kept a fourth request past a bound of 3")
	}
	take, left := d.review(now.Add(time.Second), func(id [32]byte) bool { return id == all[2] })
	if len(take) != 1 || len(take[0].ev.Content) != 200 || take[0].verified || left != 1 || d.len() != 1 {
		t.Fatalf("review: took %d, left %d, kept %d; want 1 (the one now mine, unverified), 1 (past its time), 1", len(take), left, d.len())
	}
	if !d.add(all[3], ev(400), now.Add(3*time.Second), true) {
		t.Fatal("add refused once review made room")
	}
	if _, left := d.review(now.Add(time.Hour), func([32]byte) bool { return false }); left != 2 || d.len() != 0 || d.bytes != 0 {
		t.Fatalf("review past every time: left %d, kept %d holding %d bytes; want 2, 0, 0", left, d.len(), d.bytes)
	}
	if d.kept.Load() != 4 || d.taken.Load() != 1 || d.left.Load() != 3 {
		t.Fatalf("counts: kept %d, taken %d, left %d; want 4, 1, 3", d.kept.Load(), d.taken.Load(), d.left.Load())
	}
}

// switchShares is a Shares whose answer the test sets.
type switchShares struct{ mine atomic.Bool }

func (s *switchShares) Mine([32]byte) bool   { return s.mine.Load() }
func (s *switchShares) Grace() time.Duration { return time.Hour }

// A request the pool passed over unverified (another replica's share) is
// verified when it is taken up after all: a forged one is dropped, the
// genuine one queued once, however many copies came aside.
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
	copyOf := *genuine
	for _, ev := range []*nostr.Event{genuine, forged, &copyOf} {
		in.setAside(ctx, ev, jobs, refusals)
	}
	if st := in.Shared(); st.Now != 3 || jobs.Len() != 0 {
		t.Fatalf("set aside: %+v, %d queued; want 3 kept, none queued", st, jobs.Len())
	}
	sh.mine.Store(true)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { in.reviewDeferred(rctx, time.Millisecond, jobs, refusals); close(done) }()
	for in.Shared().Taken < 3 {
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
