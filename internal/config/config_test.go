package config_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
)

func load(t *testing.T, args []string, env map[string]string) (config.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := config.Default()
	config.Flags(fs, &c)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := config.Load(&c, fs, func(k string) string { return env[k] })
	return c, err
}

func TestDefaultsNeedNothing(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "snapnode-data" || c.RelayListen != "127.0.0.1:7447" || c.HTTPListen != "127.0.0.1:7448" || len(c.Relays) != 0 ||
		c.MaxDrift.Duration != time.Minute || c.KeyPath() != filepath.Join("snapnode-data", "identity.key") {
		t.Errorf("defaults: %+v", c)
	}
}

// Precedence: flag, then environment, then file, then default; each
// setting independently.
func TestPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte(`
data_dir = "from-file"
relay_listen = "127.0.0.1:9000"
log_level = "warn"
workers = 3
max_drift = "90s"
relays = ["wss://file.example"]
[card]
name = "Filed"
`), 0o600)
	env := map[string]string{"SNAPNODE_DATA_DIR": "from-env", "SNAPNODE_LOG_LEVEL": "error", "SNAPNODE_RELAYS": "wss://env1.example, wss://env2.example"}
	c, err := load(t, []string{"--config", file, "--data-dir", "from-flag", "--relay", "ws://127.0.0.1:1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"data_dir: flag over env and file", c.DataDir, "from-flag"},
		{"log_level: env over file", c.LogLevel, "error"},
		{"relay_listen: file over default", c.RelayListen, "127.0.0.1:9000"},
		{"relays: flag over env", strings.Join(c.Relays, ","), "ws://127.0.0.1:1"},
		{"card name: file", c.Card.Name, "Filed"},
		{"card version: default kept under a partial [card]", c.Card.Version, "0.1.0"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: %q, want %q", ch.name, ch.got, ch.want)
		}
	}
	if c.Workers != 3 || c.MaxDrift.Duration != 90*time.Second {
		t.Errorf("file values lost: workers %d, max_drift %v", c.Workers, c.MaxDrift)
	}
	// Without the flag, the environment's list wins over the file's.
	c, err = load(t, []string{"--config", file}, env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Relays, ",") != "wss://env1.example,wss://env2.example" {
		t.Errorf("relays from env: %v", c.Relays)
	}
	// SNAPNODE_CONFIG names the file when --config is absent.
	c, err = load(t, nil, map[string]string{"SNAPNODE_CONFIG": file})
	if err != nil || c.DataDir != "from-file" {
		t.Errorf("SNAPNODE_CONFIG: %v %q", err, c.DataDir)
	}
}

// A command may define flags of its own beside the settings.
func TestOtherFlagsPassThrough(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := config.Default()
	config.Flags(fs, &c)
	prof := fs.String("cpuprofile", "", "")
	if err := fs.Parse([]string{"--cpuprofile", "x.prof", "--workers", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := config.Load(&c, fs, func(string) string { return "" }); err != nil || *prof != "x.prof" || c.Workers != 2 {
		t.Errorf("Load: %v, cpuprofile %q, workers %d", err, *prof, c.Workers)
	}
}

func TestRejectsBadSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(file, []byte("data_dirr = \"typo\"\n"), 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown file key", []string{"--config", file}, nil, "unknown setting"},
		{"no relay at all", []string{"--relay-listen", ""}, nil, "no relay"},
		{"relay scheme", []string{"--relay", "http://x"}, nil, "not a ws://"},
		{"log level", nil, map[string]string{"SNAPNODE_LOG_LEVEL": "loud"}, "log_level"},
		{"bad env number", nil, map[string]string{"SNAPNODE_WORKERS": "many"}, "SNAPNODE_WORKERS"},
		{"missing file", []string{"--config", "/nonexistent.toml"}, nil, "nonexistent"},
		{"http address", []string{"--http-listen", "7448"}, nil, "http_listen"},
		{"http body too small", []string{"--http-max-body", "10"}, nil, "http_max_body"},
		{"http body over a message", nil, map[string]string{"SNAPNODE_HTTP_MAX_BODY": "20000000"}, "http_max_body"},
		{"negative rate", []string{"--http-rate", "-1"}, nil, "http_rate"},
		{"bad rate", nil, map[string]string{"SNAPNODE_HTTP_RATE": "fast"}, "SNAPNODE_HTTP_RATE"},
		{"no burst", []string{"--http-burst", "0"}, nil, "http_burst"},
		{"negative identity rate", []string{"--identity-rate", "-2"}, nil, "identity_rate"},
		{"infinite identity rate", nil, map[string]string{"SNAPNODE_IDENTITY_RATE": "+Inf"}, "identity_rate"},
		{"no identity burst", []string{"--identity-burst", "0"}, nil, "identity_burst"},
		{"NaN key rate", nil, map[string]string{"SNAPNODE_NOSTR_KEY_RATE": "NaN"}, "nostr_key_rate"},
		{"no key burst", []string{"--nostr-key-burst", "-1"}, nil, "nostr_key_burst"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

// The HTTP settings follow the same precedence; the listener is turned off
// with an empty value (flag or file) or "off" (any source, the only way
// through the environment, where empty means unset).
func TestHTTPSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte("http_listen = \"127.0.0.1:9001\"\nhttp_rate = 5.5\nhttp_burst = 7\nhttp_max_body = 4096\n"), 0o600)
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		listen string
		rate   float64
		burst  int
		body   int64
	}{
		{"defaults", nil, nil, "127.0.0.1:7448", 50, 100, 256 << 10},
		{"file", []string{"--config", file}, nil, "127.0.0.1:9001", 5.5, 7, 4096},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_HTTP_LISTEN": "127.0.0.1:0", "SNAPNODE_HTTP_RATE": "0"}, "127.0.0.1:0", 0, 7, 4096},
		{"flag over env", []string{"--http-listen", "[::1]:8000", "--http-burst", "3"}, map[string]string{"SNAPNODE_HTTP_LISTEN": "127.0.0.1:0"}, "[::1]:8000", 50, 3, 256 << 10},
		{"off by flag", []string{"--http-listen", ""}, nil, "", 50, 100, 256 << 10},
		{"off by env", nil, map[string]string{"SNAPNODE_HTTP_LISTEN": "off"}, "", 50, 100, 256 << 10},
		{"off by flag word", []string{"--http-listen", "off"}, nil, "", 50, 100, 256 << 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.HTTPListen != tc.listen || c.HTTPRate != tc.rate || c.HTTPBurst != tc.burst || c.HTTPMaxBody != tc.body {
				t.Errorf("listen %q rate %v burst %d body %d; want %q %v %d %d",
					c.HTTPListen, c.HTTPRate, c.HTTPBurst, c.HTTPMaxBody, tc.listen, tc.rate, tc.burst, tc.body)
			}
		})
	}
	// "off" in the file is off too.
	off := filepath.Join(t.TempDir(), "off.toml")
	os.WriteFile(off, []byte("http_listen = \"off\"\n"), 0o600)
	if c, err := load(t, []string{"--config", off}, nil); err != nil || c.HTTPListen != "" {
		t.Errorf("off in the file: %q %v", c.HTTPListen, err)
	}
}

// The per-identity and per-Nostr-key limits: defaults, then file,
// environment and flags in order of precedence; 0 turns a limit off.
func TestRequestLimitSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte("identity_rate = 2.5\nidentity_burst = 9\nnostr_key_rate = 4\nnostr_key_burst = 11\n"), 0o600)
	type limits struct {
		idRate  float64
		idBurst int
		kRate   float64
		kBurst  int
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want limits
	}{
		{"defaults", nil, nil, limits{20, 100, 20, 100}},
		{"file", []string{"--config", file}, nil, limits{2.5, 9, 4, 11}},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_IDENTITY_RATE": "0", "SNAPNODE_NOSTR_KEY_BURST": "3"}, limits{0, 9, 4, 3}},
		{"flag over env", []string{"--identity-burst", "5", "--nostr-key-rate", "0"}, map[string]string{"SNAPNODE_IDENTITY_BURST": "50", "SNAPNODE_NOSTR_KEY_RATE": "7"}, limits{20, 5, 0, 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := (limits{c.IdentityRate, c.IdentityBurst, c.NostrKeyRate, c.NostrKeyBurst}); got != tc.want {
				t.Errorf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Identity lists (operators, service callers) are repeatable flags or
// comma-separated variables, with the usual precedence, and every entry
// must be a P2TR address: a typo is caught at start, naming the list.
func TestIdentityLists(t *testing.T) {
	const (
		a = "bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"
		b = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	)
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte("service_callers = [\""+a+"\"]\noperators = [\""+b+"\"]\n"), 0o600)
	cases := []struct {
		name      string
		args      []string
		env       map[string]string
		callers   string
		operators string
	}{
		{"none by default", nil, nil, "", ""},
		{"file", []string{"--config", file}, nil, a, b},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_SERVICE_CALLERS": b + " , " + a}, b + "," + a, b},
		{"flags over env", []string{"--service-caller", b, "--operator", a, "--service-caller", a}, map[string]string{"SNAPNODE_SERVICE_CALLERS": a}, b + "," + a, a},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(c.ServiceCallers, ","); got != tc.callers {
				t.Errorf("service callers %q, want %q", got, tc.callers)
			}
			if got := strings.Join(c.Operators, ","); got != tc.operators {
				t.Errorf("operators %q, want %q", got, tc.operators)
			}
		})
	}
	for _, bad := range [][]string{{"--service-caller", a + "x"}, {"--operator", "bc1qnotp2tr"}} {
		want := map[string]string{"--service-caller": "service_callers", "--operator": "operators"}[bad[0]]
		if _, err := load(t, bad, nil); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), bad[1]) {
			t.Errorf("%v: %v, want an error naming %s and the address", bad, err, want)
		}
	}
}
