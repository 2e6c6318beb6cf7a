package node

import (
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// The console's hints name the node as it was started: nothing for the
// default settings; else its settings file and data folder, absolute,
// and a database of its own when no settings file names it, a
// PostgreSQL URL's password left out of the page. Before, only the login
// hint named the data folder, and the others nothing.
func TestConsoleNodeFlags(t *testing.T) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	def := config.Default()
	cases := []struct {
		name string
		cfg  func(c *config.Config)
		want string
	}{
		{"default", func(*config.Config) {}, ""},
		{"data dir", func(c *config.Config) { c.DataDir = "/srv/my node" }, "--data-dir '/srv/my node'"},
		{"relative data dir", func(c *config.Config) { c.DataDir = "n2" }, "--data-dir " + abs("n2")},
		{"settings file", func(c *config.Config) { c.ConfigFile = "etc/node.toml"; c.Database = "postgres://u:secret@db/x" },
			"--config " + abs("etc/node.toml") + " --data-dir " + abs(def.DataDir)},
		{"sqlite database", func(c *config.Config) { c.Database = "db/tasks.db" }, "--data-dir " + abs(def.DataDir) + " --database " + abs("db/tasks.db")},
		{"postgres database", func(c *config.Config) { c.DataDir = "/d"; c.Database = "postgres://u:secret@db:5432/x?sslmode=disable" },
			"--data-dir /d --database 'postgres://u:xxxxx@db:5432/x?sslmode=disable'"},
		// The database as the node reads it (sqldb.Open): a scheme in
		// any letter case, sqlite: before a path, memory.
		{"postgres database in capitals", func(c *config.Config) { c.DataDir = "/d"; c.Database = "POSTGRES://u:secret@db:5432/x" },
			"--data-dir /d --database postgres://u:xxxxx@db:5432/x"},
		{"password in the query", func(c *config.Config) { c.DataDir = "/d"; c.Database = "postgresql://db/x?user=u&password=secret" },
			"--data-dir /d --database 'postgresql://db/x?password=xxxxx&user=u'"},
		{"sqlite: database", func(c *config.Config) { c.DataDir = "/d"; c.Database = "sqlite:db/tasks.db" }, "--data-dir /d --database " + abs("db/tasks.db")},
		{"sqlite:// database", func(c *config.Config) { c.DataDir = "/d"; c.Database = "sqlite:///srv/tasks.db" }, "--data-dir /d --database /srv/tasks.db"},
		{"memory database", func(c *config.Config) { c.DataDir = "/d"; c.Database = config.MemoryDatabase }, "--data-dir /d --database memory"},
	}
	for _, tc := range cases {
		cfg := config.Default()
		tc.cfg(&cfg)
		if got := nodeFlags(cfg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
