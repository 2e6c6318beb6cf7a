package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
)

// lineLog keeps a node process's debug log, line by line, for a test to
// search, and passes it on to takenLog.
type lineLog struct {
	takenLog
	mu    sync.Mutex
	lines []string
	part  []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.takenLog.Write(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.lines = append(l.lines, string(l.part[:i]))
		l.part = l.part[i+1:]
	}
}

// count is how many lines contain every one of subs.
func (l *lineLog) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// Two replicas share one identity, one PostgreSQL database and one relay,
// and each lets an identity make one request every two seconds (a
// limiter of its own, not shared). A requester sends a burst of requests
// of every kind at once: each replica answers the first of its share and
// refuses the rest with 5002, answers it sends without writing a replay
// record. The other replica, finding no record naming those deliveries
// once their grace passes, takes them up late, by which time its own
// limiter lets one through. Each request must still get exactly one
// answer on the relay: the refusal its owner sent.
func TestReplicasAnswerEachRequestOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dsn := testdb.Postgres(t)
	r := newTestRelay(t)
	keyFile, _ := sharedKeyFile(t, t.TempDir())
	var logs [2]lineLog
	var nodes [2]*nodeProcess
	for i := range nodes {
		nodes[i] = startNodeProcessLogging(t, filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d", i)), &logs[i],
			"--relay", r.url(), "--key", keyFile, "--database", dsn, "--log-level", "debug",
			"--identity-rate", "0.5", "--identity-burst", "1", "--nostr-key-rate", "0")
	}
	target := client.Target{Address: nodes[0].addr, PubKey: nodes[0].pub}
	waitFor(t, 30*time.Second, "each replica to see the other", func() bool {
		_, _, _, a := logs[0].counts()
		_, _, _, b := logs[1].counts()
		return a == 2 && b == 2
	})

	alice := newRequester(t, []string{r.url()})
	// Every reply to alice, counted by the request it names.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := nostr.Now() - 5
	sub, err := alice.pool.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindEphemeral, relay.KindMessage},
		Authors: []string{target.PubKey}, Tags: nostr.TagMap{"p": {alice.key.NostrPublicKey()}}, Since: &since})
	if err != nil {
		t.Fatal(err)
	}
	<-sub.EOSE()
	var (
		mu      sync.Mutex
		replies = map[string]int{}
	)
	go func() {
		for ev := range sub.Events() {
			if e := ev.Tags.GetFirst([]string{"e", ""}); e != nil {
				mu.Lock()
				replies[(*e)[1]]++
				mu.Unlock()
			}
		}
	}()

	type request struct {
		method string
		body   any
	}
	var reqs []request
	for i := range 3 {
		reqs = append(reqs,
			request{"message/send", text(fmt.Sprintf("answer-once-%d", i))},
			request{"tasks/get", map[string]any{"id": fmt.Sprintf("no-such-task-%d", i)}},
			request{"tasks/cancel", map[string]any{"id": fmt.Sprintf("no-such-task-%d", i)}},
			request{"no/such-method", map[string]any{}})
	}
	var (
		wg     sync.WaitGroup
		reqIDs = make([]string, len(reqs))
	)
	for i, rq := range reqs {
		wg.Go(func() {
			body, _ := json.Marshal(rq.body)
			rctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			resp, err := alice.client.Request(rctx, target, client.NostrRequest{Method: rq.method, Payload: body})
			if err != nil {
				t.Errorf("%s: %v", rq.method, err)
				return
			}
			reqIDs[i] = (*resp.Event.Tags.GetFirst([]string{"e", ""}))[1]
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Each request is left by the replica whose share it is not to its
	// owner once its grace passes, or taken up late; a late one is then
	// answered or dropped. Wait for all of that, and for every reply the
	// replicas published to reach alice.
	lateDone := func(l *lineLog, id string) bool {
		return l.count(`"inbox: answered"`, "request="+id) > 0 || l.count("not answered", "via="+id) > 0 ||
			l.count(`"snap: delivery already taken"`, "via="+id) > 0 || l.count(`"inbox: event already processed"`, "event="+id) > 0
	}
	waitFor(t, 60*time.Second, "every request settled by both replicas", func() bool {
		settled := 0
		for i := range logs {
			taken, left, _, _ := logs[i].counts()
			settled += taken + left
			for _, id := range reqIDs {
				if logs[i].count("took up a request nobody took", "event="+id) > 0 && lateDone(&logs[i], id) {
					settled++
				}
			}
		}
		return settled >= len(reqs)
	})
	waitFor(t, 30*time.Second, "every reply published to reach the requester", func() bool {
		published := logs[0].count(`"inbox: answered"`) + logs[1].count(`"inbox: answered"`)
		mu.Lock()
		defer mu.Unlock()
		got := 0
		for _, n := range replies {
			got += n
		}
		return got >= published
	})

	mu.Lock()
	defer mu.Unlock()
	for i, id := range reqIDs {
		if n := replies[id]; n != 1 {
			t.Errorf("%s (request %s): %d replies, want 1", reqs[i].method, id, n)
		}
	}
}
