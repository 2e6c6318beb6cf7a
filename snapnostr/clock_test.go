package snapnostr_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// An agent whose clock trails its requester's, within the SNAP window,
// still gets its answers to it: an SDK peer listens for replies dated
// from 5 s before it sent, and a reply dated by the agent's clock alone,
// 30 s behind, is dropped by the relay's since filter, so the requester
// waited out its time-out for an answer sent at once. A reply is dated no
// earlier than the request it answers, and no later than the window
// ahead of the agent's clock. (snapnode's own client listens back the
// whole window, so the reply's date is checked here as an SDK peer's
// filter would.)
func TestAnswersReachARequesterWhoseClockIsAhead(t *testing.T) {
	// Up to 2 s short of the window: the requester also checks the
	// response's own timestamp, the agent's clock, against its clock, and
	// an agent a whole window behind is refused once the exchange crosses
	// a second (TestReplyTime holds the cap at the window's edge).
	for _, behind := range []time.Duration{30 * time.Second, snap.DefaultMaxDrift - 2*time.Second} {
		t.Run(behind.String(), func(t *testing.T) {
			now := func() time.Time { return time.Now().Add(-behind) }
			n := newStreamNet(t, countRouter(nil), 4, func(c *snapnostr.InboxConfig) {
				c.Now = now
				c.Handler = snap.NewServer(snap.ServerConfig{Key: c.Key, Router: countRouter(nil), Logger: quiet(), Now: now,
					MaxResponseSize: relay.MaxNIP44Plain,
					Validator:       snap.NewValidator(snap.Config{Self: c.Key.Address(identity.Mainnet), Now: now, Replay: snap.NewMemoryReplayStore(0)})})
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for _, persist := range []bool{false, true} {
				sent := time.Now().Unix()
				resp, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: persist})
				if err != nil {
					t.Fatalf("persist %v, the agent %v behind: %v", persist, behind, err)
				}
				if at := int64(resp.Event.CreatedAt); at < sent-5 {
					t.Fatalf("persist %v, the agent %v behind: the reply is dated %d s before the request was sent, past an SDK peer's since (5 s)", persist, behind, sent-at)
				}
				if p := payload(t, resp); p["task"] == nil {
					t.Fatalf("answer: %v", p)
				}
			}
		})
	}
}
