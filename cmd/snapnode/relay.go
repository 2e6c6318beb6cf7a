package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/snapnode/snapnode/relay/embedded"
)

// relay runs the embedded Nostr relay alone until SIGINT or SIGTERM.
func (c *cli) relay(args []string) int {
	fs := c.flagSet("relay")
	listen := fs.String("listen", "127.0.0.1:7447", "`address` to listen on (host:port)")
	db := fs.String("db", "./snapnode-relay.db", "SQLite database `file` (\":memory:\" keeps events in memory)")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	const prog = "snapnode relay"

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return c.runRelay(ctx, prog, *listen, *db)
}

// runRelay serves the relay on listen with the database db until ctx is
// cancelled.
func (c *cli) runRelay(ctx context.Context, prog, listen, db string) int {
	r, err := embedded.New(embedded.Config{
		DBPath: db,
		Logger: slog.New(slog.NewTextHandler(c.stderr, nil)),
	})
	if err != nil {
		return c.ioError(prog, err)
	}
	defer r.Close()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return c.ioError(prog, err)
	}
	fmt.Fprintf(c.stdout, "snapnode relay listening url=%s\n", embedded.WebSocketURL(ln.Addr()))
	if err := r.Serve(ctx, ln); err != nil {
		return c.fail(prog, err)
	}
	if err := r.Close(); err != nil {
		return c.fail(prog, err)
	}
	return exitOK
}
