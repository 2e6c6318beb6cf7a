package config_test

import (
	"strings"
	"testing"
	"time"
)

// reconcile_after comes from the flag, the environment or the file, in
// that order, defaults to 5 minutes, and is refused under a second.
func TestReconcileAfter(t *testing.T) {
	file := writeFile(t, "reconcile.toml", "reconcile_after = \"2m\"\n", 0o600)
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want time.Duration
	}{
		{"default", nil, nil, 5 * time.Minute},
		{"file", []string{"--config", file}, nil, 2 * time.Minute},
		{"environment over the file", []string{"--config", file}, map[string]string{"SNAPNODE_RECONCILE_AFTER": "30s"}, 30 * time.Second},
		{"flag over the environment", []string{"--config", file, "--reconcile-after", "10s"}, map[string]string{"SNAPNODE_RECONCILE_AFTER": "30s"}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.args, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.ReconcileAfter.Duration; got != tc.want {
				t.Errorf("reconcile_after %v, want %v", got, tc.want)
			}
		})
	}
	_, err := load(t, []string{"--reconcile-after", "500ms"}, nil)
	if err == nil || !strings.Contains(err.Error(), "config: --reconcile-after: reconcile_after 500ms: want at least 1s") {
		t.Errorf("reconcile_after 500ms: %v", err)
	}
}
