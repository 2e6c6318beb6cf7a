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
//
// The agent runtime's settings are the [agent] table; the model server's
// API key is never a setting: see [Config.LLMAPIKey].
package config
