package embedded_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/relay/embedded"
)

// A relay on a loopback port with its database in a data folder, stopped
// by cancelling ctx.
func ExampleRelay_Serve() {
	dir, err := os.MkdirTemp("", "relay")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	r, err := embedded.New(embedded.Config{DBPath: filepath.Join(dir, "relay.db")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	url := embedded.WebSocketURL(ln.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()

	// Any Nostr client can connect; here a bare WebSocket asks for the
	// stored cards offering the skill "echo".
	ws, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`["REQ","cards",{"kinds":[31337],"#skill":["echo"]}]`))
	_, msg, _ := ws.ReadMessage()
	fmt.Println(string(msg))

	cancel()
	fmt.Println("serve:", <-served)
	fmt.Println(strings.HasPrefix(url, "ws://127.0.0.1:"))
	// Output:
	// ["EOSE","cards"]
	// serve: <nil>
	// true
}
