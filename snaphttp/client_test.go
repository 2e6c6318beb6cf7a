package snaphttp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// Against the real server: Send, Stream, SendWS and StreamWS, with a
// request the client signs itself.
func TestClientAgainstServer(t *testing.T) {
	e := start(t, nil, nil)
	ctx := context.Background()
	unsigned := func(method, payload string) *snap.Message {
		return &snap.Message{To: addr(serverKey), Method: method, Payload: []byte(payload)}
	}
	if m, err := e.client.Send(ctx, e.base+"/snap", unsigned("message/send", sendPayload)); err != nil || errCode(m.Payload) != 0 {
		t.Errorf("Send: %v %v", m, err)
	}
	if m, err := e.client.SendWS(ctx, e.ws, unsigned("tasks/get", `{"taskId":"nope"}`)); err != nil || errCode(m.Payload) != snap.CodeTaskNotFound {
		t.Errorf("SendWS: %v %v", m, err)
	}
	for name, stream := range map[string]func(context.Context, string, *snap.Message, func(*snap.Message) error) (*snap.Message, error){
		"SSE": e.client.Stream, "WebSocket": e.client.StreamWS,
	} {
		url := e.base + "/snap"
		if name == "WebSocket" {
			url = e.ws
		}
		var progress []string
		final, err := stream(ctx, url, unsigned("message/stream", `{"steps":3}`), func(m *snap.Message) error {
			progress = append(progress, string(m.Payload))
			return nil
		})
		if err != nil || final.Type != snap.TypeResponse || len(progress) != 3 || !strings.Contains(progress[2], `"progress":1`) {
			t.Errorf("%s: final %v, events %v, err %v", name, final, progress, err)
		}
	}
	if _, err := client.NewHTTP(client.HTTPConfig{}).Send(ctx, e.base+"/snap", unsigned("tasks/get", `{}`)); err == nil {
		t.Error("a client without a key sent an unsigned request")
	}
	if _, err := e.client.Send(ctx, e.base+"/snap", &snap.Message{Method: "tasks/get", Payload: []byte(`{}`)}); err == nil {
		t.Error("a request without to was sent")
	}
}
