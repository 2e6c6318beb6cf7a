package config

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// keyPosition finds a key under its table, dotted or quoted, and not in a
// multi-line string that looks like one.
func TestKeyPosition(t *testing.T) {
	text := strings.Join([]string{
		`workers = 3`, // 1
		`[agent]`,     // 2
		`system_prompt = """`,
		`max_steps = 9`, // 4: in the string
		`"""`,
		`  "max_steps" = 0`, // 6
		`[[card.skills]]`,   // 7
		`id = "a"`,          // 8
		`[ executor ]`,      // 9
		`quota_files=0`,     // 10
		`audit . retain_days = 1`,
	}, "\n")
	for _, tc := range []struct {
		key       string
		line, col int
	}{
		{"workers", 1, 1}, {"agent", 2, 1}, {"agent.max_steps", 6, 3}, {"card.skills.id", 8, 1},
		{"executor.quota_files", 10, 1}, {"executor.audit.retain_days", 11, 1}, {"agent.workers", 0, 0}, {"max_steps", 0, 0},
	} {
		if line, col := keyPosition(text, toml.Key(strings.Split(tc.key, "."))); line != tc.line || col != tc.col {
			t.Errorf("%s: %d:%d, want %d:%d", tc.key, line, col, tc.line, tc.col)
		}
	}
}
