package agent

import (
	"context"
	"fmt"
	"testing"
)

// Recent reads the newest interactions of a long history and no others:
// a job of 10,000 steps, its oldest row unreadable, gives its newest 200
// and counts the rest (Interactions, which reads them all, fails on
// it); the proposer of an action is found among the older ones by its
// id.
func TestStoreRecent(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		const steps, limit = 10000, 200
		j := storeJob("long", Running, storeT0)
		j.NextSeq = steps
		mustCreate(t, ctx, s, j)
		tx, err := s.db.W.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for seq := range steps {
			body, err := encodeInteraction(storeInteraction(seq, fmt.Sprintf("text %d", seq)))
			if seq == 0 {
				body = []byte("not JSON: a row Recent must not read")
			}
			if err == nil {
				_, err = tx.ExecContext(ctx, s.d.Rebind(`INSERT INTO agent_interactions (task_id, seq, body) VALUES (?, ?, ?)`), "long", seq, string(body))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Interactions(ctx, "long"); err == nil {
			t.Fatal("Interactions read the unreadable row without an error")
		}
		its, earlier, err := s.Recent(ctx, "long", limit)
		if err != nil || len(its) != limit || earlier != steps-limit || its[0].Sequence != steps-limit || its[limit-1].Sequence != steps-1 {
			t.Fatalf("Recent: %d interactions from %v, %d earlier, %v; want the newest %d, %d earlier", len(its), seqOf(its), earlier, err, limit, steps-limit)
		}
		if o := its[limit-1].Observation; o == nil || o.Text != fmt.Sprintf("text %d", steps-1) || its[limit-1].Request.Metadata.Phase != "work" {
			t.Fatalf("the newest, as read: %+v", its[limit-1])
		}
		p, err := s.Proposer(ctx, "long", "act-42")
		if err != nil || p == nil || p.Sequence != 42 {
			t.Fatalf("Proposer of act-42: %+v, %v", p, err)
		}
		if p, err := s.Proposer(ctx, "long", "act-none"); err != nil || p != nil {
			t.Fatalf("Proposer of no step's action: %+v, %v", p, err)
		}
	})
}

// Recent reads the newest of an archived history from its newest
// segments, and as Interactions does (but the requests' messages).
func TestStoreRecentArchived(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, s *Store) {
		heldJob(t, ctx, s, 9, func(seq int) {
			if seq == 3 || seq == 6 {
				if _, err := s.Archive(ctx, "arch", "me", seq, false); err != nil {
					t.Fatal(err)
				}
			}
		})
		all, err := s.Interactions(ctx, "arch")
		if err != nil {
			t.Fatal(err)
		}
		for _, limit := range []int{1, 2, 4, 7, 9, 20} {
			its, earlier, err := s.Recent(ctx, "arch", limit)
			n := min(limit, len(all))
			if err != nil || len(its) != n || earlier != len(all)-n {
				t.Fatalf("Recent %d: %d from %v, %d earlier, %v", limit, len(its), seqOf(its), earlier, err)
			}
			for i, it := range its {
				want := all[len(all)-n+i]
				if it.Sequence != want.Sequence || it.Observation.Text != want.Observation.Text || it.Request.Messages != nil {
					t.Fatalf("Recent %d: #%d is %d %q, want %d %q, no messages", limit, i, it.Sequence, it.Observation.Text, want.Sequence, want.Observation.Text)
				}
			}
		}
		if p, err := s.Proposer(ctx, "arch", "act-8"); err != nil || p == nil || p.Sequence != 8 {
			t.Fatalf("Proposer of act-8: %+v, %v", p, err)
		}
	})
}

func seqOf(its []Interaction) []int {
	var out []int
	for _, it := range its {
		out = append(out, it.Sequence)
	}
	if len(out) > 4 {
		out = append(out[:2], out[len(out)-2:]...)
	}
	return out
}
