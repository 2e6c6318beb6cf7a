package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// The hints that name the node as a command was given it show no
// PostgreSQL password (as the console's do): stderr goes to terminals
// shared on screen, CI logs and bug reports. Before, --database was
// printed as given, password and all.
func TestNodeCommandHidesPasswords(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:secret@db:5432/x?sslmode=disable",
		"POSTGRESQL://u:secret@db/x",
		"postgres://db/x?user=u&password=secret",
		"host=db password=secret dbname=x",
	} {
		fs := flag.NewFlagSet("held", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("data-dir", "", "")
		fs.String("database", "", "")
		if err := fs.Parse([]string{"--data-dir", "/d", "--database", dsn}); err != nil {
			t.Fatal(err)
		}
		got := nodeCommand(fs)
		if strings.Contains(got, "secret") || !strings.HasPrefix(got, "--data-dir /d --database ") {
			t.Errorf("nodeCommand for --database %q: %q", dsn, got)
		}
	}
}
