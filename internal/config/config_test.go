package config_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// Sources read again give what a restart with the same command line
// would: the file as it is now, the environment, and the flags as given
// (repeatable ones included), whatever became of the settings they were
// bound to.
func TestSourcesLoadAgain(t *testing.T) {
	const (
		op1 = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
		op2 = "bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"
	)
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	write := func(content string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`policy = "first.cedar"` + "\nworkers = 3\noperators = [\"" + op2 + "\"]\n")
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	bound := config.Default()
	config.Flags(fs, &bound)
	if err := fs.Parse([]string{"--config", file, "--service-caller", op1, "--max-drift", "90s"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SNAPNODE_LOG_LEVEL": "warn"}
	src := config.NewSources(&bound, fs, func(k string) string { return env[k] })
	first, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if first.Policy != "first.cedar" || first.Workers != 3 || !slices.Equal(first.Operators, []string{op2}) ||
		!slices.Equal(first.ServiceCallers, []string{op1}) || first.MaxDrift.Duration != 90*time.Second || first.LogLevel != "warn" || first.ConfigFile != file {
		t.Fatalf("first load: %+v", first)
	}
	// The file changes; the settings bound to the flags are overwritten.
	write(`policy = "second.cedar"` + "\nworkers = 3\n")
	bound = config.Default()
	again, err := src.Load()
	if err != nil {
		t.Fatal(err)
	}
	if again.Policy != "second.cedar" || len(again.Operators) != 0 || !slices.Equal(again.ServiceCallers, []string{op1}) ||
		again.MaxDrift.Duration != 90*time.Second || again.LogLevel != "warn" || again.ConfigFile != file {
		t.Fatalf("second load: %+v", again)
	}
	if got := config.Changed(first, again); !slices.Equal(got, []string{"policy", "operators"}) {
		t.Errorf("Changed: %q, want policy and operators", got)
	}
	// A bad file is an error naming it; a setting that does not validate
	// is one too.
	write("workers = [")
	if _, err := src.Load(); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("bad TOML: %v", err)
	}
	write("workers = 0")
	if _, err := src.Load(); err == nil || !strings.Contains(err.Error(), "workers") {
		t.Errorf("workers = 0: %v", err)
	}
}

// Changed names each differing setting by its TOML name, the [agent],
// [executor] and [audit] tables' as TABLE.KEY, the [card] table as a
// whole; a nil and an empty list are the same.
func TestChanged(t *testing.T) {
	a, b := config.Default(), config.Default()
	b.Operators = []string{}
	if got := config.Changed(a, b); len(got) != 0 {
		t.Errorf("equal settings: %q", got)
	}
	b.HTTPRate, b.Agent.MaxSteps, b.Card.Name, b.ConfigFile = 1, 2, "x", "other.toml"
	b.Executor.QuotaBytes, b.Audit.LevelHigh = 7, "x"
	if got := config.Changed(a, b); !slices.Equal(got, []string{"http_rate", "card", "agent.max_steps", "executor.quota_bytes", "audit.level_high"}) {
		t.Errorf("Changed: %q", got)
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
		{"relay scheme", []string{"--relay", "http://x"}, nil, "want a ws:// or wss:// URL"},
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
		{"negative monitor rate", []string{"--monitor-rate", "-1"}, nil, "monitor_rate"},
		{"no monitor burst", nil, map[string]string{"SNAPNODE_MONITOR_BURST": "0"}, "monitor_burst"},
		{"metrics address", []string{"--metrics-listen", "9100"}, nil, "metrics_listen"},
		{"metrics on the HTTP address", []string{"--metrics-listen", "127.0.0.1:7448"}, nil, "other than http_listen"},
		{"negative connections", []string{"--http-max-conns", "-1"}, nil, "http_max_conns"},
		{"per peer over all", []string{"--http-max-conns", "10", "--http-max-conns-per-peer", "11"}, nil, "http_max_conns_per_peer"},
		{"negative relay connections", nil, map[string]string{"SNAPNODE_RELAY_MAX_CONNS_PER_PEER": "-1"}, "relay_max_conns_per_peer"},
		{"negative relay event rate", []string{"--relay-event-rate", "-1"}, nil, "relay_event_rate"},
		{"no relay event burst", nil, map[string]string{"SNAPNODE_RELAY_EVENT_BURST": "0"}, "relay_event_burst"},
		{"negative relay store bound", []string{"--relay-store-max-bytes", "-1"}, nil, "relay_store_max_bytes -1"},
		{"relay store share over the whole", []string{"--relay-store-peer-share", "1.5"}, nil, "relay_store_peer_share 1.5"},
		{"negative relay store share", nil, map[string]string{"SNAPNODE_RELAY_STORE_PEER_SHARE": "-0.1"}, "relay_store_peer_share"},
		{"relay per peer over all", []string{"--relay-max-conns", "10", "--relay-max-conns-per-peer", "11"}, nil, "relay_max_conns_per_peer 11: want 0 (the relay's default) or more, at most relay_max_conns (10)"},
		{"body memory under a body", nil, map[string]string{"SNAPNODE_HTTP_MAX_BODY": "1048576", "SNAPNODE_HTTP_BODY_MEMORY": "65536"}, "http_body_memory"},
		{"answer memory under a response", []string{"--http-max-response", "8388608", "--http-answer-memory", "4194304"}, nil, "http_answer_memory 4194304: want at least http_max_response (8388608)"},
		{"origin without scheme", []string{"--http-allowed-origin", "app.example"}, nil, "http_allowed_origins: origin \"app.example\""},
		{"origin with a path", nil, map[string]string{"SNAPNODE_RELAY_ALLOWED_ORIGINS": "https://client.example/app"}, "relay_allowed_origins"},
		{"host with a port", []string{"--http-allowed-host", "node.example.com:443"}, nil, "http_allowed_hosts"},
		{"negative reply ttl", []string{"--reply-ttl", "-1h"}, nil, "reply_ttl -1h0m0s: want at least 1s"},
		{"zero reply ttl", nil, map[string]string{"SNAPNODE_REPLY_TTL": "0s"}, "reply_ttl 0s: want at least 1s"},
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

// The monitoring settings: defaults, then file, environment and flags in
// order of precedence.
func TestMonitorSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte("monitor_rate = 2.5\nmonitor_burst = 4\nmetrics_listen = \"127.0.0.1:9100\"\n"), 0o600)
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		rate    float64
		burst   int
		metrics string
	}{
		{"defaults", nil, nil, 5, 20, ""},
		{"file", []string{"--config", file}, nil, 2.5, 4, "127.0.0.1:9100"},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_MONITOR_RATE": "0", "SNAPNODE_METRICS_LISTEN": "[::1]:9101"}, 0, 4, "[::1]:9101"},
		{"flag over env", []string{"--monitor-burst", "9", "--metrics-listen", "127.0.0.1:0"}, map[string]string{"SNAPNODE_MONITOR_BURST": "3"}, 5, 9, "127.0.0.1:0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.MonitorRate != tc.rate || c.MonitorBurst != tc.burst || c.MetricsListen != tc.metrics {
				t.Errorf("rate %v burst %d metrics %q; want %v %d %q", c.MonitorRate, c.MonitorBurst, c.MetricsListen, tc.rate, tc.burst, tc.metrics)
			}
		})
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

// metrics_public is off by default (/metrics on http_listen serves
// loopback only) and follows the one precedence: flag, variable, file.
func TestMetricsPublic(t *testing.T) {
	testSwitch(t, "metrics_public", func(c config.Config) bool { return c.MetricsPublic })
}

// console_remote is off by default (the console serves loopback only) and
// follows the one precedence: flag, variable, file.
func TestConsoleRemote(t *testing.T) {
	testSwitch(t, "console_remote", func(c config.Config) bool { return c.ConsoleRemote })
}

// testSwitch checks a boolean setting that is off by default, named key in
// the file, --KEY (dashes for underscores) as a flag and SNAPNODE_KEY in the
// environment, read back from a loaded Config by get: it follows the one
// precedence (flag, variable, file), and a value that is not a boolean is
// an error naming the variable.
func testSwitch(t *testing.T, key string, get func(config.Config) bool) {
	t.Helper()
	flagName := "--" + strings.ReplaceAll(key, "_", "-")
	envName := "SNAPNODE_" + strings.ToUpper(key)
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte(key+" = true\n"), 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want bool
	}{
		{"default", nil, nil, false},
		{"file", []string{"--config", file}, nil, true},
		{"env over file", []string{"--config", file}, map[string]string{envName: "false"}, false},
		{"flag over env", []string{flagName}, map[string]string{envName: "false"}, true},
		{"flag false over file", []string{"--config", file, flagName + "=false"}, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := get(c); got != tc.want {
				t.Errorf("%s %v, want %v", key, got, tc.want)
			}
		})
	}
	if _, err := load(t, nil, map[string]string{envName: "maybe"}); err == nil || !strings.Contains(err.Error(), envName) {
		t.Errorf("a bad boolean: %v", err)
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

// writeFile writes content to name in a new temporary folder with the
// permissions perm, whatever the umask.
func writeFile(t *testing.T, name, content string, perm os.FileMode) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(file, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, perm); err != nil {
		t.Fatal(err)
	}
	return file
}

// With nothing configured the agent runtime is off and its limits are the
// documented defaults.
func TestAgentDefaults(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Agent{
		ResponseFormat:       "auto",
		MaxSteps:             30,
		MaxCostCents:         100,
		MaxTimeMinutes:       60,
		Temperature:          0.2,
		MaxTokens:            2048,
		RequestTimeout:       config.Duration{Duration: 120 * time.Second},
		MaxJobs:              4,
		MaxQueuedJobs:        1024,
		Lease:                config.Duration{Duration: 30 * time.Second},
		RetryBackoff:         config.Duration{Duration: 10 * time.Second},
		MaxObservationBytes:  16384,
		MaxAnswerBytes:       65536,
		MaxPendingInputBytes: 1048576,
		MaxHistoryBytes:      104857600,
		MaxRetries:           3,
	}
	if !reflect.DeepEqual(c.Agent, want) {
		t.Errorf("agent defaults:\n%+v\nwant\n%+v", c.Agent, want)
	}
	if c.AgentEnabled() {
		t.Error("the agent runs with no model server configured")
	}
}

// Precedence of the agent settings: flag, then environment, then file,
// then default.
func TestAgentPrecedence(t *testing.T) {
	file := writeFile(t, "snapnode.toml", `
[agent]
llm_url = "http://file.example/v1"
llm_model = "file-model"
max_steps = 12
temperature = 0.7
`, 0o600)
	type agent struct {
		url   string
		steps int
		temp  float64
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want agent
	}{
		{"default", nil, nil, agent{"", 30, 0.2}},
		{"file over default", []string{"--config", file}, nil, agent{"http://file.example/v1", 12, 0.7}},
		{"env over file", []string{"--config", file},
			map[string]string{"SNAPNODE_LLM_URL": "https://env.example/api/v1", "SNAPNODE_AGENT_MAX_STEPS": "40", "SNAPNODE_AGENT_TEMPERATURE": "1.5"},
			agent{"https://env.example/api/v1", 40, 1.5}},
		{"env over default", nil,
			map[string]string{"SNAPNODE_LLM_URL": "http://127.0.0.1:11434/v1", "SNAPNODE_LLM_MODEL": "m", "SNAPNODE_AGENT_MAX_STEPS": "5"},
			agent{"http://127.0.0.1:11434/v1", 5, 0.2}},
		{"flag over env", []string{"--config", file, "--llm-url", "http://flag.example:8080/v1", "--agent-max-steps", "10000", "--agent-temperature", "0"},
			map[string]string{"SNAPNODE_LLM_URL": "https://env.example/v1", "SNAPNODE_AGENT_MAX_STEPS": "40", "SNAPNODE_AGENT_TEMPERATURE": "1.5"},
			agent{"http://flag.example:8080/v1", 10000, 0}},
		{"trailing slash dropped", []string{"--llm-url", "http://127.0.0.1:11434/v1/", "--llm-model", "m"}, nil,
			agent{"http://127.0.0.1:11434/v1", 30, 0.2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := (agent{c.Agent.LLMURL, c.Agent.MaxSteps, c.Agent.Temperature}); got != tc.want {
				t.Errorf("agent %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Every [agent] key decodes from the file, and every SNAPNODE_* variable
// of the agent sets its field; keys the table does not have are refused.
func TestAgentTable(t *testing.T) {
	want := config.Agent{
		LLMURL:                    "http://127.0.0.1:11434/v1",
		LLMModel:                  "qwen2.5-coder:7b",
		LLMAPIKeyFile:             "/run/secrets/llm",
		ResponseFormat:            "json_object",
		ReasoningEffort:           "low",
		MaxSteps:                  50,
		MaxCostCents:              250.5,
		MaxTimeMinutes:            12.5,
		PricePerMTokPrompt:        0.15,
		PricePerMTokCompletion:    0.6,
		Temperature:               0.9,
		MaxTokens:                 4096,
		RequestTimeout:            config.Duration{Duration: 90 * time.Second},
		ContextTokens:             32768,
		MaxJobs:                   2,
		MaxJobsPerRequester:       1,
		MaxQueuedJobs:             100,
		MaxQueuedJobsPerRequester: 10,
		MaxNewcomerQueuedJobs:     60,
		Lease:                     config.Duration{Duration: time.Minute},
		RetryBackoff:              config.Duration{Duration: 250 * time.Millisecond},
		MaxObservationBytes:       8192,
		MaxAnswerBytes:            32768,
		MaxPendingInputBytes:      65536,
		MaxHistoryBytes:           1 << 30,
		MaxRetries:                0,
		Redact:                    []string{`sk-[A-Za-z0-9]{20,}`, `ghp_\w+`},
		SystemPrompt:              "Answer in English.",
	}
	file := writeFile(t, "snapnode.toml", `
[agent]
llm_url = "http://127.0.0.1:11434/v1"
llm_model = "qwen2.5-coder:7b"
llm_api_key_file = "/run/secrets/llm"
response_format = "json_object"
reasoning_effort = "low"
max_steps = 50
max_cost_cents = 250.5
max_time_minutes = 12.5
price_per_mtok_prompt = 0.15
price_per_mtok_completion = 0.6
temperature = 0.9
max_tokens = 4096
request_timeout = "90s"
context_tokens = 32768
max_jobs = 2
max_jobs_per_requester = 1
max_queued_jobs = 100
max_queued_jobs_per_requester = 10
max_newcomer_queued_jobs = 60
lease = "1m"
retry_backoff = "250ms"
max_observation_bytes = 8192
max_answer_bytes = 32768
max_pending_input_bytes = 65536
max_history_bytes = 1073741824
max_retries = 0
redact = ['sk-[A-Za-z0-9]{20,}', 'ghp_\w+']
system_prompt = "Answer in English."
`, 0o600)
	env := map[string]string{
		"SNAPNODE_LLM_URL":                             "http://127.0.0.1:11434/v1",
		"SNAPNODE_LLM_MODEL":                           "qwen2.5-coder:7b",
		"SNAPNODE_LLM_API_KEY_FILE":                    "/run/secrets/llm",
		"SNAPNODE_LLM_RESPONSE_FORMAT":                 "json_object",
		"SNAPNODE_AGENT_REASONING_EFFORT":              "low",
		"SNAPNODE_AGENT_MAX_STEPS":                     "50",
		"SNAPNODE_AGENT_MAX_COST_CENTS":                "250.5",
		"SNAPNODE_AGENT_MAX_TIME_MINUTES":              "12.5",
		"SNAPNODE_AGENT_PRICE_PER_MTOK_PROMPT":         "0.15",
		"SNAPNODE_AGENT_PRICE_PER_MTOK_COMPLETION":     "0.6",
		"SNAPNODE_AGENT_TEMPERATURE":                   "0.9",
		"SNAPNODE_AGENT_MAX_TOKENS":                    "4096",
		"SNAPNODE_AGENT_REQUEST_TIMEOUT":               "90s",
		"SNAPNODE_AGENT_CONTEXT_TOKENS":                "32768",
		"SNAPNODE_AGENT_MAX_JOBS":                      "2",
		"SNAPNODE_AGENT_MAX_JOBS_PER_REQUESTER":        "1",
		"SNAPNODE_AGENT_MAX_QUEUED_JOBS":               "100",
		"SNAPNODE_AGENT_MAX_QUEUED_JOBS_PER_REQUESTER": "10",
		"SNAPNODE_AGENT_MAX_NEWCOMER_QUEUED_JOBS":      "60",
		"SNAPNODE_AGENT_LEASE":                         "1m",
		"SNAPNODE_AGENT_RETRY_BACKOFF":                 "250ms",
		"SNAPNODE_AGENT_MAX_OBSERVATION_BYTES":         "8192",
		"SNAPNODE_AGENT_MAX_ANSWER_BYTES":              "32768",
		"SNAPNODE_AGENT_MAX_PENDING_INPUT_BYTES":       "65536",
		"SNAPNODE_AGENT_MAX_HISTORY_BYTES":             "1073741824",
		"SNAPNODE_AGENT_MAX_RETRIES":                   "0",
		// One regular expression a line: they may hold commas.
		"SNAPNODE_AGENT_REDACT":        "sk-[A-Za-z0-9]{20,}\n\n  ghp_\\w+  \n",
		"SNAPNODE_AGENT_SYSTEM_PROMPT": "Answer in English.",
	}
	cases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"file", []string{"--config", file}, nil},
		{"environment", nil, env},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Agent, want) {
				t.Errorf("agent\n%+v\nwant\n%+v", c.Agent, want)
			}
			if !c.AgentEnabled() {
				t.Error("agent not enabled")
			}
		})
	}
	// A partial table keeps the other defaults.
	partial := writeFile(t, "partial.toml", "[agent]\nmax_jobs = 9\n", 0o600)
	if c, err := load(t, []string{"--config", partial}, nil); err != nil || c.Agent.MaxJobs != 9 || c.Agent.MaxSteps != 30 || c.Agent.ResponseFormat != "auto" {
		t.Errorf("partial [agent]: %v %+v", err, c.Agent)
	}
	// A misspelt key is refused, naming it.
	typo := writeFile(t, "typo.toml", "[agent]\nmax_stepz = 5\n", 0o600)
	if _, err := load(t, []string{"--config", typo}, nil); err == nil || !strings.Contains(err.Error(), `unknown setting "agent.max_stepz" (did you mean agent.max_steps?)`) {
		t.Errorf("unknown [agent] key: %v", err)
	}
}

// --llm-url, --llm-model, --agent-max-steps, --agent-temperature,
// --agent-max-jobs and --agent-reasoning-effort are flags; no flag
// carries the API key or its file.
func TestAgentFlags(t *testing.T) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c := config.Default()
	config.Flags(fs, &c)
	for _, name := range []string{"llm-url", "llm-model", "agent-max-steps", "agent-temperature", "agent-max-jobs", "agent-reasoning-effort"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag --%s", name)
		}
	}
	for _, name := range []string{"llm-api-key", "llm-api-key-file", "agent-llm-api-key", "api-key", ""} {
		if fs.Lookup(name) != nil {
			t.Errorf("flag --%s exists", name)
		}
	}
}

// Each rule of the [agent] table, with its message: the TOML key, the
// flag (or the variable when there is no flag), the rule, what was given.
func TestAgentRejectsBadSettings(t *testing.T) {
	model := []string{"--llm-model", "m"}
	redact := writeFile(t, "redact.toml", "[agent]\nredact = ['ok', '(']\n", 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"url without /v1", append([]string{"--llm-url", "http://127.0.0.1:11434"}, model...), nil,
			`config: agent.llm_url (--llm-url): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got "http://127.0.0.1:11434"`},
		{"url scheme", append([]string{"--llm-url", "ftp://h/v1"}, model...), nil,
			`config: agent.llm_url (--llm-url): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got "ftp://h/v1"`},
		{"url without host", append([]string{"--llm-url", "http:///v1"}, model...), nil,
			`config: agent.llm_url (--llm-url): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got "http:///v1"`},
		{"url relative", nil, map[string]string{"SNAPNODE_LLM_URL": "localhost/v1", "SNAPNODE_LLM_MODEL": "m"},
			`config: agent.llm_url (SNAPNODE_LLM_URL): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got "localhost/v1"`},
		{"url unparsable", append([]string{"--llm-url", "http://[::1/v1"}, model...), nil,
			`config: agent.llm_url (--llm-url): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got a URL that does not parse (missing ']' in host)`},
		{"url with query", append([]string{"--llm-url", "http://h/v1?k=1"}, model...), nil,
			`config: agent.llm_url (--llm-url): want a base URL ending in /v1, such as http://127.0.0.1:11434/v1; got "http://h/v1?xxxxx"`},
		{"url without model", []string{"--llm-url", "http://h/v1"}, nil,
			`config: agent.llm_url (--llm-url) and agent.llm_model (--llm-model): want both set (the agent runs) or neither (it does not); got llm_url "http://h/v1" and llm_model ""`},
		{"model without url", model, nil,
			`config: agent.llm_url (--llm-url) and agent.llm_model (--llm-model): want both set (the agent runs) or neither (it does not); got llm_url "" and llm_model "m"`},
		{"response format", nil, map[string]string{"SNAPNODE_LLM_RESPONSE_FORMAT": "xml"},
			`config: agent.response_format (SNAPNODE_LLM_RESPONSE_FORMAT): want auto, json_schema, json_object or none; got "xml"`},
		{"reasoning effort", []string{"--agent-reasoning-effort", "off"}, nil,
			`config: agent.reasoning_effort (--agent-reasoning-effort): want none, minimal, low, medium, high or xhigh (empty: none sent); got "off"`},
		{"review reasoning effort", nil, map[string]string{"SNAPNODE_AGENT_REVIEW_REASONING_EFFORT": "off"},
			`config: agent.review_reasoning_effort (SNAPNODE_AGENT_REVIEW_REASONING_EFFORT): want default (none sent), none, minimal, low, medium, high or xhigh (empty: agent.reasoning_effort's); got "off"`},
		{"reasoning effort's case", nil, map[string]string{"SNAPNODE_AGENT_REASONING_EFFORT": "High"},
			`config: agent.reasoning_effort (SNAPNODE_AGENT_REASONING_EFFORT): want none, minimal, low, medium, high or xhigh (empty: none sent); got "High"`},
		{"no steps", []string{"--agent-max-steps", "0"}, nil,
			`config: agent.max_steps (--agent-max-steps): want 1…10000 model calls; got 0`},
		{"too many steps", nil, map[string]string{"SNAPNODE_AGENT_MAX_STEPS": "10001"},
			`config: agent.max_steps (SNAPNODE_AGENT_MAX_STEPS): want 1…10000 model calls; got 10001`},
		{"steps not a number", nil, map[string]string{"SNAPNODE_AGENT_MAX_STEPS": "many"},
			`config: SNAPNODE_AGENT_MAX_STEPS="many"`},
		{"negative cost", nil, map[string]string{"SNAPNODE_AGENT_MAX_COST_CENTS": "-1"},
			`config: agent.max_cost_cents (SNAPNODE_AGENT_MAX_COST_CENTS): want 0 (no limit) or more US cents; got -1`},
		{"NaN cost", nil, map[string]string{"SNAPNODE_AGENT_MAX_COST_CENTS": "NaN"},
			`config: agent.max_cost_cents (SNAPNODE_AGENT_MAX_COST_CENTS): want 0 (no limit) or more US cents; got NaN`},
		{"no time", nil, map[string]string{"SNAPNODE_AGENT_MAX_TIME_MINUTES": "0"},
			`config: agent.max_time_minutes (SNAPNODE_AGENT_MAX_TIME_MINUTES): want more than 0, at most 153722867 minutes; got 0`},
		{"time over a Duration", nil, map[string]string{"SNAPNODE_AGENT_MAX_TIME_MINUTES": "1e300"},
			`config: agent.max_time_minutes (SNAPNODE_AGENT_MAX_TIME_MINUTES): want more than 0, at most 153722867 minutes; got 1e+300`},
		{"negative prompt price", nil, map[string]string{"SNAPNODE_AGENT_PRICE_PER_MTOK_PROMPT": "-0.5"},
			`config: agent.price_per_mtok_prompt (SNAPNODE_AGENT_PRICE_PER_MTOK_PROMPT): want 0 or more US dollars a million tokens; got -0.5`},
		{"infinite completion price", nil, map[string]string{"SNAPNODE_AGENT_PRICE_PER_MTOK_COMPLETION": "+Inf"},
			`config: agent.price_per_mtok_completion (SNAPNODE_AGENT_PRICE_PER_MTOK_COMPLETION): want 0 or more US dollars a million tokens; got +Inf`},
		{"temperature high", []string{"--agent-temperature", "2.5"}, nil,
			`config: agent.temperature (--agent-temperature): want 0…2; got 2.5`},
		{"temperature negative", nil, map[string]string{"SNAPNODE_AGENT_TEMPERATURE": "-0.1"},
			`config: agent.temperature (SNAPNODE_AGENT_TEMPERATURE): want 0…2; got -0.1`},
		{"no tokens", nil, map[string]string{"SNAPNODE_AGENT_MAX_TOKENS": "0"},
			`config: agent.max_tokens (SNAPNODE_AGENT_MAX_TOKENS): want at least 1 token; got 0`},
		{"no request timeout", nil, map[string]string{"SNAPNODE_AGENT_REQUEST_TIMEOUT": "0s"},
			`config: agent.request_timeout (SNAPNODE_AGENT_REQUEST_TIMEOUT): want more than 0; got 0s`},
		{"negative context", nil, map[string]string{"SNAPNODE_AGENT_CONTEXT_TOKENS": "-1"},
			`config: agent.context_tokens (SNAPNODE_AGENT_CONTEXT_TOKENS): want 0 (ask the model server) or more than agent.max_tokens (2048); got -1`},
		{"context under an answer", nil, map[string]string{"SNAPNODE_AGENT_CONTEXT_TOKENS": "2048"},
			`config: agent.context_tokens (SNAPNODE_AGENT_CONTEXT_TOKENS): want 0 (ask the model server) or more than agent.max_tokens (2048); got 2048`},
		{"no jobs", []string{"--agent-max-jobs", "0"}, nil,
			`config: agent.max_jobs (--agent-max-jobs): want at least 1 job; got 0`},
		{"share over the slots", []string{"--agent-max-jobs", "3"}, map[string]string{"SNAPNODE_AGENT_MAX_JOBS_PER_REQUESTER": "4"},
			`config: agent.max_jobs_per_requester (SNAPNODE_AGENT_MAX_JOBS_PER_REQUESTER): want 0 (half of agent.max_jobs) to agent.max_jobs (3); got 4`},
		{"no queue", nil, map[string]string{"SNAPNODE_AGENT_MAX_QUEUED_JOBS": "0"},
			`config: agent.max_queued_jobs (SNAPNODE_AGENT_MAX_QUEUED_JOBS): want at least 1 job; got 0`},
		{"queue share over the queue", nil, map[string]string{"SNAPNODE_AGENT_MAX_QUEUED_JOBS": "8", "SNAPNODE_AGENT_MAX_QUEUED_JOBS_PER_REQUESTER": "9"},
			`config: agent.max_queued_jobs_per_requester (SNAPNODE_AGENT_MAX_QUEUED_JOBS_PER_REQUESTER): want 0 (a sixteenth of agent.max_queued_jobs) to agent.max_queued_jobs (8); got 9`},
		{"newcomers' share over the queue", nil, map[string]string{"SNAPNODE_AGENT_MAX_QUEUED_JOBS": "8", "SNAPNODE_AGENT_MAX_NEWCOMER_QUEUED_JOBS": "9"},
			`config: agent.max_newcomer_queued_jobs (SNAPNODE_AGENT_MAX_NEWCOMER_QUEUED_JOBS): want 0 (half of agent.max_queued_jobs) to agent.max_queued_jobs (8); got 9`},
		{"short lease", nil, map[string]string{"SNAPNODE_AGENT_LEASE": "500ms"},
			`config: agent.lease (SNAPNODE_AGENT_LEASE): want at least 1s; got 500ms`},
		{"no observation", nil, map[string]string{"SNAPNODE_AGENT_MAX_OBSERVATION_BYTES": "0"},
			`config: agent.max_observation_bytes (SNAPNODE_AGENT_MAX_OBSERVATION_BYTES): want at least 1 byte; got 0`},
		{"no answer", nil, map[string]string{"SNAPNODE_AGENT_MAX_ANSWER_BYTES": "0"},
			`config: agent.max_answer_bytes (SNAPNODE_AGENT_MAX_ANSWER_BYTES): want at least 1 byte; got 0`},
		{"tiny pending input", nil, map[string]string{"SNAPNODE_AGENT_MAX_PENDING_INPUT_BYTES": "100"},
			`config: agent.max_pending_input_bytes (SNAPNODE_AGENT_MAX_PENDING_INPUT_BYTES): want at least 4096 bytes; got 100`},
		{"no history", nil, map[string]string{"SNAPNODE_AGENT_MAX_HISTORY_BYTES": "-5"},
			`config: agent.max_history_bytes (SNAPNODE_AGENT_MAX_HISTORY_BYTES): want at least 1 byte; got -5`},
		{"negative retries", nil, map[string]string{"SNAPNODE_AGENT_MAX_RETRIES": "-1"},
			`config: agent.max_retries (SNAPNODE_AGENT_MAX_RETRIES): want 0 or more; got -1`},
		{"redact in the file", []string{"--config", redact}, nil,
			`redact.toml:2:1: agent.redact[1]: want a regular expression (RE2 syntax); got "(": error parsing regexp: missing closing ): ` + "`(`"},
		{"redact in the environment", nil, map[string]string{"SNAPNODE_AGENT_REDACT": "a\n[z-a]"},
			`config: agent.redact[1] (SNAPNODE_AGENT_REDACT): want a regular expression (RE2 syntax); got "[z-a]": error parsing regexp: invalid character class range: ` + "`z-a`"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}

// The limits' edges are accepted.
func TestAgentAcceptsEdges(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"https with a path", []string{"--llm-url", "https://api.example.com/openai/v1", "--llm-model", "m"}, nil},
		{"one step", []string{"--agent-max-steps", "1"}, nil},
		{"no cost limit", nil, map[string]string{"SNAPNODE_AGENT_MAX_COST_CENTS": "0"}},
		{"temperature 2", []string{"--agent-temperature", "2"}, nil},
		{"context from the server", nil, map[string]string{"SNAPNODE_AGENT_CONTEXT_TOKENS": "0"}},
		{"lease 1s", nil, map[string]string{"SNAPNODE_AGENT_LEASE": "1s"}},
		{"no retries", nil, map[string]string{"SNAPNODE_AGENT_MAX_RETRIES": "0"}},
		{"every response format", nil, map[string]string{"SNAPNODE_LLM_RESPONSE_FORMAT": "none"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := load(t, tc.args, tc.env); err != nil {
				t.Error(err)
			}
		})
	}
	for _, f := range []string{"auto", "json_schema", "json_object", "none"} {
		if _, err := load(t, nil, map[string]string{"SNAPNODE_LLM_RESPONSE_FORMAT": f}); err != nil {
			t.Errorf("response_format %s: %v", f, err)
		}
	}
	for _, e := range []string{"", "none", "minimal", "low", "medium", "high", "xhigh"} {
		if c, err := load(t, []string{"--agent-reasoning-effort", e}, nil); err != nil || c.Agent.ReasoningEffort != e {
			t.Errorf("reasoning_effort %q: %v", e, err)
		}
	}
	for _, e := range []string{"", "default", "none", "minimal", "low", "medium", "high", "xhigh"} {
		if c, err := load(t, nil, map[string]string{"SNAPNODE_AGENT_REVIEW_REASONING_EFFORT": e}); err != nil || c.Agent.ReviewReasoningEffort != e {
			t.Errorf("review_reasoning_effort %q: %v", e, err)
		}
	}
}

// A credential in llm_url (a password, a query) is not repeated in errors.
func TestAgentURLErrorsHideCredentials(t *testing.T) {
	for _, u := range []string{"http://user:hunter2@h/v2", "http://h/v1?api_key=hunter2", "http://user:hunter2@h/v1"} {
		_, err := load(t, []string{"--llm-url", u}, nil) // no model: always an error
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestLLMAPIKey(t *testing.T) {
	const secret = "sk-test-5ecret-do-not-print"
	dir := t.TempDir()
	private := writeFile(t, "private.key", "\n  "+secret+"\n", 0o600)
	open := writeFile(t, "open.key", secret+"\n", 0o644)
	group := writeFile(t, "group.key", secret, 0o640)
	empty := writeFile(t, "empty.key", " \n", 0o600)
	large := writeFile(t, "large.key", strings.Repeat(secret, 10000), 0o600)
	missing := filepath.Join(dir, "missing.key")
	cases := []struct {
		name string
		file string
		env  map[string]string
		want string
		err  string // in the error; "" for none
	}{
		{"nothing: no key", "", nil, "", ""},
		{"from the environment", "", map[string]string{"SNAPNODE_LLM_API_KEY": secret}, secret, ""},
		{"environment over file", open, map[string]string{"SNAPNODE_LLM_API_KEY": "sk-env"}, "sk-env", ""},
		{"from a 0600 file, trimmed", private, nil, secret, ""},
		{"0644 file refused", open, nil, "", open + ": permissions 0644 are too open: want a file only its owner may read (chmod 600 " + open + ")"},
		{"0640 file refused", group, nil, "", "permissions 0640 are too open"},
		{"missing file", missing, nil, "", "config: agent.llm_api_key_file (SNAPNODE_LLM_API_KEY_FILE): open " + missing + ":"},
		{"a folder", dir, nil, "", dir + ": want a regular file"},
		{"empty file", empty, nil, "", empty + ": want an API key; got an empty file"},
		{"huge file", large, nil, "", large + ": want an API key; got a file over 65536 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Agent.LLMAPIKeyFile = tc.file
			got, err := c.LLMAPIKey(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("key %q, want %q", got, tc.want)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v\nwant one containing %s", err, tc.err)
			case err != nil && strings.Contains(err.Error(), secret):
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
}

// The key is never part of a Config, so printing one cannot show it.
func TestConfigNeverHoldsAPIKey(t *testing.T) {
	const secret = "sk-test-5ecret-do-not-print"
	file := writeFile(t, "llm.key", secret, 0o600)
	env := map[string]string{"SNAPNODE_LLM_API_KEY": secret, "SNAPNODE_LLM_API_KEY_FILE": file,
		"SNAPNODE_LLM_URL": "http://127.0.0.1:11434/v1", "SNAPNODE_LLM_MODEL": "m"}
	c, err := load(t, nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprintf("%v %+v %#v", c, c, c); strings.Contains(s, secret) {
		t.Errorf("the printed Config shows the key: %s", s)
	}
	if c.Agent.LLMAPIKeyFile != file {
		t.Errorf("key file %q, want %q", c.Agent.LLMAPIKeyFile, file)
	}
	if k, err := c.LLMAPIKey(func(k string) string { return env[k] }); err != nil || k != secret {
		t.Errorf("LLMAPIKey: %q %v", k, err)
	}
}

func TestAgentEnabled(t *testing.T) {
	cases := []struct {
		url, model string
		want       bool
	}{
		{"", "", false},
		{"http://127.0.0.1:11434/v1", "", false},
		{"", "llama3", false},
		{"http://127.0.0.1:11434/v1", "llama3", true},
	}
	for _, tc := range cases {
		c := config.Default()
		c.Agent.LLMURL, c.Agent.LLMModel = tc.url, tc.model
		if got := c.AgentEnabled(); got != tc.want {
			t.Errorf("url %q model %q: AgentEnabled %v, want %v", tc.url, tc.model, got, tc.want)
		}
	}
}

// The [executor] facts: false by default; flag over environment over file.
func TestExecutorFacts(t *testing.T) {
	file := writeFile(t, "snapnode.toml", `
[executor]
user_idle = true
network_available = true
`, 0o600)
	type facts struct{ idle, net bool }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want facts
	}{
		{"default: neither stated", nil, nil, facts{false, false}},
		{"file", []string{"--config", file}, nil, facts{true, true}},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_EXECUTOR_USER_IDLE": "false"}, facts{false, true}},
		{"env over default", nil, map[string]string{"SNAPNODE_EXECUTOR_NETWORK_AVAILABLE": "1"}, facts{false, true}},
		{"flag over env", []string{"--executor-user-idle", "--executor-network-available=false"},
			map[string]string{"SNAPNODE_EXECUTOR_NETWORK_AVAILABLE": "true"}, facts{true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := (facts{c.Executor.UserIdle, c.Executor.NetworkAvailable}); got != tc.want {
				t.Errorf("executor %+v, want %+v", got, tc.want)
			}
		})
	}
	_, err := load(t, nil, map[string]string{"SNAPNODE_EXECUTOR_USER_IDLE": "maybe"})
	if err == nil || !strings.Contains(err.Error(), "SNAPNODE_EXECUTOR_USER_IDLE") {
		t.Errorf("a value that is not a boolean: %v", err)
	}
}

// The [executor] snapshot bounds: a week and 128 MiB by default;
// environment over file; 0 is no bound; a negative value is refused
// naming the key and the variable.
func TestExecutorSnapshotBounds(t *testing.T) {
	file := writeFile(t, "snapnode.toml", `
[executor]
snapshot_max_age = "48h"
snapshot_max_bytes = 1048576
`, 0o600)
	type bounds struct {
		age   time.Duration
		bytes int64
	}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		want    bounds
		wantErr string
	}{
		{"default", nil, nil, bounds{7 * 24 * time.Hour, 128 << 20}, ""},
		{"file", []string{"--config", file}, nil, bounds{48 * time.Hour, 1 << 20}, ""},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_EXECUTOR_SNAPSHOT_MAX_AGE": "1h"}, bounds{time.Hour, 1 << 20}, ""},
		{"0: no bound", nil, map[string]string{"SNAPNODE_EXECUTOR_SNAPSHOT_MAX_AGE": "0s", "SNAPNODE_EXECUTOR_SNAPSHOT_MAX_BYTES": "0"}, bounds{0, 0}, ""},
		{"negative age", nil, map[string]string{"SNAPNODE_EXECUTOR_SNAPSHOT_MAX_AGE": "-1h"}, bounds{}, "config: executor.snapshot_max_age (SNAPNODE_EXECUTOR_SNAPSHOT_MAX_AGE): want 0 (whatever their age) or more; got -1h0m0s"},
		{"negative bytes", nil, map[string]string{"SNAPNODE_EXECUTOR_SNAPSHOT_MAX_BYTES": "-1"}, bounds{}, "config: executor.snapshot_max_bytes (SNAPNODE_EXECUTOR_SNAPSHOT_MAX_BYTES): want 0 (no bound) or more bytes; got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (bounds{c.Executor.SnapshotMaxAge.Duration, c.Executor.SnapshotMaxBytes}); got != tc.want {
				t.Errorf("bounds %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The [audit] table: the defaults (30 days, and the level of each risk),
// its precedence, and a clear error for each bad value.
func TestAuditSettings(t *testing.T) {
	c, err := load(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Audit{RetainDays: 30, LevelLow: "SUMMARY", LevelMedium: "DETAILED", LevelHigh: "FORENSIC", LevelCritical: "FORENSIC"}
	if c.Audit != want {
		t.Errorf("defaults: %+v, want %+v", c.Audit, want)
	}
	file := writeFile(t, "audit.toml", "[audit]\nretain_days = 90\nlevel_low = \"DETAILED\"\nlevel_high = \"DETAILED\"\n", 0o600)
	c, err = load(t, []string{"--config", file, "--audit-retain-days", "7"}, map[string]string{"SNAPNODE_AUDIT_LEVEL_HIGH": "FORENSIC", "SNAPNODE_AUDIT_RETAIN_DAYS": "60"})
	if err != nil {
		t.Fatal(err)
	}
	want = config.Audit{RetainDays: 7, LevelLow: "DETAILED", LevelMedium: "DETAILED", LevelHigh: "FORENSIC", LevelCritical: "FORENSIC"}
	if c.Audit != want {
		t.Errorf("flag over env over file: %+v, want %+v", c.Audit, want)
	}
	if c, err = load(t, []string{"--audit-retain-days", "0"}, nil); err != nil || c.Audit.RetainDays != 0 {
		t.Errorf("retain_days 0 (keep every entry): %v, %d", err, c.Audit.RetainDays)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"negative days", []string{"--audit-retain-days", "-1"}, nil,
			`config: audit.retain_days (--audit-retain-days): want 0 (keep every entry) to 36500 days; got -1`},
		{"too many days", nil, map[string]string{"SNAPNODE_AUDIT_RETAIN_DAYS": "36501"},
			`config: audit.retain_days (SNAPNODE_AUDIT_RETAIN_DAYS): want 0 (keep every entry) to 36500 days; got 36501`},
		{"unknown level", nil, map[string]string{"SNAPNODE_AUDIT_LEVEL_LOW": "VERBOSE"},
			`config: audit.level_low (SNAPNODE_AUDIT_LEVEL_LOW): want SUMMARY, DETAILED or FORENSIC; got "VERBOSE"`},
		{"level in lower case", []string{"--config", writeFile(t, "lower.toml", "[audit]\nlevel_critical = \"forensic\"\n", 0o600)}, nil,
			`lower.toml:2:1: audit.level_critical: want SUMMARY, DETAILED or FORENSIC; got "forensic"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}

// The connection and body-memory caps of the HTTP transport: defaults
// (0: from the open-file limit), then file, environment and flags.
func TestHTTPCapSettings(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	os.WriteFile(file, []byte("http_max_conns = 100\nhttp_max_conns_per_peer = 10\nhttp_body_memory = 1048576\n"), 0o600)
	cases := []struct {
		name           string
		args           []string
		env            map[string]string
		conns, perPeer int
		memory         int64
	}{
		{"defaults", nil, nil, 0, 0, 32 << 20},
		{"file", []string{"--config", file}, nil, 100, 10, 1 << 20},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_HTTP_MAX_CONNS": "50", "SNAPNODE_HTTP_BODY_MEMORY": "2097152"}, 50, 10, 2 << 20},
		{"flag over env", []string{"--http-max-conns-per-peer", "4"}, map[string]string{"SNAPNODE_HTTP_MAX_CONNS_PER_PEER": "8"}, 0, 4, 32 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.HTTPMaxConns != tc.conns || c.HTTPMaxConnsPerPeer != tc.perPeer || c.HTTPBodyMemory != tc.memory {
				t.Errorf("conns %d per peer %d memory %d; want %d %d %d", c.HTTPMaxConns, c.HTTPMaxConnsPerPeer, c.HTTPBodyMemory, tc.conns, tc.perPeer, tc.memory)
			}
		})
	}
}

// The requester quotas of the [executor] table: defaults, precedence
// (flag over environment over file), and a clear error for each bad value.
func TestExecutorQuotaSettings(t *testing.T) {
	file := writeFile(t, "quota.toml", "[executor]\nquota_bytes = 1000\nquota_files = 20\nquota_dirs = 5\n", 0o600)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want config.Executor // quotas only
		err  string
	}{
		{"defaults", nil, nil, config.Executor{QuotaBytes: 32 << 20, QuotaFiles: 10000, QuotaDirs: 1000}, ""},
		{"file", []string{"--config", file}, nil, config.Executor{QuotaBytes: 1000, QuotaFiles: 20, QuotaDirs: 5}, ""},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_EXECUTOR_QUOTA_FILES": "30"},
			config.Executor{QuotaBytes: 1000, QuotaFiles: 30, QuotaDirs: 5}, ""},
		{"flag over env", []string{"--config", file, "--executor-quota-dirs", "7"}, map[string]string{"SNAPNODE_EXECUTOR_QUOTA_DIRS": "6"},
			config.Executor{QuotaBytes: 1000, QuotaFiles: 20, QuotaDirs: 7}, ""},
		{"zero", []string{"--executor-quota-files", "0"}, nil, config.Executor{},
			"config: executor.quota_files (--executor-quota-files): want at least 1; got 0"},
		{"negative", nil, map[string]string{"SNAPNODE_EXECUTOR_QUOTA_BYTES": "-1"}, config.Executor{},
			"config: executor.quota_bytes (SNAPNODE_EXECUTOR_QUOTA_BYTES): want at least 1 byte; got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v\nwant one containing %s", err, tc.err)
				}
				if n := strings.Count(err.Error(), tc.err); n != 1 {
					t.Errorf("error %v\nsays %s %d times, want once", err, tc.err, n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := config.Executor{QuotaBytes: c.Executor.QuotaBytes, QuotaFiles: c.Executor.QuotaFiles, QuotaDirs: c.Executor.QuotaDirs}
			if got != tc.want {
				t.Errorf("quotas %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The node-wide caps of the workspace in the [executor] table: defaults,
// precedence (flag over environment over file), and a clear error for
// each bad value.
func TestExecutorWorkspaceSettings(t *testing.T) {
	file := writeFile(t, "workspace.toml", "[executor]\nworkspace_max_bytes = 5000\nworkspace_max_entries = 300\n", 0o600)
	type caps struct{ bytes, entries int64 }
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want caps
		err  string
	}{
		{"defaults", nil, nil, caps{100 << 20, 100_000}, ""},
		{"file", []string{"--config", file}, nil, caps{5000, 300}, ""},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_EXECUTOR_WORKSPACE_MAX_ENTRIES": "400"}, caps{5000, 400}, ""},
		{"flag over env", []string{"--config", file, "--executor-workspace-max-bytes", "7000"}, map[string]string{"SNAPNODE_EXECUTOR_WORKSPACE_MAX_BYTES": "6000"},
			caps{7000, 300}, ""},
		{"zero", []string{"--executor-workspace-max-entries", "0"}, nil, caps{},
			"config: executor.workspace_max_entries (--executor-workspace-max-entries): want at least 1; got 0"},
		{"negative", nil, map[string]string{"SNAPNODE_EXECUTOR_WORKSPACE_MAX_BYTES": "-1"}, caps{},
			"config: executor.workspace_max_bytes (SNAPNODE_EXECUTOR_WORKSPACE_MAX_BYTES): want at least 1 byte; got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v\nwant one containing %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := (caps{c.Executor.WorkspaceMaxBytes, c.Executor.WorkspaceMaxEntries}); got != tc.want {
				t.Errorf("caps %+v, want %+v", got, tc.want)
			}
		})
	}
}

// memory_limit, the Go runtime's soft limit: its default, then file,
// environment and flag, each over the one before; 0 (the runtime's own)
// is accepted, a limit under MinMemoryLimit is not.
func TestMemoryLimit(t *testing.T) {
	file := writeFile(t, "memory.toml", "memory_limit = 100663296\n", 0o600)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want int64
	}{
		{"default", nil, nil, config.DefaultMemoryLimit},
		{"file", []string{"--config", file}, nil, 96 << 20},
		{"env over file", []string{"--config", file}, map[string]string{"SNAPNODE_MEMORY_LIMIT": "67108864"}, 64 << 20},
		{"flag over env", []string{"--config", file, "--memory-limit", "33554432"}, map[string]string{"SNAPNODE_MEMORY_LIMIT": "67108864"}, 32 << 20},
		{"off over file", []string{"--config", file, "--memory-limit", "0"}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.MemoryLimit != tc.want {
				t.Errorf("memory_limit %d, want %d", c.MemoryLimit, tc.want)
			}
		})
	}
	_, err := load(t, []string{"--memory-limit", "1048576"}, nil)
	if err == nil || !strings.Contains(err.Error(), "memory_limit 1048576: want 0 (GOMEMLIMIT, else none) or at least 16777216 bytes") {
		t.Errorf("a 1 MiB limit: error %v", err)
	}
}

// A variable that does not parse is refused naming the variable, the value
// and what it wants, without Go's parser names (strconv.Atoi: …).
func TestEnvParseErrorsSayTheRule(t *testing.T) {
	for _, tc := range []struct {
		env, value, want string
	}{
		{"SNAPNODE_WORKERS", "many", `config: SNAPNODE_WORKERS="many": want a whole number`},
		{"SNAPNODE_HTTP_MAX_BODY", "99999999999999999999", `config: SNAPNODE_HTTP_MAX_BODY="99999999999999999999": want a whole number, this one is out of range`},
		{"SNAPNODE_HTTP_RATE", "fast", `config: SNAPNODE_HTTP_RATE="fast": want a number`},
		{"SNAPNODE_TESTNET", "yes", `config: SNAPNODE_TESTNET="yes": want true or false`},
		{"SNAPNODE_MAX_DRIFT", "60", `config: SNAPNODE_MAX_DRIFT="60": want a duration with its unit, such as 90s, 5m or 1h30m`},
	} {
		t.Run(tc.env, func(t *testing.T) {
			_, err := load(t, nil, map[string]string{tc.env: tc.value})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v\nwant %s", err, tc.want)
			}
		})
	}
}

// LoadOverridden names the settings the file gives a value that a flag
// or a variable replaces with another: not those the file leaves out, nor
// those given the same value; a table's setting by TABLE.KEY, [card] as a
// whole.
func TestLoadOverridden(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapnode.toml")
	content := "workers = 3\nlog_level = \"debug\"\nmax_drift = \"90s\"\n[agent]\nmax_steps = 7\n[card]\nname = \"from the file\"\n"
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	bound := config.Default()
	config.Flags(fs, &bound)
	if err := fs.Parse([]string{"--config", file, "--workers", "2", "--max-drift", "90s"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SNAPNODE_LOG_LEVEL": "warn", "SNAPNODE_HTTP_RATE": "3", "SNAPNODE_AGENT_MAX_STEPS": "9"}
	c, overridden, err := config.NewSources(&bound, fs, func(k string) string { return env[k] }).LoadOverridden()
	if err != nil {
		t.Fatal(err)
	}
	if c.Workers != 2 || c.LogLevel != "warn" || c.HTTPRate != 3 || c.Agent.MaxSteps != 9 || c.Card.Name != "from the file" {
		t.Fatalf("settings: workers %d, log_level %q, http_rate %v, agent.max_steps %d, card %q", c.Workers, c.LogLevel, c.HTTPRate, c.Agent.MaxSteps, c.Card.Name)
	}
	if want := []string{"log_level", "workers", "agent.max_steps"}; !slices.Equal(overridden, want) {
		t.Errorf("overridden: %q, want %q", overridden, want)
	}
}
