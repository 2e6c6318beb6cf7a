package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// takenLog reads a node process's debug log and counts the deliveries it
// left to its replica: opened and found taken ("snap: delivery already
// taken", when the replica has taken it; "inbox: event already
// processed", when the replica has answered it already: the inbox
// checkpoint is in the shared database), left unopened to the replica
// whose share they were ("inbox: requests left to other replicas"
// count=N), and taken up from a replica gone ("inbox: took up another
// replica's request"); it notes how many replicas the process last saw
// alive while the others counted it (0 while they do not: it takes no
// share of its own), and passes warnings and errors on to the test's
// stderr.
type takenLog struct {
	mu                  sync.Mutex
	buf                 []byte
	taken, left, tookUp int
	alive               int
	late                int // late requests dropped unanswered
}

func (l *takenLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := l.buf[:i+1]
		switch {
		case bytes.Contains(line, []byte("snap: delivery already taken")), bytes.Contains(line, []byte("inbox: event already processed")):
			l.taken++
		case bytes.Contains(line, []byte("inbox: requests left to other replicas")):
			l.left += logInt(line, "count")
		case bytes.Contains(line, []byte("inbox: took up another replica's request")):
			l.tookUp++
		case bytes.Contains(line, []byte("inbox: a late request cannot be opened; not answered")):
			l.late++
		case bytes.Contains(line, []byte("replicas: sharing the requests")):
			l.alive = 0
			if bytes.Contains(line, []byte(" counted=true")) {
				l.alive = logInt(line, "alive")
			}
		case bytes.Contains(line, []byte("level=WARN")), bytes.Contains(line, []byte("level=ERROR")):
			os.Stderr.Write(line)
		}
		l.buf = l.buf[i+1:]
	}
}

// sharedKeyFile writes a new identity's key to identity.key in dir, for
// replicas to share, and returns the file and the key.
func sharedKeyFile(t *testing.T, dir string) (string, *identity.Key) {
	t.Helper()
	keyFile := filepath.Join(dir, "identity.key")
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(keyFile, k); err != nil {
		t.Fatal(err)
	}
	return keyFile, k
}

// logInt is the integer value of key in a text log line, 0 if none.
func logInt(line []byte, key string) int {
	_, rest, ok := bytes.Cut(line, []byte(" "+key+"="))
	if !ok {
		return 0
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			break
		}
		n = 10*n + int(c-'0')
	}
	return n
}

// counts returns the deliveries found taken, those left unopened, those
// taken up, and the replicas last seen alive (0 while not counted).
func (l *takenLog) counts() (taken, left, tookUp, alive int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.taken, l.left, l.tookUp, l.alive
}

// lateDropped is how many late requests the process dropped unanswered.
func (l *takenLog) lateDropped() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.late
}

// count is how many deliveries the process did not answer itself.
func (l *takenLog) count() int {
	taken, left, _, _ := l.counts()
	return taken + left
}

// Two node processes share one identity and one PostgreSQL database and
// listen on one relay. Once each sees the other, they share the requests
// out: 500 requests make 500 tasks, each answered once, and each replica
// left its share of the others to the other replica without opening them.
// Then one replica is killed: the other takes up the requests that were
// the dead one's share, and every request is answered.
func TestReplicasOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dsn := testdb.Postgres(t)
	r := newTestRelay(t)
	keyFile, _ := sharedKeyFile(t, t.TempDir())
	var logs [2]takenLog
	var nodes [2]*nodeProcess
	for i := range nodes {
		nodes[i] = startNodeProcessLogging(t, filepath.Join(t.TempDir(), fmt.Sprintf("replica-%d", i)), &logs[i],
			"--relay", r.url(), "--key", keyFile, "--database", dsn, "--log-level", "debug",
			"--identity-rate", "0", "--nostr-key-rate", "0") // hundreds of requests from one requester

	}
	if nodes[0].addr != nodes[1].addr {
		t.Fatalf("replicas have two identities: %s, %s", nodes[0].addr, nodes[1].addr)
	}
	target := client.Target{Address: nodes[0].addr, PubKey: nodes[0].pub}
	waitFor(t, 30*time.Second, "each replica to see the other", func() bool {
		_, _, _, a := logs[0].counts()
		_, _, _, b := logs[1].counts()
		return a == 2 && b == 2
	})

	alice := newRequester(t, []string{r.url()})
	taskIDs := map[string]string{} // task id → request event id
	var reqIDs []string
	send := func(from, to int) {
		t.Helper()
		const workers = 25
		var (
			mu   sync.Mutex
			wg   sync.WaitGroup
			next = make(chan int)
		)
		for range workers {
			wg.Go(func() {
				for i := range next {
					body, _ := json.Marshal(text(fmt.Sprintf("replica-%d", i)))
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					resp, err := alice.client.Request(ctx, target, client.NostrRequest{Method: "message/send", Payload: body, Persist: true})
					cancel()
					if err != nil {
						t.Errorf("request %d: %v", i, err)
						continue
					}
					var p struct {
						Task *tasks.Task `json:"task"`
					}
					if err := json.Unmarshal(resp.Payload, &p); err != nil || p.Task == nil {
						t.Errorf("request %d: %s", i, resp.Payload)
						continue
					}
					mu.Lock()
					if prev, dup := taskIDs[p.Task.ID]; dup {
						t.Errorf("task %s answered for two requests (%s and %s)", p.Task.ID, prev, resp.Event.Tags.GetFirst([]string{"e", ""}))
					}
					e := resp.Event.Tags.GetFirst([]string{"e", ""})
					taskIDs[p.Task.ID] = (*e)[1]
					reqIDs = append(reqIDs, (*e)[1])
					mu.Unlock()
				}
			})
		}
		for i := from; i < to; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	const total = 500
	send(0, total)

	// Each replica receives every request and answers its share; the
	// other's share it leaves unopened (logged once its grace passes), or,
	// where their views of each other differed for a moment, opens and
	// finds taken. Wait until all 500 are accounted for.
	waitFor(t, 60*time.Second, "every request accounted for", func() bool { return logs[0].count()+logs[1].count() >= total })
	takenA, leftA, _, _ := logs[0].counts()
	takenB, leftB, _, _ := logs[1].counts()
	if n := takenA + leftA + takenB + leftB; n != total {
		t.Fatalf("deliveries left to the other replica: %d + %d, want %d (every request seen by both, answered by one)", logs[0].count(), logs[1].count(), total)
	}
	t.Logf("replica 0 answered %d and left %d unopened, replica 1 answered %d and left %d; opened by both: %d", total-leftA-takenA, leftA, total-leftB-takenB, leftB, takenA+takenB)
	if leftA == 0 || leftB == 0 || leftA+leftB < total/2 {
		t.Errorf("requests left unopened to the other replica: %d and %d of %d; want each replica to leave most of the other's share", leftA, leftB, total)
	}

	// A request its owner refuses (its content cannot be opened: 1003) is
	// answered once: the owner records the delivery as it answers, and
	// the other replica, finding it recorded when its grace passes, leaves
	// it.
	leftBefore := logs[0].count() + logs[1].count()
	garbage := nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindEphemeral, Tags: nostr.Tags{{"p", target.PubKey}}, Content: "not a NIP-44 payload"}
	if err := relay.SignEvent(alice.key, &garbage); err != nil {
		t.Fatal(err)
	}
	sctx, stopSub := context.WithCancel(context.Background())
	defer stopSub()
	sub, err := alice.pool.Subscribe(sctx, nostr.Filter{Kinds: []int{relay.KindEphemeral}, Authors: []string{target.PubKey}, Tags: nostr.TagMap{"e": {garbage.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	<-sub.EOSE()
	if _, err := alice.pool.Publish(sctx, garbage); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the unopenable request left to its owner", func() bool {
		return logs[0].count()+logs[1].count() == leftBefore+1
	})
	if n := logs[0].lateDropped() + logs[1].lateDropped(); n != 0 {
		t.Errorf("the unopenable request was taken up late %d times, want 0", n)
	}
	var answers int
	for drained := false; !drained; {
		select {
		case <-sub.Events():
			answers++
		default:
			drained = true
		}
	}
	if answers != 1 {
		t.Fatalf("the unopenable request got %d answers, want 1", answers)
	}
	stopSub()

	// Replica 1 dies without leaving: its share goes unanswered until
	// replica 0 stops counting it alive, then replica 0 takes it up.
	if err := nodes[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = nodes[1].cmd.Wait()
	send(total, total+100)
	if _, _, up, _ := logs[0].counts(); up == 0 {
		t.Errorf("replica 0 took up none of the dead replica's requests; want about half of them")
	}

	// Exactly one reply per request on the relay.
	replies := map[string]int{}
	p := relay.NewPool(relay.PoolConfig{URLs: []string{r.url()}, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.Start(ctx)
	defer p.Close()
	for lo := 0; lo < len(reqIDs); lo += 100 {
		batch := reqIDs[lo:min(lo+100, len(reqIDs))]
		evs, err := p.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{target.PubKey}, Tags: nostr.TagMap{"e": batch}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			replies[(*ev.Tags.GetFirst([]string{"e", ""}))[1]]++
		}
	}
	for _, id := range reqIDs {
		if n := replies[id]; n != 1 {
			t.Errorf("request %s: %d replies, want 1", id, n)
		}
	}

	// And 600 tasks in the database, one per request.
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	all, err := store.List(ctx, tasks.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total+100 || len(taskIDs) != total+100 {
		t.Fatalf("%d tasks stored, %d answered; want %d", len(all), len(taskIDs), total+100)
	}
	for _, tk := range all {
		if _, ok := taskIDs[tk.ID]; !ok {
			t.Errorf("task %s stored but never answered", tk.ID)
		}
		if len(tk.History) != 1 {
			t.Errorf("task %s: %d history entries, want 1", tk.ID, len(tk.History))
		}
	}
}

// waitFor polls cond every 50 ms until it holds, or fails the test after
// limit naming what it waited for.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
