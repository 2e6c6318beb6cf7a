package snap_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// TestAnswerLog: one info line per request served (method, requester,
// request and task ids, transport); refusals at warn, at most one line per
// ten seconds of the server's clock, the next one counting those left out.
func TestAnswerLog(t *testing.T) {
	now := int64(t0)
	clock := func() time.Time { return time.Unix(now, 0) }
	r := snap.NewRouter()
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "task-1", "status": map[string]any{"state": "submitted"}}}, nil
	})
	r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": "x"})
	})
	var buf bytes.Buffer
	s := snap.NewServer(snap.ServerConfig{
		Key: keyB, Router: r, Now: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: clock, Replay: snap.NewMemoryReplayStore(0)}),
	})
	ctx := context.Background()
	s.Respond(ctx, snap.Inbound{Raw: request(t, "req-1", "message/send", `{"message":{}}`), Transport: "http"})
	for i := range 5 { // one line, four counted
		s.Respond(ctx, snap.Inbound{Raw: request(t, "get-"+string(rune('a'+i)), "tasks/get", `{"taskId":"x"}`), Transport: "nostr"})
	}
	now += 11
	s.Respond(ctx, snap.Inbound{Raw: request(t, "get-late", "tasks/get", `{"taskId":"x"}`)})

	var lines []map[string]any
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (one answer, two refusals):\n%s", len(lines), buf.String())
	}
	a := lines[0]
	if a["level"] != "INFO" || a["msg"] != "request answered" || a["method"] != "message/send" || a["id"] != "req-1" ||
		a["from"] != keyA.Address(identity.Mainnet) || a["transport"] != "http" || a["task"] != "task-1" || a["state"] != "submitted" {
		t.Errorf("the answer's line: %v", a)
	}
	first, second := lines[1], lines[2]
	if first["level"] != "WARN" || first["msg"] != "request refused" || first["code"] != float64(snap.CodeTaskNotFound) ||
		first["transport"] != "nostr" || first["refused_since_last"] != nil {
		t.Errorf("the first refusal's line: %v", first)
	}
	if second["refused_since_last"] != float64(4) || second["transport"] != "direct" || !strings.Contains(second["refused_by_code"].(string), "1001:4") {
		t.Errorf("the refusal after the window: %v", second)
	}
}

// TestResultTask: the task of a result payload, wrapped ({"task": …}, as
// message/send answers) or bare (tasks/get, tasks/cancel); nothing for a
// payload without a task id and state.
func TestResultTask(t *testing.T) {
	for _, c := range []struct {
		payload            string
		id, state, message string
	}{
		{`{"task":{"id":"t1","status":{"state":"working","message":"on it"}}}`, "t1", "working", "on it"},
		{`{"id":"t2","status":{"state":"completed"},"history":[]}`, "t2", "completed", ""},
		{`{"task":{"id":"t3","status":{}}}`, "", "", ""},
		{`{"task":{"status":{"state":"working"}}}`, "", "", ""},
		{`{"error":{"code":1001,"message":"task not found"}}`, "", "", ""},
		{`{"status":`, "", "", ""},
	} {
		id, state, message := snap.ResultTask([]byte(c.payload))
		if id != c.id || state != c.state || message != c.message {
			t.Errorf("ResultTask(%s) = %q, %q, %q; want %q, %q, %q", c.payload, id, state, message, c.id, c.state, c.message)
		}
	}
}
