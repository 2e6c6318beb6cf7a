package config_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// The agent's review and archive settings follow the one precedence, and
// the history key is read like the API key: a private file, here of 64
// hexadecimal digits.
func TestAgentReviewAndArchiveSettings(t *testing.T) {
	key := strings.Repeat("ab", 32)
	private := writeFile(t, "history.key", key+"\n", 0o600)
	file := writeFile(t, "node.toml", "[agent]\nreview = true\nreview_model = \"file-judge\"\nsensitive = true\nhistory_key_file = \""+private+"\"\n", 0o600)
	c, err := load(t, []string{"--config", file}, map[string]string{"SNAPNODE_AGENT_REVIEW_MODEL": "env-judge"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Agent.Review || c.Agent.ReviewModel != "env-judge" || !c.Agent.Sensitive || c.Agent.HistoryKeyFile != private {
		t.Fatalf("agent settings %+v", c.Agent)
	}
	if c, err := load(t, []string{"--config", file, "--agent-review=false"}, nil); err != nil || c.Agent.Review {
		t.Fatalf("the flag over the file: review %v, %v", c.Agent.Review, err)
	}
	got, err := c.HistoryKey()
	if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{0xab}, 32)) {
		t.Fatalf("HistoryKey = %x, %v", got, err)
	}
	if _, err := load(t, nil, map[string]string{"SNAPNODE_AGENT_SENSITIVE": "true"}); err == nil ||
		!strings.Contains(err.Error(), "config: agent.sensitive (SNAPNODE_AGENT_SENSITIVE): want agent.history_key_file set") {
		t.Fatalf("sensitive without a key: %v", err)
	}
	for _, tc := range []struct{ name, content, want string }{
		{"short", "abcd\n", "want 64 hexadecimal digits"},
		{"not hex", strings.Repeat("zz", 32), "want 64 hexadecimal digits"},
		{"empty", "\n", "want a key; got an empty file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Default()
			c.Agent.HistoryKeyFile = writeFile(t, "k", tc.content, 0o600)
			if _, err := c.HistoryKey(); err == nil || !strings.Contains(err.Error(), "agent.history_key_file (SNAPNODE_AGENT_HISTORY_KEY_FILE)") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("HistoryKey: %v", err)
			}
		})
	}
	c = config.Default()
	c.Agent.HistoryKeyFile = writeFile(t, "open.key", key, 0o644)
	if _, err := c.HistoryKey(); err == nil || !strings.Contains(err.Error(), "too open") {
		t.Fatalf("a 0644 key file: %v", err)
	}
	if k, err := config.Default().HistoryKey(); k != nil || err != nil {
		t.Fatalf("no key file: %x, %v", k, err)
	}
}
