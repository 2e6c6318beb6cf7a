package main

import (
	"os"
	"strings"
	"testing"
)

// TestHelpFiles checks that each help/NAME.txt is the usage that
// "snapnode help NAME" prints (synopsis, then description, then the
// flags), and that every command answers help, so that a command whose
// help file is missing or misnamed fails here rather than for a user.
func TestHelpFiles(t *testing.T) {
	entries, err := os.ReadDir("help")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Fatal("help/ is empty")
	}
	for _, e := range entries {
		name := strings.ReplaceAll(strings.TrimSuffix(e.Name(), ".txt"), "-", " ")
		if name == "console url" {
			name = "console-url"
		}
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile("help/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			use, desc, _ := strings.Cut(string(b), "\n")
			want := "usage: snapnode " + name + " " + use + "\n" + desc + "\n"
			r := runCLI(t, "", append([]string{"help"}, strings.Fields(name)...)...)
			if r.code != exitOK || !strings.HasPrefix(r.stdout, want) {
				t.Errorf("want exit 0 and stdout starting with\n%s\ngot %s", want, r)
			}
		})
	}
	for _, cmd := range commands {
		if r := runCLI(t, "", "help", cmd.name); r.code != exitOK && r.code != exitUsage {
			t.Errorf("help %s: %s", cmd.name, r)
		}
	}
}

// A command that reads the node's settings lists its own flags first and
// the settings apart, under a heading: approve's --diff is not lost among
// run's sixty flags. run itself lists its flags as one list.
func TestHelpOwnFlagsFirst(t *testing.T) {
	r := runCLI(t, "", "help", "approve")
	heading := strings.Index(r.stdout, "The node's settings")
	diff, action := strings.Index(r.stdout, "-diff SHA256"), strings.Index(r.stdout, "-action ID")
	setting := strings.Index(r.stdout, "-agent-max-jobs")
	if r.code != exitOK || heading < 0 || diff < 0 || action < 0 || setting < 0 || diff > heading || action > heading || setting < heading {
		t.Errorf("help approve: own flags, then the heading, then the settings; got %s", r)
	}
	if r := runCLI(t, "", "help", "run"); r.code != exitOK || strings.Contains(r.stdout, "The node's settings") || !strings.Contains(r.stdout, "-llm-url") {
		t.Errorf("help run: %s", r)
	}
}

// A command of sub-commands asked for its help (snapnode help task, task
// -h) lists its sub-commands, says how to see each one's flags, and exits
// 0, as any help does (help on stdout, -h on stderr, as every command's);
// without a sub-command it is still a usage error.
func TestHelpOfSubCommands(t *testing.T) {
	for _, cmd := range []string{"task", "job", "audit", "card", "policy"} {
		for _, args := range [][]string{{"help", cmd}, {cmd, "-h"}, {cmd, "--help"}} {
			r := runCLI(t, "", args...)
			out := r.stdout
			if args[0] != "help" {
				out = r.stderr
			}
			if r.code != exitOK || !strings.Contains(out, "usage: snapnode "+cmd) || !strings.Contains(out, "snapnode help "+cmd+" ") {
				t.Errorf("%s: want exit 0, the usage and how to see a sub-command's flags on stdout; got %s", strings.Join(args, " "), r)
			}
		}
		if r := runCLI(t, "", cmd); r.code != exitUsage {
			t.Errorf("%s alone: want exit 2, got %s", cmd, r)
		}
	}
}

// The command list is a table: every command's summary starts in one
// column, past the longest name (console-url's ran into its summary, and
// rollback's had one space).
func TestCommandListAligned(t *testing.T) {
	r := runCLI(t, "", "help")
	col := -1
	for _, line := range strings.Split(r.stdout, "\n") {
		name, ok := strings.CutPrefix(line, "  ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		at := strings.Index(line[2+len(name):], strings.TrimLeft(line[2+len(name):], " ")) + 2 + len(name)
		if at-2-len(name) < 2 {
			t.Errorf("%q: fewer than two spaces after the name", line)
		}
		if col < 0 {
			col = at
		} else if at != col {
			t.Errorf("%q: summary at column %d, want %d", line, at, col)
		}
	}
	if col < 0 {
		t.Fatalf("no command listed: %s", r)
	}
}

// A flag's help says its default once: a description that says it in
// words, "(default: all)", is not followed by the flag package's
// "(default -1)", a value a user would not type.
func TestHelpDefaultSaidOnce(t *testing.T) {
	var names []string
	for _, cmd := range commands {
		names = append(names, cmd.name)
	}
	names = append(names, "task get", "task cancel", "task list", "task show", "job list", "job show", "job history",
		"job replay", "job resume", "audit verify", "audit export", "policy check", "card sign", "card verify")
	for _, name := range names {
		r := runCLI(t, "", append([]string{"help"}, strings.Fields(name)...)...)
		lines := strings.Split(r.stdout, "\n")
		for i := 0; i+1 < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "  -") {
				continue
			}
			if flag := lines[i] + lines[i+1]; strings.Count(flag, "(default") > 1 {
				t.Errorf("help %s: %s", name, flag)
			}
		}
	}
}
