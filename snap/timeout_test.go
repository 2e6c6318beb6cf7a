package snap_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// ctxReplay and ctxResults are the memory stores failing on a context
// that ended, as the SQL stores do.
type ctxReplay struct{ *snap.MemoryReplayStore }

func (s ctxReplay) Lookup(ctx context.Context, from, id string, now time.Time) (snap.ReplayRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return snap.ReplayRecord{}, false, err
	}
	return s.MemoryReplayStore.Lookup(ctx, from, id, now)
}

func (s ctxReplay) Remember(ctx context.Context, from, id string, rec snap.ReplayRecord) (snap.ReplayRecord, bool, error) {
	if err := ctx.Err(); err != nil {
		return snap.ReplayRecord{}, false, err
	}
	return s.MemoryReplayStore.Remember(ctx, from, id, rec)
}

type ctxResults struct{ *snap.MemoryResultStore }

func (s ctxResults) LoadResult(ctx context.Context, from, id string, now time.Time) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	return s.MemoryResultStore.LoadResult(ctx, from, id, now)
}

// A request whose write carrying its replay record committed as the
// request time-out passed (the database slow: the commit landed, its
// result abandoned with the context) is answered for what it did — the
// result kept with it, or 2006 saying that its id is spent — as when the
// result is lost otherwise (TestClaimOwnWriteLostIsAnswered), not 5003
// telling the requester to send again what would be refused as a
// duplicate: the Server's look for the record is not made on the
// context the time-out ended.
func TestRequestTimeoutAfterItsCommitNotToldToRetry(t *testing.T) {
	for _, keep := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			replay := ctxReplay{snap.NewMemoryReplayStore(0)}
			results := ctxResults{snap.NewMemoryResultStore(10)}
			r := snap.NewRouter()
			effects := 0
			r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
				c := req.Claim
				if done, err := writeWithClaim(ctx, t, c, replay, results, keep); !done {
					return nil, err
				}
				effects++
				// The commit stood; its result comes back after the
				// time-out, which the driver reports.
				<-ctx.Done()
				return nil, ctx.Err()
			})
			s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
				RequestTimeout: 20 * time.Second,
				Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: replay,
					ClaimMethods: []string{"message/send"}})})
			raw := request(t, "c-1", "message/send", `{"n":1}`)
			for _, what := range []string{"the request", "its retry"} {
				resp := s.Respond(context.Background(), snap.Inbound{Raw: raw, Transport: "http"})
				p := shown(resp)
				switch {
				case resp == nil:
					t.Fatalf("keep %v: %s: no answer", keep, what)
				case keep && !strings.Contains(p, `"task-1"`):
					t.Fatalf("keep %v: %s answered %s; want the kept result", keep, what, p)
				case !keep && !strings.Contains(p, `"code":2006`):
					t.Fatalf("keep %v: %s answered %s; want 2006, the id spent", keep, what, p)
				}
			}
			if effects != 1 {
				t.Fatalf("keep %v: %d effects; want 1", keep, effects)
			}
		})
	}
}
