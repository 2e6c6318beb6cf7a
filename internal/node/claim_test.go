package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// TestReplayClaimedWithTheTask: a message/send creating a task writes its
// replay record in the task's own write (SQLite's transaction, one
// PostgreSQL statement), and nothing weakens: a replay of the same bytes
// and a message reusing the id with another body create no second task
// and get the first answer's result, deduplicated; a request refused
// without effect (a message to a task that does not exist) burns its id
// as before, its replay answered 2006; and of many goroutines racing one
// id through the node, with the same bytes and with other bodies, exactly
// one creates a task and every other is answered with its result,
// deduplicated.
func TestReplayClaimedWithTheTask(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		n := startNodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0"; c.Database = dsn })
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		from := k.Address(identity.Mainnet)
		request := func(id, body string, payload any) []byte {
			t.Helper()
			if payload == nil {
				payload = text(body)
			}
			b, err := json.Marshal(payload)
			if err != nil {
				t.Fatal(err)
			}
			return signed(t, &snap.Message{ID: id, Version: snap.ProtocolVersion, From: from, To: n.Address(),
				Type: snap.TypeRequest, Method: "message/send", Payload: b, Timestamp: time.Now().Unix()}, k)
		}
		owned := func() int {
			t.Helper()
			all, err := n.Tasks.List(context.Background(), tasks.Filter{Owner: from})
			if err != nil {
				t.Fatal(err)
			}
			return len(all)
		}

		// Sequential: a replay, and the id with another body.
		id := snap.NewID()
		first := postSNAP(t, n, request(id, "claimed", nil))
		task := taskOf(t, first).ID
		if first["deduplicated"] != nil {
			t.Fatalf("first answer %v; not deduplicated", first)
		}
		for what, raw := range map[string][]byte{"replay": request(id, "claimed", nil), "same id, another body": request(id, "other", nil)} {
			p := postSNAP(t, n, raw)
			if p["deduplicated"] != true || taskOf(t, p).ID != task {
				t.Fatalf("%s: %v; want task %s, deduplicated", what, p, task)
			}
		}
		if got := owned(); got != 1 {
			t.Fatalf("%d tasks after a replay; want 1", got)
		}

		// Refused without effect: the id is burnt all the same.
		id = snap.NewID()
		refused := request(id, "", map[string]any{"taskId": "no-such-task", "message": text("x")["message"]})
		if code := errorCode(postSNAP(t, n, refused)); code != snap.CodeTaskNotFound {
			t.Fatalf("a message to no task: code %d; want %d", code, snap.CodeTaskNotFound)
		}
		if code := errorCode(postSNAP(t, n, request(id, "now-a-new-task", nil))); code != snap.CodeDuplicateMessage {
			t.Fatalf("the refused request's id reused: code %d; want %d", code, snap.CodeDuplicateMessage)
		}
		if got := owned(); got != 1 {
			t.Fatalf("%d tasks after a refused request and its id reused; want 1", got)
		}

		// Racing: 16 copies of one message, 16 other bodies with its id.
		id = snap.NewID()
		const racers = 32
		raws := make([][]byte, racers)
		same := request(id, "raced", nil)
		for i := range raws {
			raws[i] = same
			if i%2 == 1 {
				raws[i] = request(id, fmt.Sprintf("raced-%d", i), nil)
			}
		}
		answers := make([]map[string]any, racers)
		var wg sync.WaitGroup
		for i, raw := range raws {
			wg.Go(func() { answers[i] = postSNAP(t, n, raw) })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		var fresh int
		task = ""
		for i, p := range answers {
			v := taskOf(t, p)
			if task == "" {
				task = v.ID
			}
			if v.ID != task {
				t.Fatalf("racer %d answered task %s, another %s", i, v.ID, task)
			}
			if p["deduplicated"] != true {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%d racers answered as the first; want exactly 1", fresh)
		}
		if got := owned(); got != 2 {
			t.Fatalf("%d tasks after the race; want 2 (one of it)", got)
		}
	})
}

// postSNAP posts raw to n's SNAP endpoint and returns the payload of the
// response.
func postSNAP(t *testing.T, n *node.Node, raw []byte) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.HTTPURL()+"/snap", bytes.NewReader(raw))
	if err != nil {
		t.Error(err)
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Error(err)
		return nil
	}
	var m struct{ Payload map[string]any }
	if err := json.Unmarshal(body, &m); err != nil || m.Payload == nil {
		t.Errorf("HTTP %d: %.300s: %v", resp.StatusCode, body, err)
	}
	return m.Payload
}

// errorCode is the SNAP error code of a response payload, 0 for a result.
func errorCode(p map[string]any) snap.Code {
	e, ok := p["error"].(map[string]any)
	if !ok {
		return 0
	}
	c, _ := e["code"].(float64)
	return snap.Code(c)
}
