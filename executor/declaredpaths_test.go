package executor_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestDeclaredPathsRefusedWithFieldAndRule: a path a peer's descriptor
// declares (scope, effects, paths_exist; a composite's own and its
// children's) that the sandbox would refuse is a VALIDATION_ERROR naming
// its field and the sandbox's rule when the action arrives, like a path
// argument; the wildcards the descriptor schema allows stand for the
// names they match and are not refused.
func TestDeclaredPathsRefusedWithFieldAndRule(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "a")
	v.file("b.txt", "b")
	read := func(t *testing.T) *proposal.Descriptor {
		return leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"})
	}
	write := func(t *testing.T) *proposal.Descriptor {
		return leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "new"})
	}
	wide := proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
	cases := []struct {
		name, field, rule string
		data              func(t *testing.T) []byte
	}{
		{"scope fullwidth dots", "/scope/filesystem/paths/1", "lookalike", func(t *testing.T) []byte {
			d := read(t)
			d.Scope.Filesystem.Paths = append(d.Scope.Filesystem.Paths, "/sandbox/\uff0e\uff0e")
			return descriptorJSON(t, d)
		}},
		{"scope wildcard below fullwidth dots", "/scope/filesystem/paths/1", "lookalike", func(t *testing.T) []byte {
			d := read(t)
			d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/a.txt", "/sandbox/\uff0e\uff0e/*"}, Recursive: true}
			return descriptorJSON(t, d)
		}},
		{"paths_exist fullwidth dots", "/preconditions/paths_exist/0", "lookalike", func(t *testing.T) []byte {
			d := read(t)
			d.Scope.Filesystem = wide
			d.Preconditions.PathsExist = []string{"/sandbox/\uff0e\uff0e/*.txt"}
			return descriptorJSON(t, d)
		}},
		{"paths_exist bidi override in a wildcard name", "/preconditions/paths_exist/1", "format_char", func(t *testing.T) []byte {
			d := read(t)
			d.Scope.Filesystem = wide
			d.Preconditions.PathsExist = []string{"/sandbox/a.txt", "/sandbox/\u202e*.txt"}
			return descriptorJSON(t, d)
		}},
		{"paths_exist bidi override in a class longer than a name", "/preconditions/paths_exist/0", "format_char", func(t *testing.T) []byte {
			d := read(t)
			d.Scope.Filesystem = wide
			d.Preconditions.PathsExist = []string{"/sandbox/[" + strings.Repeat("\u00e9", 130) + "\u202e].txt"}
			return descriptorJSON(t, d)
		}},
		{"effects bidi override in a class", "/effects/filesystem/modify/0", "format_char", func(t *testing.T) []byte {
			d := write(t)
			d.Effects.Filesystem.Modify = []string{"/sandbox/[a\u202e].txt"}
			return descriptorJSON(t, d)
		}},
		{"effects fullwidth dot in a class", "/effects/filesystem/create/0", "lookalike", func(t *testing.T) []byte {
			d := write(t)
			d.Effects.Filesystem.Create = []string{"/sandbox/a[\uff0e.]txt"}
			return descriptorJSON(t, d)
		}},
		{"child's paths_exist", "/children/0/preconditions/paths_exist/0", "lookalike", func(t *testing.T) []byte {
			c := read(t)
			c.Scope.Filesystem = wide
			c.Preconditions.PathsExist = []string{"/sandbox/\uff0e\uff0e/a.txt"}
			return composite(t, c, write(t))
		}},
		{"child's effects", "/children/1/effects/filesystem/modify/0", "format_char", func(t *testing.T) []byte {
			c := write(t)
			c.Effects.Filesystem.Modify = []string{"/sandbox/[a\u202e].txt"}
			d, err := proposal.Compose([]*proposal.Descriptor{read(t), c}, peerDefaults())
			if err != nil {
				t.Fatal(err)
			}
			d.Scope.Filesystem = wide
			return descriptorJSON(t, d)
		}},
		{"composite's own scope", "/scope/filesystem/paths/1", "lookalike", func(t *testing.T) []byte {
			c, err := proposal.Compose([]*proposal.Descriptor{read(t), write(t)}, peerDefaults())
			if err != nil {
				t.Fatal(err)
			}
			c.Scope.Filesystem.Paths = append(c.Scope.Filesystem.Paths, "/sandbox/\uff0e\uff0e")
			return descriptorJSON(t, c)
		}},
		{"composite's own paths_exist", "/preconditions/paths_exist/0", "format_char", func(t *testing.T) []byte {
			c, err := proposal.Compose([]*proposal.Descriptor{read(t), write(t)}, peerDefaults())
			if err != nil {
				t.Fatal(err)
			}
			c.Preconditions.PathsExist = []string{"/sandbox/\u202ea.txt"}
			c.Scope.Filesystem = wide
			return descriptorJSON(t, c)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := v.run(agent, c.data(t))
			var out struct {
				Code  string `json:"error_code"`
				Field string `json:"field"`
				Rule  string `json:"rule"`
			}
			if err := json.Unmarshal(res.Output, &out); err != nil || out.Code != "VALIDATION_ERROR" || out.Field != c.field || out.Rule != c.rule {
				t.Errorf("outcome %s, output %s; want VALIDATION_ERROR at %s, rule %s", res.Outcome, res.Output, c.field, c.rule)
			}
		})
	}
	// Wildcards are not refused, nor a class longer than a name may be.
	t.Run("valid wildcards", func(t *testing.T) {
		d := write(t)
		d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/*"}, Recursive: true}
		d.Effects.Filesystem.Create = []string{"/sandbox/[ab].txt"}
		d.Effects.Filesystem.Modify = []string{"/sandbox/?.txt"}
		d.Preconditions.PathsExist = []string{"/sandbox/*.txt", "/sandbox/[^c].t?t", "/sandbox/[" + strings.Repeat("\u00e9", 130) + "b].txt"}
		res := v.run(agent, descriptorJSON(t, d))
		wantOutcome(t, res, executor.Completed)
	})
}
