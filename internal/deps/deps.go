//go:build tools

// Package deps pins modules that packages in progress import, so that go
// mod tidy keeps them while those packages are written.
package deps

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/gorilla/websocket"
	_ "github.com/nbd-wtf/go-nostr"
	_ "github.com/nbd-wtf/go-nostr/nip44"
	_ "modernc.org/sqlite"
)
