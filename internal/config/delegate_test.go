package config_test

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
)

// The delegate comes from the file or the environment, the environment
// winning; a delegate alone enables the agent.
func TestAgentDelegateSettings(t *testing.T) {
	k1, k2 := mustKey(t), mustKey(t)
	a1, a2 := k1.Address(identity.Mainnet), k2.Address(identity.Mainnet)
	file := writeFile(t, "delegate.toml", "[agent]\ndelegate = \""+a1+"\"\n", 0o600)
	c, err := load(t, []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Delegate != a1 || !c.AgentEnabled() {
		t.Errorf("from the file: delegate %q, agent enabled %v", c.Agent.Delegate, c.AgentEnabled())
	}
	c, err = load(t, []string{"--config", file}, map[string]string{"SNAPNODE_AGENT_DELEGATE": a2})
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Delegate != a2 {
		t.Errorf("the environment over the file: delegate %q, want %q", c.Agent.Delegate, a2)
	}
	if c, _ := load(t, nil, nil); c.Agent.Delegate != "" {
		t.Errorf("default delegate %q, want none", c.Agent.Delegate)
	}
}

// agent.delegate_private_endpoints is off unless the file, the
// environment or the flag turns it on, in that order of precedence.
func TestAgentDelegatePrivateEndpoints(t *testing.T) {
	addr := mustKey(t).Address(identity.Mainnet)
	env := map[string]string{"SNAPNODE_AGENT_DELEGATE": addr}
	if c, err := load(t, nil, env); err != nil || c.Agent.DelegatePrivateEndpoints {
		t.Errorf("default: %v, %v; want off", c.Agent.DelegatePrivateEndpoints, err)
	}
	file := writeFile(t, "private.toml", "[agent]\ndelegate_private_endpoints = true\n", 0o600)
	if c, err := load(t, []string{"--config", file}, env); err != nil || !c.Agent.DelegatePrivateEndpoints {
		t.Errorf("from the file: %v, %v", c.Agent.DelegatePrivateEndpoints, err)
	}
	env["SNAPNODE_AGENT_DELEGATE_PRIVATE_ENDPOINTS"] = "false"
	if c, err := load(t, []string{"--config", file}, env); err != nil || c.Agent.DelegatePrivateEndpoints {
		t.Errorf("the environment over the file: %v, %v", c.Agent.DelegatePrivateEndpoints, err)
	}
	if c, err := load(t, []string{"--config", file, "--agent-delegate-private-endpoints=true"}, env); err != nil || !c.Agent.DelegatePrivateEndpoints {
		t.Errorf("the flag over the environment: %v, %v", c.Agent.DelegatePrivateEndpoints, err)
	}
}

func TestAgentDelegateRejectsBadSettings(t *testing.T) {
	addr := mustKey(t).Address(identity.Mainnet)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"not an address", nil, map[string]string{"SNAPNODE_AGENT_DELEGATE": "bob"},
			`config: agent.delegate (SNAPNODE_AGENT_DELEGATE): want the P2TR address (bc1p…) of a SNAP agent; got "bob"`},
		{"and a worker", nil, map[string]string{"SNAPNODE_AGENT_DELEGATE": addr, "SNAPNODE_AGENT_COMMAND": "w"},
			"config: agent.delegate (SNAPNODE_AGENT_DELEGATE), agent.command (SNAPNODE_AGENT_COMMAND) and agent.llm_url (--llm-url): want one of them (a delegate, an external worker or a model server); got more"},
		{"and a model server", []string{"--llm-url", "http://127.0.0.1:11434/v1", "--llm-model", "m"}, map[string]string{"SNAPNODE_AGENT_DELEGATE": addr},
			"want one of them (a delegate, an external worker or a model server); got more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}

func mustKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
