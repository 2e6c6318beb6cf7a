package policy_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/identity"
)

func TestParseErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "parse-errors", "*.cedar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no parse-error files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := bytes.Cut(src, []byte("\n"))
			var line, col int
			var want string
			spec, ok := strings.CutPrefix(string(first), "// want: ")
			if !ok {
				t.Fatalf("first line %q is not a // want: comment", first)
			}
			pos, want, _ := strings.Cut(spec, " ")
			if _, err := fmt.Sscanf(pos, "%d:%d", &line, &col); err != nil {
				t.Fatalf("bad position %q: %v", pos, err)
			}

			_, err = policy.Load(file)
			var pe *policy.ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *ParseError", err, err)
			}
			if !errors.Is(err, policy.ErrInvalidPolicy) {
				t.Errorf("errors.Is(%v, ErrInvalidPolicy) is false", err)
			}
			if pe.File != file || pe.Line != line || pe.Column != col {
				t.Errorf("at %s:%d:%d, want %s:%d:%d (%v)", pe.File, pe.Line, pe.Column, file, line, col, err)
			}
			if !strings.Contains(pe.Msg, want) {
				t.Errorf("message %q does not contain %q", pe.Msg, want)
			}
			if prefix := file + ":" + pos + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Error() = %q, want it to start with %q", err, prefix)
			}
		})
	}
}

func TestParseNUL(t *testing.T) {
	for _, tc := range []struct {
		src       string
		line, col int
	}{
		{"\x00permit (principal, action, resource);", 1, 1},
		{"permit (principal, action, resource);\n  \x00", 2, 3},
	} {
		_, err := policy.Parse("nul.cedar", []byte(tc.src))
		var pe *policy.ParseError
		if !errors.As(err, &pe) || pe.Line != tc.line || pe.Column != tc.col || !strings.Contains(pe.Msg, "NUL") {
			t.Errorf("Parse(%q) = %v, want NUL at %d:%d", tc.src, err, tc.line, tc.col)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := policy.Load(filepath.Join(t.TempDir(), "none.cedar"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
	if errors.Is(err, policy.ErrInvalidPolicy) {
		t.Fatalf("a missing file is not an invalid policy: %v", err)
	}
}

func TestParseValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		n    int
	}{
		{"empty", "", 0},
		{"comments only", "// nothing\n", 0},
		{"default", "", -1},
		{"no ids", "permit (principal, action, resource);\nforbid (principal, action, resource);", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *policy.Engine
			if tc.n < 0 {
				e = policy.Default()
			} else {
				var err error
				if e, err = policy.Parse(tc.name+".cedar", []byte(tc.src)); err != nil {
					t.Fatal(err)
				}
				if e.Len() != tc.n {
					t.Errorf("Len() = %d, want %d", e.Len(), tc.n)
				}
				if e.Name() != tc.name+".cedar" {
					t.Errorf("Name() = %q", e.Name())
				}
			}
			if len(e.Version()) != 16 {
				t.Errorf("Version() = %q, want 16 hex digits", e.Version())
			}
		})
	}
}

func TestVersionFollowsText(t *testing.T) {
	a, err := policy.Parse("a.cedar", []byte("permit (principal, action, resource);"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.Parse("b.cedar", []byte("permit (principal, action, resource);"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := policy.Parse("a.cedar", []byte("permit (principal, action, resource); "))
	if err != nil {
		t.Fatal(err)
	}
	if a.Version() != b.Version() {
		t.Errorf("same text, versions %s and %s", a.Version(), b.Version())
	}
	if a.Version() == c.Version() {
		t.Errorf("different text, same version %s", a.Version())
	}
	// sha256("permit (principal, action, resource);"), first 8 bytes.
	if want := sha256Prefix("permit (principal, action, resource);"); a.Version() != want {
		t.Errorf("version %s, want %s", a.Version(), want)
	}
}

func sha256Prefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// A node judges requests from addresses of its own network only: an Agent
// literal of the other one (tb1p… on a mainnet node, bc1p… on a testnet
// or signet one) is nobody's there, and a forbid naming it would guard
// nothing. Parse refuses it, naming where, the address and both networks.
func TestParseOtherNetwork(t *testing.T) {
	const (
		main = "bc1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqm72e9v"
		test = "tb1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqvkuklr" // the same key's
	)
	for _, tc := range []struct {
		name    string
		opts    []policy.Option
		agent   string
		refused string // "": it parses; else the node's network, named in the error
	}{
		{"mainnet by default, mainnet agent", nil, main, ""},
		{"mainnet by default, testnet agent", nil, test, "mainnet"},
		{"mainnet, mainnet agent", []policy.Option{policy.WithNetwork(identity.Mainnet)}, main, ""},
		{"mainnet, testnet agent", []policy.Option{policy.WithNetwork(identity.Mainnet)}, test, "mainnet"},
		{"testnet, testnet agent", []policy.Option{policy.WithNetwork(identity.Testnet)}, test, ""},
		{"testnet, mainnet agent", []policy.Option{policy.WithNetwork(identity.Testnet)}, main, "testnet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, src := range []string{
				"permit (principal, action, resource);\n\nforbid (principal == Agent::%q, action, resource);",
				"permit (principal, action, resource);\n\nforbid (principal, action, resource) when { principal == Agent::%q };",
				"permit (principal, action, resource);\n\nforbid (principal, action, resource) when { [Agent::%q].contains(principal) && context.size > 0 };",
			} {
				src = fmt.Sprintf(src, tc.agent)
				_, err := policy.Parse("net.cedar", []byte(src), tc.opts...)
				if tc.refused == "" {
					if err != nil {
						t.Fatalf("Parse(%q): %v", src, err)
					}
					continue
				}
				var pe *policy.ParseError
				if !errors.As(err, &pe) || !errors.Is(err, policy.ErrInvalidPolicy) || !errors.Is(err, policy.ErrOtherNetwork) {
					t.Fatalf("Parse(%q) = %v, want a *ParseError matching ErrOtherNetwork", src, err)
				}
				other, mine := "testnet", tc.refused
				if mine == "testnet" {
					other = "mainnet"
				}
				msg := err.Error()
				for _, want := range []string{"net.cedar:3:1: ", tc.agent, other, "runs on " + mine} {
					if !strings.Contains(msg, want) {
						t.Errorf("Parse(%q) = %q, want it to name %q", src, msg, want)
					}
				}
			}
		})
	}
}
