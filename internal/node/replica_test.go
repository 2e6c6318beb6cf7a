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

// takenLog counts the deliveries a node process left to its replica (its
// debug lines "snap: delivery already taken", when the replica has taken
// it, and "inbox: event already processed", when the replica has
// answered it already: the inbox checkpoint is in the shared database) and
// passes warnings and errors on to the test's stderr.
type takenLog struct {
	mu    sync.Mutex
	buf   []byte
	taken int
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
		case bytes.Contains(line, []byte("level=WARN")), bytes.Contains(line, []byte("level=ERROR")):
			os.Stderr.Write(line)
		}
		l.buf = l.buf[i+1:]
	}
}

func (l *takenLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.taken
}

// Two node processes share one identity and one PostgreSQL database and
// listen on one relay. 500 requests make 500 tasks: every request is
// processed by one replica and answered once, and the other replica saw
// it and stayed silent.
func TestReplicasOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dsn := testdb.Postgres(t)
	r := newTestRelay(t)
	keyFile := filepath.Join(t.TempDir(), "identity.key")
	shared, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(keyFile, shared); err != nil {
		t.Fatal(err)
	}
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

	alice := newRequester(t, []string{r.url()})
	const total, workers = 500, 25
	var (
		mu      sync.Mutex
		taskIDs = map[string]string{} // task id → request event id
		reqIDs  []string
		wg      sync.WaitGroup
		next    = make(chan int)
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
	for i := range total {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Each replica receives every request; one answers it and the other
	// logs that it was taken. Wait until all 500 are accounted for.
	deadline := time.Now().Add(60 * time.Second)
	for logs[0].count()+logs[1].count() < total && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	a, b := logs[0].count(), logs[1].count()
	if a+b != total {
		t.Fatalf("deliveries left to the other replica: %d + %d, want %d (every request seen by both)", a, b, total)
	}
	t.Logf("replica 0 answered %d, replica 1 answered %d", b, a)
	if a == 0 || b == 0 {
		t.Logf("one replica answered everything: the test still shows each delivery was seen twice and answered once")
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

	// And 500 tasks in the database, one per request.
	store, err := sqlstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	all, err := store.List(ctx, tasks.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || len(taskIDs) != total {
		t.Fatalf("%d tasks stored, %d answered; want %d", len(all), len(taskIDs), total)
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
