package snap_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// TestIsMediaType reads testdata/media_types.json: media types with
// parameters (RFC 2045) and in any letter case are valid; what
// mime.ParseMediaType refuses, what has no subtype, surrounding space,
// control or non-ASCII characters, or more than 128 characters is not.
func TestIsMediaType(t *testing.T) {
	raw, err := os.ReadFile("testdata/media_types.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases struct{ Valid, Invalid []string }
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	cases.Valid = append(cases.Valid, "application/"+strings.Repeat("x", 116))
	cases.Invalid = append(cases.Invalid, "application/"+strings.Repeat("x", 117),
		"text/plain; charset="+strings.Repeat("x", 109))
	for _, s := range cases.Valid {
		if !snap.IsMediaType(s) {
			t.Errorf("IsMediaType(%q) = false, want true", s)
		}
	}
	for _, s := range cases.Invalid {
		if snap.IsMediaType(s) {
			t.Errorf("IsMediaType(%q) = true, want false", s)
		}
	}
}
