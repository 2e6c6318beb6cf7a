package interop

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/jsinterop"
	"github.com/snapnode/snapnode/internal/node"
)

// startSnapnode starts a real node: its embedded relay when relayURL is
// empty, else the given relay only.
func startSnapnode(t *testing.T, relayURL string) *node.Node {
	t.Helper()
	n, _ := startSnapnodeWith(t, func(c *config.Config) {
		if relayURL != "" {
			c.Relays = []string{relayURL}
		}
	})
	return n
}

// startSnapnodeWith starts a real node with its embedded relay and no HTTP
// unless mutate changes them; it stops at the end of the test. It returns
// the settings the node runs with.
func startSnapnodeWith(t *testing.T, mutate func(*config.Config)) (*node.Node, config.Config) {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = ""
	mutate(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := n.Wait(); err != nil {
			t.Errorf("node stopped with %v", err)
		}
	})
	return n, cfg
}

// jsRequest runs the JavaScript client's request command against n and
// returns its replies and what it sent.
func jsRequest(t *testing.T, n *node.Node, secret, method string, payload any, extra ...string) ([]jsinterop.Reply, []jsinterop.Sent, int) {
	t.Helper()
	body, _ := json.Marshal(payload)
	args := []string{"request", "--relay", n.RelayURLs()[0], "--to-pubkey", n.NostrPublicKey(), "--to-address", n.Address(),
		"--secret", secret, "--method", method, "--payload", string(body), "--timeout-ms", "15000"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, code := jsinterop.Run(t, ctx, append(args, extra...)...)
	replies, sent := jsinterop.Lines(t, out)
	return replies, sent, code
}

type nodeResponse struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Type    string `json:"type"`
	Method  string `json:"method"`
	Payload struct {
		Task *struct {
			ID     string `json:"id"`
			Status struct {
				State   string `json:"state"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"task"`
		Error *struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
		Deduplicated bool `json:"deduplicated"`
	} `json:"payload"`
}

// noAgent tells whether r carries a task as a node without an agent
// answers free text: failed at once, the status message naming the flag
// that enables one.
func noAgent(r nodeResponse) bool {
	t := r.Payload.Task
	return t != nil && t.Status.State == "failed" && strings.Contains(t.Status.Message, "--llm-url")
}

func decodeNode(t *testing.T, r jsinterop.Reply) nodeResponse {
	t.Helper()
	var s nodeResponse
	if err := json.Unmarshal(r.Response, &s); err != nil {
		t.Fatalf("response: %v\n%s", err, r.Response)
	}
	return s
}

const jsSecret = "3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c"

func text(s string) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "js-" + strconv.FormatInt(time.Now().UnixNano(), 36), "role": "user", "parts": []any{map[string]any{"text": s}}}}
}

// An independent JavaScript implementation (nostr-tools, @noble/curves)
// drives the real node over Nostr: every method, persist, and every error
// class, each answered with a response the client verifies (the signature
// against the sender's key, the sender it asked, itself as recipient, type
// response, the timestamp window). Run over the node's embedded relay and
// over a third-party relay (@nostr-relay/core), which ignores tag filters on
// live subscriptions.
func TestJavaScriptClientDrivesNode(t *testing.T) {
	jsinterop.Node(t)
	relays := map[string]func(t *testing.T) string{
		"embedded relay":          func(t *testing.T) string { return "" },
		"@nostr-relay/core relay": func(t *testing.T) string { return jsinterop.StartRelay(t) },
	}
	for name, relayURL := range relays {
		t.Run(name, func(t *testing.T) {
			n := startSnapnode(t, relayURL(t))

			// message/send, tasks/get: free text, on a node without an
			// agent, fails at once, saying how to enable one.
			replies, _, code := jsRequest(t, n, jsSecret, "message/send", text("hello from JavaScript"))
			if code != 0 || len(replies) == 0 || !replies[0].Verified {
				t.Fatalf("message/send: exit %d, replies %+v", code, replies)
			}
			r := decodeNode(t, replies[0])
			if r.Type != "response" || r.From != n.Address() || r.Payload.Task == nil || !noAgent(r) {
				t.Fatalf("message/send response: %s; want a failed task naming --llm-url", replies[0].Response)
			}
			if replies[0].Event.Kind != 21339 {
				t.Errorf("reply kind %d, want the request's 21339", replies[0].Event.Kind)
			}
			id := r.Payload.Task.ID
			replies, _, _ = jsRequest(t, n, jsSecret, "tasks/get", map[string]any{"taskId": id})
			if r := decodeNode(t, replies[0]); !replies[0].Verified || r.Payload.Task == nil || r.Payload.Task.ID != id || !noAgent(r) {
				t.Fatalf("tasks/get: %s", replies[0].Response)
			}

			// tasks/cancel of a task that stays live: a delete held for
			// the operator's confirmation (of a file written first).
			file := "js-cancel.txt" // a node of its own per relay
			replies, _, _ = jsRequest(t, n, jsSecret, "message/send", writeProposal(file, "to delete\n"))
			if r := decodeNode(t, replies[0]); !replies[0].Verified || r.Payload.Task == nil || r.Payload.Task.Status.State != "completed" {
				t.Fatalf("write %s: %s", file, replies[0].Response)
			}
			replies, _, _ = jsRequest(t, n, jsSecret, "message/send", deleteProposal(file))
			held := decodeNode(t, replies[0])
			if !replies[0].Verified || held.Payload.Task == nil || held.Payload.Task.Status.State != "input_required" ||
				!strings.Contains(held.Payload.Task.Status.Message, "confirmation needed") {
				t.Fatalf("delete %s: %s; want input_required, confirmation needed", file, replies[0].Response)
			}
			// persist: 4339 in, 4339 out with an expiration.
			replies, _, _ = jsRequest(t, n, jsSecret, "tasks/cancel", map[string]any{"taskId": held.Payload.Task.ID}, "--persist")
			if r := decodeNode(t, replies[0]); !replies[0].Verified || r.Payload.Task == nil || r.Payload.Task.ID != held.Payload.Task.ID || r.Payload.Task.Status.State != "canceled" {
				t.Fatalf("tasks/cancel: %s", replies[0].Response)
			}
			ev := replies[0].Event
			hasExp := false
			for _, tag := range ev.Tags {
				if len(tag) > 1 && tag[0] == "expiration" {
					exp, _ := strconv.ParseInt(tag[1], 10, 64)
					hasExp = exp > time.Now().Unix()
				}
			}
			if ev.Kind != 4339 || !hasExp {
				t.Errorf("persisted reply: kind %d, tags %v; want 4339 with a future expiration", ev.Kind, ev.Tags)
			}

			// Every error class gets a verified, signed answer.
			cases := []struct {
				mutate string
				method string
				code   int
				field  string
			}{
				{"bad-sig", "message/send", 2001, "sig"},
				{"stale", "message/send", 2004, ""},
				{"bad-field", "message/send", 1004, "id"},
				{"unknown-method", "message/send", 1007, ""},
				{"wrong-from", "message/send", 2003, ""},
				{"wrong-to", "message/send", 1004, "to"},
			}
			for _, c := range cases {
				t.Run(c.mutate, func(t *testing.T) {
					replies, _, _ := jsRequest(t, n, jsSecret, c.method, text(c.mutate), "--mutate", c.mutate)
					if len(replies) == 0 {
						t.Fatal("no answer: the peer would wait for a time-out")
					}
					r := decodeNode(t, replies[0])
					if r.Payload.Error == nil || r.Payload.Error.Code != c.code {
						t.Fatalf("answer %s, want code %d", replies[0].Response, c.code)
					}
					if c.field != "" && r.Payload.Error.Data["field"] != c.field {
						t.Errorf("data.field %v, want %s", r.Payload.Error.Data["field"], c.field)
					}
					// The answer is signed and from the node; its checks
					// that concern the requester's own mutation aside.
					if !replies[0].Checks["sig"] || r.From != n.Address() {
						t.Errorf("error answer not signed by the node: checks %v", replies[0].Checks)
					}
				})
			}
			t.Run("duplicate", func(t *testing.T) {
				replies, _, _ := jsRequest(t, n, jsSecret, "message/send", text("twice"), "--mutate", "dup", "--linger-ms", "1500")
				var first, second *nodeResponse
				for _, rep := range replies {
					r := decodeNode(t, rep)
					switch rep.Attempt {
					case 1:
						first = &r
					case 2:
						second = &r
					}
				}
				if first == nil || second == nil {
					t.Fatalf("want an answer to each copy, got %d replies", len(replies))
				}
				if first.Payload.Task == nil || second.Payload.Task == nil || !second.Payload.Deduplicated ||
					first.Payload.Task.ID != second.Payload.Task.ID {
					t.Errorf("duplicate message/send: first %+v, second %+v; want the original result, deduplicated", first.Payload, second.Payload)
				}
			})
			if t.Failed() {
				out, _ := json.Marshal(n.Card())
				t.Logf("node card: %s", strings.TrimSpace(string(out)))
			}
		})
	}
}
