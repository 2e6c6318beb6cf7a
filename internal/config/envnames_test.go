package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// A SNAPNODE_* variable that no setting reads, a misspelt one most
// likely, is named with the one it may be a misspelling of, and its value
// is never shown (it may be a key). The variables the node reads, and
// those of snapnode's tests and benchmarks, are not named.
func TestUnknownVariables(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin",
		"SNAPNODE_WORKER=3",
		"SNAPNODE_WORKERS=4",
		"SNAPNODE_LLM_APIKEY=sk-secret",
		"SNAPNODE_FROBNICATE=1",
		"SNAPNODE_KEY=00",
		"SNAPNODE_CONFIG=/etc/snapnode.toml",
		"SNAPNODE_LLM_API_KEY=sk-other",
		"SNAPNODE_AGENT_MAX_STEPS=3",
		"SNAPNODE_TEST_POSTGRES=postgres://x",
		"SNAPNODE_SNAP_REFERENCE=/ref",
		"SNAPNODE_BENCH_CPUPROFILE=/tmp/cpu",
		"SNAPNODE_=x",
		"NOT_SNAPNODE_WORKER=1",
	}
	got := config.UnknownVariables(environ)
	want := []string{
		"SNAPNODE_", // no setting is this close to nothing
		"SNAPNODE_FROBNICATE",
		"SNAPNODE_LLM_APIKEY (did you mean SNAPNODE_LLM_API_KEY?)",
		"SNAPNODE_WORKER (did you mean SNAPNODE_WORKERS?)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("unknown variables:\n got %q\nwant %q", got, want)
	}
	for _, g := range got {
		if strings.Contains(g, "secret") {
			t.Errorf("a value shown: %q", g)
		}
	}
	if got := config.UnknownVariables([]string{"SNAPNODE_WORKERS=4", "HOME=/root"}); len(got) != 0 {
		t.Errorf("known variables named: %q", got)
	}
}
