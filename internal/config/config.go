// Package config loads snapnode's settings. Each setting comes from, in
// order of precedence: a command-line flag, a SNAPNODE_* environment
// variable, the TOML file named by --config (or SNAPNODE_CONFIG), then the
// default. With nothing configured, the node runs self-contained: data in
// ./snapnode-data, an embedded relay on 127.0.0.1:7447, SNAP over HTTP and
// WebSocket on 127.0.0.1:7448.
//
//	fs := flag.NewFlagSet("run", flag.ContinueOnError)
//	cfg := config.Default()
//	config.Flags(fs, &cfg)        // binds flags to cfg's fields
//	fs.Parse(args)
//	err := config.Load(&cfg, fs, os.Getenv) // applies file, env, then set flags
package config

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/snapnode/snapnode/identity"
)

// Config is every setting of `snapnode run`.
type Config struct {
	// ConfigFile is the TOML file read (flag --config, SNAPNODE_CONFIG).
	ConfigFile string `toml:"-"`
	// DataDir holds the identity, the databases and the sandbox.
	DataDir string `toml:"data_dir"`
	// KeyFile is the identity's secret; default <data-dir>/identity.key.
	// SNAPNODE_KEY, when set, is the key itself and wins over the file.
	KeyFile string `toml:"key_file"`
	// Database holds tasks and the replay records: a SQLite file path or
	// sqlite: DSN, or a postgres:// DSN shared by replicas. Default
	// <data-dir>/tasks.db.
	Database string `toml:"database"`
	// Testnet makes the node's address tb1p… instead of bc1p….
	Testnet bool `toml:"testnet"`
	// Relays to use. When empty the node starts its embedded relay on
	// RelayListen and uses that.
	Relays []string `toml:"relays"`
	// RelayListen is the embedded relay's address; empty disables it.
	RelayListen string `toml:"relay_listen"`
	// HTTPListen is the address of SNAP over HTTP, SSE and WebSocket
	// (POST and GET /snap, the well-known card, /healthz, /metrics);
	// empty, or "off", disables it. When it is left at
	// DefaultHTTPListen and that port is taken, the node runs without
	// HTTP and logs a warning; an address set on purpose must be free.
	HTTPListen string `toml:"http_listen"`
	// HTTPMaxBody bounds a message posted or sent over WebSocket, in
	// bytes; a larger one gets 400 (or WebSocket close 1009).
	HTTPMaxBody int64 `toml:"http_max_body"`
	// HTTPRate is each peer's allowance of HTTP requests and WebSocket
	// messages per second (a peer is an IPv4 address or an IPv6 /64),
	// with bursts of HTTPBurst; over it an HTTP request gets 429 with
	// Retry-After before its body is read. 0 disables the limit.
	HTTPRate  float64 `toml:"http_rate"`
	HTTPBurst int     `toml:"http_burst"`
	// IdentityRate is each SNAP identity's allowance of requests per
	// second over every transport, with bursts of IdentityBurst. It is
	// checked after the signature verifies (a forger cannot spend
	// another's allowance) and before the message's id is recorded (a
	// refused request may be sent again); over it the answer is 5002
	// with data.retryAfter. 0 disables the limit.
	IdentityRate  float64 `toml:"identity_rate"`
	IdentityBurst int     `toml:"identity_burst"`
	// NostrKeyRate is each Nostr key's allowance of request events per
	// second, with bursts of NostrKeyBurst, checked before an event is
	// queued or decrypted. 0 disables the limit.
	NostrKeyRate  float64 `toml:"nostr_key_rate"`
	NostrKeyBurst int     `toml:"nostr_key_burst"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// MaxDrift is the SNAP timestamp window.
	MaxDrift Duration `toml:"max_drift"`
	// ReplyTTL is the NIP-40 expiration of replies to stored requests.
	ReplyTTL Duration `toml:"reply_ttl"`
	// SandboxDir is the workspace proposals act on (their /sandbox/);
	// default <data-dir>/sandbox.
	SandboxDir string `toml:"sandbox_dir"`
	// Policy is the operator's Cedar policy file; empty uses the built-in
	// default policy.
	Policy string `toml:"policy"`
	// TaskRetention is how long a task is kept once it is terminal
	// (completed, failed, canceled); 0 keeps tasks forever.
	TaskRetention Duration `toml:"task_retention"`
	// Workers handle requests concurrently.
	Workers int `toml:"workers"`
	// Operators are identities that may see and manage every task.
	Operators []string `toml:"operators"`
	// ServiceCallers are the identities that may call the node's
	// services (service/call); nobody may when it is empty.
	ServiceCallers []string `toml:"service_callers"`
	// Card is the agent card the node publishes.
	Card Card `toml:"card"`
}

// Card is the configurable part of the agent card; the identity and the
// relays are filled in by the node.
type Card struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Version     string   `toml:"version"`
	InputModes  []string `toml:"input_modes"`
	OutputModes []string `toml:"output_modes"`
	Skills      []Skill  `toml:"skills"`
	Endpoints   []struct {
		Protocol string `toml:"protocol"`
		URL      string `toml:"url"`
	} `toml:"endpoints"`
}

// Skill is one skill of the card.
type Skill struct {
	ID          string   `toml:"id"`
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Tags        []string `toml:"tags"`
	Examples    []string `toml:"examples"`
}

// Duration is a time.Duration written as "60s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// DefaultHTTPListen is the default address of the HTTP transport.
const DefaultHTTPListen = "127.0.0.1:7448"

// MaxHTTPBody is the largest http_max_body: the largest SNAP message.
const MaxHTTPBody = 10 << 20

// Default returns the settings of a node with no configuration.
func Default() Config {
	return Config{
		DataDir:       "snapnode-data",
		RelayListen:   "127.0.0.1:7447",
		HTTPListen:    DefaultHTTPListen,
		HTTPMaxBody:   256 << 10,
		HTTPRate:      50,
		HTTPBurst:     100,
		IdentityRate:  20,
		IdentityBurst: 100,
		NostrKeyRate:  20,
		NostrKeyBurst: 100,
		LogLevel:      "info",
		MaxDrift:      Duration{60 * time.Second},
		ReplyTTL:      Duration{7 * 24 * time.Hour},
		TaskRetention: Duration{30 * 24 * time.Hour},
		Workers:       8,
		Card: Card{
			Name:        "snapnode",
			Description: "A SNAP agent run by snapnode: send it a task; file actions are validated, judged by policy and sandboxed.",
			Version:     "0.1.0",
			InputModes:  []string{"text/plain", "application/json"},
			OutputModes: []string{"text/plain", "application/json"},
			Skills: []Skill{{
				ID: "tasks", Name: "Tasks",
				Description: "Accepts SNAP tasks (message/send, tasks/get, tasks/cancel) and keeps them durably.",
				Tags:        []string{"tasks", "snap"},
			}},
		},
	}
}

// setting ties one setting to its flag and environment variable.
type setting struct {
	flag, env, usage string
	bind             func(fs *flag.FlagSet, c *Config, name, usage string)
	fromEnv          func(c *Config, v string) error
	// list, for a repeatable flag, is the list it appends to.
	list func(c *Config) *[]string
}

// listSetting is a repeatable flag whose variable is comma-separated.
func listSetting(flagName, env, usage string, field func(*Config) *[]string) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.Func(name, usage, func(v string) error { *field(c) = append(*field(c), v); return nil })
		},
		func(c *Config, v string) error { *field(c) = splitList(v); return nil },
		field}
}

func stringSetting(flagName, env, usage string, field func(*Config) *string) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) { fs.StringVar(field(c), name, *field(c), usage) },
		func(c *Config, v string) error { *field(c) = v; return nil }, nil}
}

func intSetting(flagName, env, usage string, field func(*Config) *int) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) { fs.IntVar(field(c), name, *field(c), usage) },
		func(c *Config, v string) (err error) { *field(c), err = strconv.Atoi(v); return err }, nil}
}

func floatSetting(flagName, env, usage string, field func(*Config) *float64) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) { fs.Float64Var(field(c), name, *field(c), usage) },
		func(c *Config, v string) (err error) { *field(c), err = strconv.ParseFloat(v, 64); return err }, nil}
}

var settings = []setting{
	stringSetting("data-dir", "SNAPNODE_DATA_DIR", "keep the identity and databases in `DIR`", func(c *Config) *string { return &c.DataDir }),
	stringSetting("key", "SNAPNODE_KEY_FILE", "the identity's secret key `FILE` (default <data-dir>/identity.key; SNAPNODE_KEY holds a key itself)", func(c *Config) *string { return &c.KeyFile }),
	stringSetting("sandbox-dir", "SNAPNODE_SANDBOX_DIR", "carry out proposals in the workspace `DIR` (their /sandbox/; default <data-dir>/sandbox)", func(c *Config) *string { return &c.SandboxDir }),
	stringSetting("policy", "SNAPNODE_POLICY", "judge proposals by the Cedar policy in `FILE` (default: the built-in policy)", func(c *Config) *string { return &c.Policy }),
	stringSetting("database", "SNAPNODE_DATABASE", "keep tasks and replay records in `DSN`: a SQLite file, postgres://…, or memory (nothing survives a restart); default <data-dir>/tasks.db", func(c *Config) *string { return &c.Database }),
	stringSetting("relay-listen", "SNAPNODE_RELAY_LISTEN", "run the embedded relay on `ADDR` when no --relay is given (empty: none)", func(c *Config) *string { return &c.RelayListen }),
	{"http-listen", "SNAPNODE_HTTP_LISTEN", "serve SNAP over HTTP, SSE and WebSocket on `ADDR` (empty or off: none)",
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.StringVar(&c.HTTPListen, name, c.HTTPListen, usage)
		},
		func(c *Config, v string) error {
			if v == "off" {
				v = ""
			}
			c.HTTPListen = v
			return nil
		}, nil},
	{"http-max-body", "SNAPNODE_HTTP_MAX_BODY", "refuse HTTP and WebSocket messages over `BYTES` (400, or close 1009)",
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.Int64Var(&c.HTTPMaxBody, name, c.HTTPMaxBody, usage)
		},
		func(c *Config, v string) (err error) { c.HTTPMaxBody, err = strconv.ParseInt(v, 10, 64); return err }, nil},
	floatSetting("http-rate", "SNAPNODE_HTTP_RATE", "allow each peer `N` HTTP requests or WebSocket messages a second (0: no limit)", func(c *Config) *float64 { return &c.HTTPRate }),
	intSetting("http-burst", "SNAPNODE_HTTP_BURST", "let each peer burst to `N` HTTP requests above its rate", func(c *Config) *int { return &c.HTTPBurst }),
	floatSetting("identity-rate", "SNAPNODE_IDENTITY_RATE", "allow each SNAP identity `N` requests a second over every transport (0: no limit)", func(c *Config) *float64 { return &c.IdentityRate }),
	intSetting("identity-burst", "SNAPNODE_IDENTITY_BURST", "let each identity burst to `N` requests above its rate", func(c *Config) *int { return &c.IdentityBurst }),
	floatSetting("nostr-key-rate", "SNAPNODE_NOSTR_KEY_RATE", "allow each Nostr key `N` request events a second, checked before decryption (0: no limit)", func(c *Config) *float64 { return &c.NostrKeyRate }),
	intSetting("nostr-key-burst", "SNAPNODE_NOSTR_KEY_BURST", "let each Nostr key burst to `N` request events above its rate", func(c *Config) *int { return &c.NostrKeyBurst }),
	stringSetting("log-level", "SNAPNODE_LOG_LEVEL", "log `LEVEL`: debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	{"testnet", "SNAPNODE_TESTNET", "use the testnet (tb1p…) address",
		func(fs *flag.FlagSet, c *Config, name, usage string) { fs.BoolVar(&c.Testnet, name, c.Testnet, usage) },
		func(c *Config, v string) (err error) { c.Testnet, err = strconv.ParseBool(v); return err }, nil},
	listSetting("relay", "SNAPNODE_RELAYS", "use the relay at `URL` (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.Relays }),
	{"max-drift", "SNAPNODE_MAX_DRIFT", "accept SNAP timestamps within `DURATION` of the clock",
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.DurationVar(&c.MaxDrift.Duration, name, c.MaxDrift.Duration, usage)
		},
		func(c *Config, v string) error { return c.MaxDrift.UnmarshalText([]byte(v)) }, nil},
	{"reply-ttl", "SNAPNODE_REPLY_TTL", "expire replies to stored requests after `DURATION`",
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.DurationVar(&c.ReplyTTL.Duration, name, c.ReplyTTL.Duration, usage)
		},
		func(c *Config, v string) error { return c.ReplyTTL.UnmarshalText([]byte(v)) }, nil},
	{"task-retention", "SNAPNODE_TASK_RETENTION", "delete tasks `DURATION` after they end (completed, failed, canceled); 0 keeps them",
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.DurationVar(&c.TaskRetention.Duration, name, c.TaskRetention.Duration, usage)
		},
		func(c *Config, v string) error { return c.TaskRetention.UnmarshalText([]byte(v)) }, nil},
	intSetting("workers", "SNAPNODE_WORKERS", "handle `N` requests at once", func(c *Config) *int { return &c.Workers }),
	listSetting("operator", "SNAPNODE_OPERATORS", "give `ADDR` the operator role (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.Operators }),
	listSetting("service-caller", "SNAPNODE_SERVICE_CALLERS", "let `ADDR` call the node's services (service/call; repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.ServiceCallers }),
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Flags defines the settings' flags on fs, plus --config.
func Flags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "read settings from the TOML `FILE` (also SNAPNODE_CONFIG)")
	for _, s := range settings {
		s.bind(fs, c, s.flag, s.usage)
	}
}

// Load completes c after fs has parsed the command line: it reads the TOML
// file, then the environment, then re-applies the flags that were set, so
// that each setting has the value of its most specific source. getenv is
// os.Getenv in production.
func Load(c *Config, fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// What the flags said, to apply last.
	flagged := *c
	for _, s := range settings {
		if s.list != nil {
			*s.list(&flagged) = slices.Clone(*s.list(c))
		}
	}

	file := c.ConfigFile
	if !set["config"] {
		file = getenv("SNAPNODE_CONFIG")
	}
	base := Default()
	if file != "" {
		md, err := toml.DecodeFile(file, &base)
		if err != nil {
			return fmt.Errorf("config: %s: %w", file, err)
		}
		if un := md.Undecoded(); len(un) > 0 {
			return fmt.Errorf("config: %s: unknown setting %q", file, un[0].String())
		}
	}
	base.ConfigFile = file
	for _, s := range settings {
		if v := getenv(s.env); v != "" {
			if err := s.fromEnv(&base, v); err != nil {
				return fmt.Errorf("config: %s=%q: %w", s.env, v, err)
			}
		}
	}
	// Flags win. A repeatable flag's value is what was parsed into c; the
	// others are re-applied from their text.
	for name := range set {
		s, ok := lookupSetting(name)
		switch {
		case !ok:
			continue // --config, or a flag of the command's own
		case s.list != nil:
			*s.list(&base) = *s.list(&flagged)
		default:
			if err := s.fromEnv(&base, fs.Lookup(name).Value.String()); err != nil {
				return fmt.Errorf("config: --%s: %w", name, err)
			}
		}
	}
	*c = base
	return c.Validate()
}

// lookupSetting returns the setting whose flag is name.
func lookupSetting(name string) (setting, bool) {
	for _, s := range settings {
		if s.flag == name {
			return s, true
		}
	}
	return setting{}, false
}

// Validate checks the settings that can be checked before starting.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("config: data_dir is empty"))
	}
	if len(c.Relays) == 0 && c.RelayListen == "" {
		errs = append(errs, errors.New("config: no relay: give --relay URL or an embedded relay address (--relay-listen)"))
	}
	for _, r := range c.Relays {
		if !strings.HasPrefix(r, "ws://") && !strings.HasPrefix(r, "wss://") {
			errs = append(errs, fmt.Errorf("config: relay %q is not a ws:// or wss:// URL", r))
		}
	}
	if c.HTTPListen == "off" {
		c.HTTPListen = ""
	}
	if c.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(c.HTTPListen); err != nil {
			errs = append(errs, fmt.Errorf("config: http_listen %q: want host:port: %w", c.HTTPListen, err))
		}
	}
	if c.HTTPMaxBody < 1024 || c.HTTPMaxBody > MaxHTTPBody {
		errs = append(errs, fmt.Errorf("config: http_max_body %d: want 1024…%d bytes", c.HTTPMaxBody, MaxHTTPBody))
	}
	for _, l := range []struct {
		name  string
		rate  float64
		burst int
	}{{"http", c.HTTPRate, c.HTTPBurst}, {"identity", c.IdentityRate, c.IdentityBurst}, {"nostr_key", c.NostrKeyRate, c.NostrKeyBurst}} {
		if l.rate < 0 || math.IsNaN(l.rate) || math.IsInf(l.rate, 0) {
			errs = append(errs, fmt.Errorf("config: %s_rate %v: want 0 (no limit) or more requests a second", l.name, l.rate))
		}
		if l.burst < 1 {
			errs = append(errs, fmt.Errorf("config: %s_burst %d: want at least 1", l.name, l.burst))
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("config: log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.MaxDrift.Duration < time.Second {
		errs = append(errs, fmt.Errorf("config: max_drift %v: want at least 1s", c.MaxDrift.Duration))
	}
	if c.TaskRetention.Duration < 0 {
		errs = append(errs, fmt.Errorf("config: task_retention %v: want 0 (keep) or more", c.TaskRetention.Duration))
	}
	if c.Workers < 1 {
		errs = append(errs, fmt.Errorf("config: workers %d: want at least 1", c.Workers))
	}
	for _, list := range []struct {
		name  string
		addrs []string
	}{{"operators", c.Operators}, {"service_callers", c.ServiceCallers}} {
		for _, a := range list.addrs {
			if _, err := identity.ParseAddress(a); err != nil {
				errs = append(errs, fmt.Errorf("config: %s: %w", list.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// KeyPath returns the identity file: KeyFile, or identity.key in DataDir.
func (c *Config) KeyPath() string {
	if c.KeyFile != "" {
		return c.KeyFile
	}
	return filepath.Join(c.DataDir, "identity.key")
}

// MemoryDatabase as the database keeps tasks and replay records in memory:
// nothing survives a restart. For throwaway nodes and measurements.
const MemoryDatabase = "memory"

// DatabaseDSN returns Database, or the SQLite file tasks.db in DataDir.
func (c *Config) DatabaseDSN() string {
	if c.Database != "" {
		return c.Database
	}
	return filepath.Join(c.DataDir, "tasks.db")
}

// SandboxPath returns SandboxDir, or the folder sandbox in DataDir.
func (c *Config) SandboxPath() string {
	if c.SandboxDir != "" {
		return c.SandboxDir
	}
	return filepath.Join(c.DataDir, "sandbox")
}

// EnsureDataDir creates the data folder (0700) if it does not exist.
func (c *Config) EnsureDataDir() error {
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("config: data folder: %w", err)
	}
	return nil
}
