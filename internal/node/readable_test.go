package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

// A message/send whose second part is a raw image/png, which the node
// cannot read, is refused over HTTP with 1005 {provided, supported,
// field}, supported being the types the card lists, and no task is
// stored; before, it was accepted and the image silently left out of the
// model's prompt. A raw text/markdown part is accepted.
func TestNodeRefusesPartsItCannotRead(t *testing.T) {
	n := startNodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	from := k.Address(identity.Mainnet)
	send := func(part map[string]any) map[string]any {
		t.Helper()
		b, err := json.Marshal(map[string]any{"message": map[string]any{"messageId": snap.NewID(), "role": "user",
			"parts": []any{map[string]any{"text": "describe the picture"}, part}}})
		if err != nil {
			t.Fatal(err)
		}
		return postSNAP(t, n, signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: from, To: n.Address(),
			Type: snap.TypeRequest, Method: "message/send", Payload: b, Timestamp: time.Now().Unix()}, k))
	}
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	p := send(map[string]any{"raw": png, "mediaType": "image/png"})
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	if e == nil || e["code"] != float64(snap.CodeContentTypeNotSupported) || d["provided"] != "image/png" ||
		d["field"] != "payload.message.parts[1].mediaType" || fmt.Sprint(d["supported"]) != fmt.Sprint(tasks.InputModes()) {
		t.Fatalf("answer %v; want 1005 {provided: image/png, supported: %v, field: payload.message.parts[1].mediaType}", p, tasks.InputModes())
	}
	all, err := n.Tasks.List(context.Background(), tasks.Filter{Owner: from})
	if err != nil || len(all) != 0 {
		t.Fatalf("%d tasks stored for a refused message (%v); want none", len(all), err)
	}

	md := base64.StdEncoding.EncodeToString([]byte("# Notes\nread me"))
	if p := send(map[string]any{"raw": md, "mediaType": "text/markdown; charset=utf-8"}); p["task"] == nil {
		t.Fatalf("a raw text/markdown part: %v; want a task", p)
	}
}

// The card lists, as defaultInputModes, exactly the media types the node
// reads (and refuses others with 1005).
func TestNodeCardListsWhatItReads(t *testing.T) {
	n, _ := startNode(t, nil)
	r := newRequester(t, n.RelayURLs())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, _, err := snapnostr.DiscoverByIdentity(ctx, r.pool, n.Address(), snapnostr.DiscoverConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Card.DefaultInputModes, tasks.InputModes()) {
		t.Errorf("card defaultInputModes %v, want %v", d.Card.DefaultInputModes, tasks.InputModes())
	}
}

// [card] input_modes may only narrow what the node reads: a type it does
// not read stops the start, naming it.
func TestNodeRefusesInputModesItCannotRead(t *testing.T) {
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = t.TempDir(), "127.0.0.1:0", ""
	cfg.Card.InputModes = []string{"text/plain", "image/png"}
	startRefused(t, cfg, "with input_modes listing image/png", "input_modes", `"image/png"`)
}
