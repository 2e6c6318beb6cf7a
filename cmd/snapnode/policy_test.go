package main

import (
	"strings"
	"testing"
)

func TestPolicyCheck(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SNAPNODE_DATA_DIR", dir)
	proposal := func(action, args string) string {
		return `{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b","reasoning":"r",` +
			`"action":"` + action + `","args":` + args + `}`
	}
	write := writeFile(t, dir, "write.json", proposal("WRITE_FILE", `{"path":"/sandbox/a.txt","content":"x"}`), 0o600)
	del := writeFile(t, dir, "delete.json", proposal("DELETE_FILE", `{"path":"/sandbox/a.txt"}`), 0o600)
	cmd := writeFile(t, dir, "cmd.json", proposal("run_command", `{"command":"ls"}`), 0o600)
	outside := writeFile(t, dir, "outside.json", proposal("WRITE_FILE", `{"path":"/etc/a.txt","content":"x"}`), 0o600)
	readOnly := writeFile(t, dir, "ro.cedar", `permit (principal, action in Action::"read", resource in Path::"/sandbox/");`, 0o600)
	broken := writeFile(t, dir, "broken.cedar", "permit (principal, action, resource)\n", 0o600)
	// A forbid naming an agent of one network, which a node of the other
	// never sees a request from: refused on that node.
	const mainAgent, testAgent = "bc1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqm72e9v", "tb1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqvkuklr"
	forbid := func(agent string) string {
		return "permit (principal, action, resource);\nforbid (principal == Agent::\"" + agent + "\", action, resource);\n"
	}
	mainForbid := writeFile(t, dir, "main.cedar", forbid(mainAgent), 0o600)
	testForbid := writeFile(t, dir, "test.cedar", forbid(testAgent), 0o600)

	tests := []struct {
		name string
		args []string
		code int
		want []string // in stdout, or in stderr for codes 1 and 2
	}{
		{"write promoted", []string{"--from", testAddress, write}, exitOK, []string{"WRITE_FILE", "decision: PERMIT"}},
		{"delete confirmed", []string{"--from", testAddress, del}, exitPolicyConfirm, []string{"decision: CONFIRM", "destructive"}},
		{"run_command refused", []string{"--from", testAddress, cmd}, exitPolicyDeny, []string{"ACTION_NOT_ALLOWED", "refused before the policy"}},
		{"path outside refused", []string{"--from", testAddress, outside}, exitPolicyDeny, []string{"/args/path", "pattern"}},
		{"read-only policy denies write", []string{"--from", testAddress, "--policy", readOnly, write}, exitPolicyDeny, []string{"decision: DENY", "ro.cedar"}},
		{"stdin", []string{"--from", testAddress, "-"}, exitOK, []string{"decision: PERMIT"}},
		{"broken policy", []string{"--from", testAddress, "--policy", broken, write}, exitFail, []string{"broken.cedar:"}},
		{"mainnet agent on mainnet", []string{"--from", mainAgent, "--policy", mainForbid, write}, exitPolicyDeny, []string{"decision: DENY", "main.cedar:2:1"}},
		{"testnet agent on mainnet", []string{"--from", testAddress, "--policy", testForbid, write}, exitFail,
			[]string{"test.cedar:2:1", testAgent, "testnet address", "runs on mainnet", mainAgent, "judges for a mainnet node", "give --testnet"}},
		{"testnet agent on testnet", []string{"--testnet", "--from", testAgent, "--policy", testForbid, write}, exitPolicyDeny, []string{"decision: DENY", "test.cedar:2:1"}},
		{"mainnet agent on testnet", []string{"--testnet", "--from", testAgent, "--policy", mainForbid, write}, exitFail,
			[]string{"main.cedar:2:1", mainAgent, "mainnet address", "runs on testnet", testAgent, "judges for a testnet node"}},
		// Without the node's settings (on another machine, say): the
		// proposer's address says which network was meant.
		{"testnet --from on mainnet", []string{"--from", testAgent, write}, exitUsage, []string{"--from", "testnet address", "a mainnet node", "give --testnet"}},
		{"mainnet --from on testnet", []string{"--testnet", "--from", mainAgent, write}, exitUsage, []string{"--from", "mainnet address", "a testnet node"}},
		{"no --from", []string{write}, exitUsage, []string{"--from"}},
		{"bad --from", []string{"--from", "bc1qnotp2tr", write}, exitUsage, []string{"--from"}},
		{"no file", []string{"--from", testAddress}, exitUsage, []string{"FILE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stdin := ""
			if tc.name == "stdin" {
				stdin = proposal("WRITE_FILE", `{"path":"/sandbox/a.txt","content":"x"}`)
			}
			r := runCLI(t, stdin, append([]string{"policy", "check"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("want exit %d, got %s", tc.code, r)
			}
			out := r.stdout
			if tc.code == exitFail || tc.code == exitUsage {
				out = r.stderr
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q in\n%s", w, r)
				}
			}
		})
	}
	if r := runCLI(t, "", "policy"); r.code != exitUsage || !strings.Contains(r.stderr, "policy check") {
		t.Errorf("bare policy: %s", r)
	}
}
