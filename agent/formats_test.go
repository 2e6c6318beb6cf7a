package agent_test

import (
	"slices"
	"testing"

	"github.com/snapnode/snapnode/agent"
)

// TestAcceptedFormatsIsACopy: a caller changing the list it got (a job
// request's metadata, say) does not change what the next job request
// names.
func TestAcceptedFormatsIsACopy(t *testing.T) {
	v := agent.AcceptedFormats()
	want := slices.Clone(v)
	v[0] = "ANYTHING"
	if got := agent.AcceptedFormats(); !slices.Equal(got, want) || slices.Contains(got, "ANYTHING") {
		t.Fatalf("AcceptedFormats() = %q after a caller changed its copy", got)
	}
}
