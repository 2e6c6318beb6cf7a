package config_test

import (
	"strings"
	"testing"
)

// A settings file that does not load is refused with the file, the line
// and column of the setting, the setting and the rule: whether the key is
// unknown or misspelt, the value of another type, outside the setting's
// range, given twice, or the text not TOML. A value the file gives that a
// variable replaces is the variable's, and the file is not named.
func TestFileErrorsNameFileLineKeyRule(t *testing.T) {
	cases := []struct {
		name, text string
		env        map[string]string
		want       []string
		not        []string
	}{
		{"unknown key", "workers = 4\n  foo = 1\n", nil,
			[]string{`FILE:2:3: unknown setting "foo"`}, nil},
		{"misspelt key in a table", "workers = 4\n\n[agent]\nmax_step = 3\n", nil,
			[]string{`FILE:4:1: unknown setting "agent.max_step" (did you mean agent.max_steps?)`}, nil},
		{"misspelt key of an array of tables", "[[card.skills]]\nid = \"a\"\ntag = [\"x\"]\n", nil,
			[]string{`FILE:3:1: unknown setting "card.skills.tag" (did you mean card.skills.tags?)`}, nil},
		{"misspelt key in an inline table", "workers = 4\nagent = { max_stepz = 3 }\n", nil,
			[]string{`FILE:2:1: unknown setting "agent.max_stepz" (did you mean agent.max_steps?)`}, nil},
		{"misspelt table", "[agnet]\nmax_steps = 3\n", nil,
			[]string{`FILE:1:1: unknown setting "agnet" (did you mean agent?)`}, nil},
		{"wrong type", "log_level = \"info\"\nworkers = \"8\"\n", nil,
			[]string{`FILE:2:1: workers: `, "integer"}, nil},
		{"wrong type of a duration", "# the clock\nmax_drift = \"60\"\n", nil,
			[]string{`FILE:2:`, "max_drift: want a duration with its unit"}, nil},
		{"duplicate key", "workers = 4\nworkers = 5\n", nil,
			[]string{`FILE:2:`, "workers: ", "already been defined"}, nil},
		{"syntax", "workers = 4\nlog_level = \n", nil,
			[]string{`FILE:2:`, "expected value"}, nil},
		{"out of range", "# c\nworkers = 0\n", nil,
			[]string{`FILE:2:1: workers 0: want at least 1`}, nil},
		{"out of range in a table", "[agent]\n max_steps = 0\n", nil,
			[]string{`FILE:2:2: agent.max_steps: want 1…10000 model calls; got 0`}, []string{"--agent-max-steps"}},
		{"out of range in a dotted key", "agent.max_steps = 0\n", nil,
			[]string{`FILE:1:1: agent.max_steps: want 1…10000 model calls; got 0`}, nil},
		{"enumerated value in a table", "[agent]\nmax_jobs = 2\n  reasoning_effort = \"off\"\n", nil,
			[]string{`FILE:3:3: agent.reasoning_effort: want none, minimal, low, medium, high or xhigh (empty: none sent); got "off"`}, []string{"--agent-reasoning-effort"}},
		{"list entry", "[agent]\nredact = ['ok', '(']\n", nil,
			[]string{`FILE:2:1: agent.redact[1]: want a regular expression`}, []string{"SNAPNODE_AGENT_REDACT"}},
		{"two at once", "workers = 0\n\n[executor]\nquota_files = 0\n", nil,
			[]string{`FILE:1:1: workers 0`, `FILE:4:1: executor.quota_files: want at least 1; got 0`}, nil},
		{"not a number", "# rates\nidentity_rate = nan\n", nil,
			[]string{`FILE:2:1: identity_rate NaN: want 0 (no limit) or more`}, nil},
		{"given by a variable", "workers = 3\n", map[string]string{"SNAPNODE_WORKERS": "0"},
			[]string{`config: SNAPNODE_WORKERS: workers 0: want at least 1`}, []string{"FILE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, "snapnode.toml", tc.text, 0o600)
			_, err := load(t, []string{"--config", file}, tc.env)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := strings.ReplaceAll(err.Error(), file, "FILE")
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\nwant it to contain %q", msg, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(msg, n) {
					t.Errorf("error %q\nnames %q", msg, n)
				}
			}
		})
	}
}

// A value out of range given by a variable or a flag is named by the
// variable or the flag that gave it, as one of the file is by its place in
// the file: the operator looks where the value is, not for the setting's
// name in a file that does not hold it.
func TestErrorsNameTheVariableOrFlag(t *testing.T) {
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
		not  []string
	}{
		{"variable", nil, map[string]string{"SNAPNODE_WORKERS": "0"},
			`config: SNAPNODE_WORKERS: workers 0: want at least 1`, []string{"FILE"}},
		{"flag", []string{"--workers", "0"}, nil,
			`config: --workers: workers 0: want at least 1`, []string{"FILE"}},
		{"flag over a variable", []string{"--workers", "0"}, map[string]string{"SNAPNODE_WORKERS": "2"},
			`config: --workers: workers 0: want at least 1`, []string{"SNAPNODE_WORKERS"}},
		{"variable of a table's setting that has a flag", nil, map[string]string{"SNAPNODE_AGENT_MAX_STEPS": "0"},
			`config: agent.max_steps (SNAPNODE_AGENT_MAX_STEPS): want 1…10000 model calls; got 0`, []string{"--agent-max-steps"}},
		{"flag of a table's setting", []string{"--agent-max-steps", "0"}, nil,
			`config: agent.max_steps (--agent-max-steps): want 1…10000 model calls; got 0`, nil},
		{"list", nil, map[string]string{"SNAPNODE_OPERATORS": "xyz"},
			`config: SNAPNODE_OPERATORS: operators: invalid P2TR address "xyz"`, nil},
		{"without a file", nil, map[string]string{"SNAPNODE_LOG_LEVEL": "loud"},
			`config: SNAPNODE_LOG_LEVEL: log_level "loud": want debug, info, warn or error`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.name != "without a file" {
				args = append([]string{"--config", writeFile(t, "snapnode.toml", "workers = 3\n[agent]\nmax_steps = 5\n", 0o600)}, args...)
			}
			_, err := load(t, args, tc.env)
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q\nwant it to contain %q", msg, tc.want)
			}
			for _, n := range append(tc.not, "snapnode.toml") {
				if strings.Contains(msg, n) {
					t.Errorf("error %q\nnames %q", msg, n)
				}
			}
		})
	}
}
