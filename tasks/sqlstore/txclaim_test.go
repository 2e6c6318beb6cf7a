package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A TxClaim whose record was written in a transaction that then rolled
// back writes it again in the work's next commit: the executor runs an
// approval's first statement again in the commit that records the
// approval refused past a quota (the journal's refusal), after the
// commit that carried it rolled back. Before, In wrote nothing the
// second time, the refusal committed without the record, and Done
// settled the claim as written: the request's id stayed unspent in the
// store though its decision had an effect. A record that did commit
// is not written again (In in a later commit of the same work), and a
// copy's claim is still refused.
func TestTxClaimAfterRollback(t *testing.T) {
	dialects(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		s := open(t, dsn, Options{})
		svc := tasks.NewService(s, tasks.ServiceOptions{Logger: slog.New(slog.DiscardHandler)})
		now := time.Now()
		claim := func(id, via string) *snap.ReplayClaim {
			return &snap.ReplayClaim{From: "sender", ID: id, Record: snap.ReplayRecord{FirstSeen: now,
				Expires: now.Add(time.Hour), Fingerprint: sha256.Sum256([]byte(id)), Via: via}}
		}
		errRefused := errors.New("refused past a quota")
		in := func(tc *tasks.TxClaim, fail error) error {
			t.Helper()
			return s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				if err := tc.In(ctx, tx); err != nil {
					return err
				}
				return fail
			})
		}
		recorded := func(id string) bool {
			t.Helper()
			_, ok, err := s.ReplayStore().Lookup(ctx, "sender", id, now)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}

		// Rolled back, then committed: the record is in the commit.
		c := claim("rolled-back", "")
		tc := svc.TxClaim(c)
		if err := in(tc, errRefused); !errors.Is(err, errRefused) {
			t.Fatalf("first commit: %v; want the refusal", err)
		}
		if err := in(tc, nil); err != nil {
			t.Fatalf("second commit: %v", err)
		}
		if err := tc.Done(nil); err != nil {
			t.Fatalf("Done: %v", err)
		}
		if !recorded("rolled-back") {
			t.Error("the work committed and its claim settled, but no replay record is stored")
		}
		if c.Pending() {
			t.Error("claim still pending")
		}

		// Committed, then a later commit of the same work: nothing
		// written again, no error.
		c = claim("committed", "")
		tc = svc.TxClaim(c)
		for i := range 2 {
			if err := in(tc, nil); err != nil {
				t.Fatalf("commit %d: %v", i+1, err)
			}
		}
		if err := tc.Done(nil); err != nil || !recorded("committed") {
			t.Fatalf("Done: %v, recorded %v", err, recorded("committed"))
		}

		// A copy of it (another delivery) is a duplicate, at its first
		// commit and at a later one.
		cp := claim("committed", "relay-event")
		cp.Record.FirstSeen = now.Add(time.Second)
		tcp := svc.TxClaim(cp)
		if err := in(tcp, nil); !errors.Is(err, snap.ErrClaimTaken) {
			t.Fatalf("copy: %v; want ErrClaimTaken", err)
		}
		if err := tcp.Done(errors.New("commit failed")); !errors.Is(err, snap.ErrClaimTaken) {
			t.Fatalf("copy's Done: %v; want ErrClaimTaken", err)
		}

		// A claim whose commit rolled back meets, at its next commit, the
		// record a copy committed meanwhile: a duplicate, nothing done.
		a, b := claim("raced", ""), claim("raced", "relay-event")
		b.Record.FirstSeen = now.Add(time.Second)
		tca, tcb := svc.TxClaim(a), svc.TxClaim(b)
		if err := in(tca, errRefused); !errors.Is(err, errRefused) {
			t.Fatalf("first commit: %v; want the refusal", err)
		}
		if err := in(tcb, nil); err != nil {
			t.Fatalf("the copy's commit: %v", err)
		}
		if err := in(tca, nil); !errors.Is(err, snap.ErrClaimTaken) {
			t.Fatalf("second commit after the copy's: %v; want ErrClaimTaken", err)
		}
		if err := tca.Done(errors.New("commit failed")); !errors.Is(err, snap.ErrClaimTaken) {
			t.Fatalf("Done: %v; want ErrClaimTaken", err)
		}
	})
}
