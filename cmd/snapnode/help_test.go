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
