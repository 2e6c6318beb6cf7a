package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

var t0 = time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)

func record(at time.Time, ttl time.Duration, fp byte) snap.ReplayRecord {
	return snap.ReplayRecord{FirstSeen: at, Expires: at.Add(ttl), Fingerprint: [32]byte{fp}}
}

// The durable store behaves as snap.MemoryReplayStore does.
func TestReplay(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		rs := open(t, dsn, Options{}).ReplayStore()
		const from = "bc1pfrom"

		first := record(t0, time.Minute, 1)
		if _, fresh, err := rs.Remember(ctx, from, "m1", first); err != nil || !fresh {
			t.Fatalf("first Remember: fresh %v, %v", fresh, err)
		}
		if got, ok, err := rs.Lookup(ctx, from, "m1", t0.Add(time.Second)); err != nil || !ok || got != first {
			t.Fatalf("Lookup = %+v %v %v, want %+v", got, ok, err, first)
		}
		// Again within the window: not fresh, and the first record comes back.
		prior, fresh, err := rs.Remember(ctx, from, "m1", record(t0.Add(30*time.Second), time.Minute, 2))
		if err != nil || fresh || prior != first {
			t.Fatalf("second Remember: %+v fresh %v %v", prior, fresh, err)
		}
		// Other pairs are independent.
		for _, p := range [][2]string{{from, "m2"}, {"bc1pother", "m1"}} {
			if _, fresh, err := rs.Remember(ctx, p[0], p[1], record(t0, time.Minute, 3)); err != nil || !fresh {
				t.Fatalf("Remember %v: fresh %v, %v", p, fresh, err)
			}
		}
		// Expired: absent for Lookup, replaced by Remember.
		if _, ok, err := rs.Lookup(ctx, from, "m1", first.Expires); err != nil || ok {
			t.Fatalf("Lookup at expiry: found %v, %v", ok, err)
		}
		later := record(first.Expires, time.Minute, 4)
		if _, fresh, err := rs.Remember(ctx, from, "m1", later); err != nil || !fresh {
			t.Fatalf("Remember after expiry: fresh %v, %v", fresh, err)
		}
		if got, ok, _ := rs.Lookup(ctx, from, "m1", later.FirstSeen); !ok || got != later {
			t.Fatalf("Lookup after replacement = %+v", got)
		}
		// Sweep deletes what expired a margin before (a minute, for these
		// records of a minute), and only that.
		if n, err := rs.Sweep(ctx, t0.Add(time.Minute)); err != nil || n != 0 {
			t.Fatalf("Sweep at the expiry = %d, %v; want 0", n, err)
		}
		n, err := rs.Sweep(ctx, t0.Add(time.Minute+MinSweepMargin))
		if err != nil || n != 2 {
			t.Fatalf("Sweep = %d, %v; want 2", n, err)
		}
		if l, _ := rs.Len(ctx); l != 1 {
			t.Fatalf("Len after Sweep = %d, want 1", l)
		}
		// Times keep their microseconds; an expiry is never rounded down.
		odd := snap.ReplayRecord{FirstSeen: t0.Add(time.Hour + 1500*time.Nanosecond), Expires: t0.Add(2*time.Hour + 1500*time.Nanosecond)}
		if _, fresh, _ := rs.Remember(ctx, from, "m3", odd); !fresh {
			t.Fatal("m3 not fresh")
		}
		got, ok, _ := rs.Lookup(ctx, from, "m3", odd.Expires.Add(-time.Nanosecond))
		if !ok || got.Expires.Before(odd.Expires) || got.Expires.Sub(odd.Expires) >= time.Microsecond {
			t.Fatalf("m3 = %+v %v, expires %v", got, ok, odd.Expires)
		}
	})
}

// Sweep deletes in batches; all of them.
func TestReplaySweepBatches(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		s.replay.batch = 100
		const expired, live = 345, 10
		err := s.write(ctx, "fill", "", func(ctx context.Context, tx *sql.Tx) error {
			for i := range expired + live {
				exp := t0
				if i >= expired {
					exp = t0.Add(time.Hour)
				}
				if _, err := tx.StmtContext(ctx, s.st.remember).ExecContext(ctx, "from", fmt.Sprint(i), micros(t0.Add(-2*time.Minute)), micros(exp), make([]byte, 32), ""); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		n, err := s.ReplayStore().Sweep(ctx, t0.Add(MinSweepMargin))
		if err != nil || n != expired {
			t.Fatalf("Sweep = %d, %v; want %d", n, err, expired)
		}
		if l, _ := s.ReplayStore().Len(ctx); l != live {
			t.Fatalf("Len = %d, want %d", l, live)
		}
	})
}

func TestRunSweeper(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rs := open(t, sqliteDSN(t), Options{}).ReplayStore()
	past := time.Now().Add(-time.Hour)
	for i := range 3 {
		if _, _, err := rs.Remember(ctx, "from", fmt.Sprint(i), record(past, time.Minute, 1)); err != nil {
			t.Fatal(err)
		}
	}
	swept := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		done <- rs.RunSweeper(ctx, 5*time.Millisecond, 0, func(n int64, err error) {
			if err != nil {
				t.Errorf("sweep: %v", err)
			}
			swept <- n
		})
	}()
	if n := <-swept; n != 3 {
		t.Fatalf("first sweep deleted %d, want 3", n)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("RunSweeper returned %v", err)
	}
}

// Two Stores on one database (two replicas) and several goroutines each
// race to Remember the same pairs: exactly one call per pair is fresh, and
// every other call gets the winner's record. One replica's records do not
// wait for the disk (ReplayStoreNoSync), the other's do: which call is
// fresh does not depend on it.
func TestReplayExactlyOnce(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		stores := []*ReplayStore{open(t, dsn, Options{}).ReplayStoreNoSync(), open(t, dsn, Options{}).ReplayStore()}
		const pairs, perStore = 150, 4
		var (
			fresh   [pairs]atomic.Int32
			winners [pairs]atomic.Int32 // fingerprint byte of the fresh call, +1
			priors  sync.Map            // pair → fingerprints seen as prior
			wg      sync.WaitGroup
		)
		for si, rs := range stores {
			for g := range perStore {
				fp := byte(si*perStore + g + 1)
				wg.Go(func() {
					for _, p := range rand.Perm(pairs) {
						prior, ok, err := rs.Remember(ctx, "bc1preplica", fmt.Sprintf("msg-%d", p), record(t0, time.Hour, fp))
						if err != nil {
							t.Errorf("Remember: %v", err)
							return
						}
						if ok {
							fresh[p].Add(1)
							winners[p].Store(int32(fp))
							continue
						}
						priors.Store(fmt.Sprintf("%d/%d", p, fp), prior.Fingerprint[0])
					}
				})
			}
		}
		wg.Wait()
		for p := range pairs {
			if n := fresh[p].Load(); n != 1 {
				t.Fatalf("pair %d: %d fresh Remembers, want exactly 1", p, n)
			}
		}
		priors.Range(func(k, v any) bool {
			var p, fp int
			fmt.Sscanf(k.(string), "%d/%d", &p, &fp)
			if w := byte(winners[p].Load()); v.(byte) != w {
				t.Errorf("pair %d: caller %d was shown fingerprint %d, the winner's is %d", p, fp, v, w)
			}
			return true
		})
	})
}

// The record keeps the delivery that carried a message, and the result of
// its request, for every process on the database and across a restart.
func TestReplayDeliveryAndResult(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		a, b := open(t, dsn, Options{}).ReplayStore(), open(t, dsn, Options{}).ReplayStore()
		const from = "bc1pfrom"
		rec := record(t0, time.Minute, 1)
		rec.Via = "ev-1"
		if _, fresh, err := a.Remember(ctx, from, "m1", rec); err != nil || !fresh {
			t.Fatalf("Remember: fresh %v, %v", fresh, err)
		}
		// The replica that lost sees which delivery won.
		other := record(t0, time.Minute, 1)
		other.Via = "ev-1"
		prior, fresh, err := b.Remember(ctx, from, "m1", other)
		if err != nil || fresh || prior.Via != "ev-1" {
			t.Fatalf("replica Remember = %+v fresh %v %v; want the prior with via ev-1", prior, fresh, err)
		}
		if got, ok, _ := b.Lookup(ctx, from, "m1", t0); !ok || got != rec {
			t.Fatalf("Lookup = %+v, want %+v", got, rec)
		}
		// Every process on the database reads which deliveries were
		// taken; a message without a delivery id (HTTP) names none.
		if _, _, err := a.Remember(ctx, from, "m-http", record(t0, time.Minute, 3)); err != nil {
			t.Fatal(err)
		}
		if got, err := b.Recorded(ctx, []string{"ev-0", "ev-1", ""}); err != nil || !maps.Equal(got, map[string]bool{"ev-1": true}) {
			t.Fatalf("Recorded = %v, %v; want ev-1 alone", got, err)
		}
		if got, err := b.Recorded(ctx, nil); err != nil || len(got) != 0 {
			t.Fatalf("Recorded of none = %v, %v", got, err)
		}
		many := make([]string, 1200) // past one statement's worth on SQLite
		for i := range many {
			many[i] = fmt.Sprintf("ev-none-%d", i)
		}
		many[700] = "ev-1"
		if got, err := b.Recorded(ctx, many); err != nil || !maps.Equal(got, map[string]bool{"ev-1": true}) {
			t.Fatalf("Recorded of 1,200 = %v, %v; want ev-1 alone", got, err)
		}

		// No result until one is saved; then every replica reads it.
		if _, ok, err := b.LoadResult(ctx, from, "m1", t0); err != nil || ok {
			t.Fatalf("LoadResult before SaveResult: %v %v", ok, err)
		}
		result := []byte(`{"task":{"id":"t1"}}`)
		if err := a.SaveResult(ctx, from, "m1", result, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got, ok, err := b.LoadResult(ctx, from, "m1", t0.Add(30*time.Second)); err != nil || !ok || string(got) != string(result) {
			t.Fatalf("replica LoadResult = %s %v %v", got, ok, err)
		}
		// A result may outlive the replay window it was saved in.
		if err := a.SaveResult(ctx, from, "m1", result, t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := b.LoadResult(ctx, from, "m1", t0.Add(90*time.Second)); !ok {
			t.Fatal("result lost before its expiry")
		}
		if _, ok, _ := b.LoadResult(ctx, from, "m1", t0.Add(2*time.Minute)); ok {
			t.Fatal("result read after its expiry")
		}
		// A new record for the pair (after expiry) starts without a result.
		fresh2 := record(t0.Add(3*time.Minute), time.Minute, 2)
		if _, ok, err := a.Remember(ctx, from, "m1", fresh2); err != nil || !ok {
			t.Fatalf("Remember after expiry: %v %v", ok, err)
		}
		if _, ok, _ := b.LoadResult(ctx, from, "m1", fresh2.FirstSeen); ok {
			t.Fatal("the expired record's result survived its replacement")
		}
		// A pair never remembered keeps nothing.
		if err := a.SaveResult(ctx, from, "never", result, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := a.LoadResult(ctx, from, "never", t0); ok {
			t.Fatal("a result without a record was kept")
		}
		// After a restart.
		c := open(t, dsn, Options{}).ReplayStore()
		if err := a.SaveResult(ctx, from, "m1", result, fresh2.Expires); err != nil {
			t.Fatal(err)
		}
		if got, ok, _ := c.LoadResult(ctx, from, "m1", fresh2.FirstSeen); !ok || string(got) != string(result) {
			t.Fatalf("LoadResult after reopening = %s %v", got, ok)
		}
	})
}

// CreateKeeping stores a task and its request's result in one
// transaction: both or neither (a task whose id is taken keeps no
// result), on both dialects; a request with no replay record keeps no
// result, and its task is stored all the same.
func TestCreateKeeping(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		rs := s.ReplayStore()
		const from = "bc1pfrom"
		for _, id := range []string{"m1", "m2"} {
			if _, fresh, err := rs.Remember(ctx, from, id, record(t0, time.Minute, 1)); err != nil || !fresh {
				t.Fatalf("Remember %s: fresh %v, %v", id, fresh, err)
			}
		}
		result := []byte(`{"task":{"id":"t1"}}`)
		kept := tasks.KeptResult{From: from, RequestID: "m1", Result: result, Expires: t0.Add(2 * time.Minute)}
		if _, err := s.CreateKeeping(ctx, task("t1", from), kept); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, "t1"); err != nil || got.Version != 1 {
			t.Fatalf("Get after CreateKeeping: %v, %v", got, err)
		}
		// Kept with the task, until its own expiry (past the record's).
		if got, ok, err := rs.LoadResult(ctx, from, "m1", t0.Add(90*time.Second)); err != nil || !ok || string(got) != string(result) {
			t.Fatalf("LoadResult = %s %v %v; want the result kept with the task", got, ok, err)
		}
		// The task's write fails: no result is kept either.
		kept.RequestID = "m2"
		if _, err := s.CreateKeeping(ctx, task("t1", from), kept); !errors.Is(err, tasks.ErrExists) {
			t.Fatalf("CreateKeeping of a taken id: %v; want ErrExists", err)
		}
		if got, ok, err := rs.LoadResult(ctx, from, "m2", t0); err != nil || ok {
			t.Fatalf("LoadResult after a failed create = %s %v %v; want none", got, ok, err)
		}
		// No replay record: the task is stored, no result kept.
		kept.RequestID = "never"
		if _, err := s.CreateKeeping(ctx, task("t2", from), kept); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "t2"); err != nil {
			t.Fatalf("task without a replay record: %v", err)
		}
		if _, ok, _ := rs.LoadResult(ctx, from, "never", t0); ok {
			t.Fatal("a result without a record was kept")
		}
	})
}

// CreateKeeping with a claim (a request's replay record left to the
// task's write) writes the record, the result and the task together, and
// nothing when an unexpired record holds the pair: the claim is settled
// as a duplicate and the error wraps snap.ErrClaimTaken. Of many
// concurrent creates claiming one pair, from two stores on one database,
// exactly one stores its task, and the others are shown its record. An
// expired record is claimed afresh.
func TestCreateKeepingClaim(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		rs := s.ReplayStore()
		const from = "bc1pfrom"
		kept := func(id string, fp byte, at time.Time) (tasks.KeptResult, *snap.ReplayClaim) {
			c := &snap.ReplayClaim{From: from, ID: id, Record: record(at, time.Minute, fp)}
			return tasks.KeptResult{From: from, RequestID: id, Result: []byte(`{"fp":` + fmt.Sprint(fp) + `}`),
				Expires: at.Add(2 * time.Minute), Claim: c}, c
		}
		k, c := kept("m1", 1, t0)
		if _, err := s.CreateKeeping(ctx, task("t1", from), k); err != nil {
			t.Fatal(err)
		}
		if c.Pending() || c.Remember(ctx) != nil {
			t.Fatalf("claim after its create: pending %v, outcome %v; want settled, fresh", c.Pending(), c.Remember(ctx))
		}
		if got, ok, err := rs.Lookup(ctx, from, "m1", t0.Add(90*time.Second)); err != nil || !ok || got.Fingerprint[0] != 1 {
			t.Fatalf("Lookup = %+v %v %v; want the claimed record, kept as long as its result", got, ok, err)
		}
		if got, ok, err := rs.LoadResult(ctx, from, "m1", t0); err != nil || !ok || string(got) != `{"fp":1}` {
			t.Fatalf("LoadResult = %s %v %v", got, ok, err)
		}
		// The pair is held: no task, the claim a duplicate.
		k, c = kept("m1", 2, t0.Add(time.Second))
		if _, err := s.CreateKeeping(ctx, task("t2", from), k); !errors.Is(err, snap.ErrClaimTaken) {
			t.Fatalf("CreateKeeping of a held pair: %v; want ErrClaimTaken", err)
		}
		var se *snap.Error
		if err := c.Remember(ctx); !errors.As(err, &se) || se.Code != snap.CodeDuplicateMessage {
			t.Fatalf("claim of a held pair: %v; want a duplicate", err)
		}
		if _, err := s.Get(ctx, "t2"); !errors.Is(err, tasks.ErrNotFound) {
			t.Fatalf("task of a duplicate: %v; want none", err)
		}
		if got, _, _ := rs.LoadResult(ctx, from, "m1", t0); string(got) != `{"fp":1}` {
			t.Fatalf("the first result became %s", got)
		}
		// Expired: claimed afresh, with the new result.
		later := t0.Add(time.Hour)
		k, _ = kept("m1", 3, later)
		if _, err := s.CreateKeeping(ctx, task("t3", from), k); err != nil {
			t.Fatalf("CreateKeeping over an expired record: %v", err)
		}
		if got, _, _ := rs.LoadResult(ctx, from, "m1", later); string(got) != `{"fp":3}` {
			t.Fatalf("result after the record expired: %s", got)
		}

		// Racing.
		stores := []*Store{s, open(t, dsn, Options{})}
		const racers = 16
		var (
			created atomic.Int32
			wg      sync.WaitGroup
		)
		for i := range racers {
			wg.Go(func() {
				k, c := kept("race", byte(10+i), t0)
				_, err := stores[i%2].CreateKeeping(ctx, task(fmt.Sprintf("race-%d", i), from), k)
				switch {
				case err == nil:
					created.Add(1)
				case errors.Is(err, snap.ErrClaimTaken):
					if c.Pending() {
						t.Errorf("racer %d: a taken claim left pending", i)
					}
				default:
					t.Errorf("racer %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if n := created.Load(); n != 1 {
			t.Fatalf("%d tasks created for one claimed pair; want exactly 1", n)
		}
		all, err := s.List(ctx, tasks.Filter{Owner: from})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(all); n != 3 {
			t.Fatalf("%d tasks stored; want 3 (t1, t3, one racer)", n)
		}
	})
}
