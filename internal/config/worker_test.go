package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The external worker's settings come from the file or the environment,
// the environment winning; a worker alone enables the agent.
func TestAgentWorkerSettings(t *testing.T) {
	file := writeFile(t, "worker.toml", `
[agent]
command = ["python3", "/opt/workers/w.py", "--fast"]
command_dir = "/var/lib/worker"
command_env = ["GREETING=hello, world", "MODE=test"]
step_timeout = "45s"
`, 0o600)
	env := map[string]string{
		"SNAPNODE_AGENT_COMMAND":      "node\n/opt/workers/w.js\n",
		"SNAPNODE_AGENT_COMMAND_DIR":  "/srv/worker",
		"SNAPNODE_AGENT_COMMAND_ENV":  "A=1\nB=x,y",
		"SNAPNODE_AGENT_STEP_TIMEOUT": "5s",
	}
	c, err := load(t, []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agent
	if !slices.Equal(a.Command, []string{"python3", "/opt/workers/w.py", "--fast"}) || a.CommandDir != "/var/lib/worker" ||
		!slices.Equal(a.CommandEnv, []string{"GREETING=hello, world", "MODE=test"}) || a.StepTimeout.Duration != 45*time.Second || !c.AgentEnabled() {
		t.Errorf("from the file: %+v", a)
	}
	c, err = load(t, []string{"--config", file}, env)
	if err != nil {
		t.Fatal(err)
	}
	a = c.Agent
	if !slices.Equal(a.Command, []string{"node", "/opt/workers/w.js"}) || a.CommandDir != "/srv/worker" ||
		!slices.Equal(a.CommandEnv, []string{"A=1", "B=x,y"}) || a.StepTimeout.Duration != 5*time.Second {
		t.Errorf("the environment over the file: %+v", a)
	}
	if c, _ := load(t, nil, nil); c.AgentEnabled() || c.Agent.StepTimeout.Duration != 0 || len(c.Agent.Command) != 0 {
		t.Errorf("defaults: %+v", c.Agent)
	}
}

func TestAgentWorkerRejectsBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"both a worker and a model server", []string{"--llm-url", "http://127.0.0.1:11434/v1", "--llm-model", "m"}, map[string]string{"SNAPNODE_AGENT_COMMAND": "w"},
			"config: agent.command (SNAPNODE_AGENT_COMMAND) and agent.llm_url (--llm-url): want one of them (an external worker or a model server); got both"},
		{"bad variable", nil, map[string]string{"SNAPNODE_AGENT_COMMAND": "w", "SNAPNODE_AGENT_COMMAND_ENV": "OK=1\nNO VALUE"},
			`config: agent.command_env[1] (SNAPNODE_AGENT_COMMAND_ENV): want NAME=value, NAME of letters, digits and _; got "NO VALUE"`},
		{"the node's own variable", nil, map[string]string{"SNAPNODE_AGENT_COMMAND": "w", "SNAPNODE_AGENT_COMMAND_ENV": "snapnode_llm_api_key=x"},
			`config: agent.command_env[0] (SNAPNODE_AGENT_COMMAND_ENV): want a variable that is not the node's own (SNAPNODE_…: keys, the API key); got "snapnode_llm_api_key"`},
		{"a worker reviewing itself", []string{"--agent-review"}, map[string]string{"SNAPNODE_AGENT_COMMAND": "w"},
			"config: agent.review (--agent-review): want it with a model server (agent.llm_url), whose model supervises; an external worker or a delegate would review its own work"},
		{"a delegate reviewing itself", nil, map[string]string{"SNAPNODE_AGENT_REVIEW": "true", "SNAPNODE_AGENT_DELEGATE": "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"},
			"config: agent.review (SNAPNODE_AGENT_REVIEW): want it with a model server"},
		{"negative step time-out", nil, map[string]string{"SNAPNODE_AGENT_STEP_TIMEOUT": "-1s"},
			`config: agent.step_timeout (SNAPNODE_AGENT_STEP_TIMEOUT): want 0 (the request time-out) or more; got -1s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.args, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}
