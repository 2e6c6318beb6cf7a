package main

import (
	"fmt"
	"runtime/debug"

	"github.com/snapnode/snapnode/internal/secp"
)

// version is `snapnode version`: the module version the binary was built
// from (v1.2.3 when installed with go install …@v1.2.3, "(devel)" from a
// checkout), the commit and whether the tree had changes, when the build
// recorded them, the Go version, and the secp256k1 implementation the
// binary signs and verifies with (btcec, or libsecp256k1 when built with
// that tag).
func (c *cli) version(args []string) int {
	fs := c.flagSet("version")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(c.stdout, "snapnode: no build information in this binary")
		return exitFail
	}
	fmt.Fprintln(c.stdout, versionLine(info))
	return exitOK
}

// versionLine is "snapnode VERSION (commit C[, modified], built TIME) GO
// secp256k1=IMPLEMENTATION".
func versionLine(info *debug.BuildInfo) string {
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	v := info.Main.Version
	if v == "" {
		v = "(unknown)"
	}
	commit := "commit unknown"
	if rev := settings["vcs.revision"]; rev != "" {
		commit = "commit " + rev[:min(12, len(rev))]
		if settings["vcs.modified"] == "true" {
			commit += ", modified"
		}
		if t := settings["vcs.time"]; t != "" {
			commit += ", " + t
		}
	}
	return fmt.Sprintf("snapnode %s (%s) %s secp256k1=%s", v, commit, info.GoVersion, secp.Implementation)
}
