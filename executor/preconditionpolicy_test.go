package executor_test

import (
	"encoding/json"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestPreconditionsJudgedByPolicy: the paths a peer's paths_exist looks
// at are judged as listings of their folder, as what the answer reveals
// is what a listing would. Before, the policy judged the operation's path
// alone (a read of /sandbox/ok.txt), and a precondition under a folder it
// forbids answered whether a file was there, and by wildcards which
// names it had: completed or PRECONDITION_FAILED, an oracle of the
// forbidden folder. Now the answer is the same whether the file exists
// or not: the action is refused for a folder the precondition names
// itself, and a wildcard does not see into a folder it reaches.
func TestPreconditionsJudgedByPolicy(t *testing.T) {
	outcome := func(t *testing.T, present bool, pattern string) string {
		v := newEnv(t, testdb.SQLite(t))
		eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
		if err != nil {
			t.Fatal(err)
		}
		v.holder.Swap(eng)
		v.file("ok.txt", "ok\n")
		if present {
			v.file("secrets/salary.md", "42\n")
		} else {
			v.file("secrets/other.md", "0\n")
		}
		d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/ok.txt"})
		d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
		d.Preconditions.PathsExist = []string{pattern}
		res := v.run(agent, descriptorJSON(t, d))
		var f executor.Failure
		if res.Outcome == executor.Failed {
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
		}
		return string(res.Outcome) + " " + f.Code
	}
	for _, tc := range []struct{ pattern, want string }{
		{"/sandbox/secrets/salary.md", "failed ACTION_NOT_ALLOWED"},
		{"/sandbox/secrets/sal*", "failed ACTION_NOT_ALLOWED"},
		{"/sandbox/*/salary.md", "failed PRECONDITION_FAILED"},
		{"/sandbox/s*/s*.md", "failed PRECONDITION_FAILED"},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			with, without := outcome(t, true, tc.pattern), outcome(t, false, tc.pattern)
			if with != without {
				t.Errorf("the answer tells whether secrets/salary.md exists: %q with it, %q without", with, without)
			}
			if with != tc.want {
				t.Errorf("outcome %q, want %q", with, tc.want)
			}
		})
	}
}
