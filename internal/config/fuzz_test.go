package config_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/snapnode/snapnode/internal/config"
)

// fzLoad loads the settings from the file alone, as `snapnode run
// --config file` with no environment would.
func fzLoad(t *testing.T, file string) (config.Config, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := config.Default()
	config.Flags(fs, &c)
	if err := fs.Parse([]string{"--config", file}); err != nil {
		t.Fatal(err)
	}
	err := config.Load(&c, fs, func(string) string { return "" })
	return c, err
}

// FuzzFile feeds arbitrary text, as the TOML file an operator edits, to
// Load. It never panics; settings it accepts, written again as TOML, load
// to the same settings.
func FuzzFile(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "snapnode.toml")); err == nil {
		f.Add(b)
	}
	for _, s := range []string{
		"", "workers = 3\nmax_drift = \"90s\"\nrelays = [\"wss://file.example\"]\n[card]\nname = \"Filed\"\n",
		"max_drift = \"90\"", "workrs = 3", "[agent]\nmax_steps = -1\n", "relay_event_rate = nan", "http_rate = 1e400",
		"[card]\n[[card.skills]]\nid = \"a\"\nname = \"A\"\ndescription = \"d\"\n", "log_level = \"\\ud800\"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "snapnode.toml")
		if err := os.WriteFile(file, text, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := fzLoad(t, file)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := toml.NewEncoder(&out).Encode(c); err != nil {
			t.Fatalf("accepted settings do not encode: %v", err)
		}
		again := filepath.Join(dir, "again.toml")
		if err := os.WriteFile(again, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		c2, err := fzLoad(t, again)
		if err != nil {
			t.Fatalf("accepted settings written again are refused: %v\n%s\nfrom %q", err, out.Bytes(), text)
		}
		c2.ConfigFile = c.ConfigFile
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("settings written again load otherwise: %v\n%s\nfrom %q", config.Changed(c, c2), out.Bytes(), text)
		}
	})
}
