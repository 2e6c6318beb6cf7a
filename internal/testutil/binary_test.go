package testutil_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/internal/testutil"
)

// TestBinarySecpImplementation checks that the node the tests start is
// built with the test binary's secp256k1 implementation: a benchmark run
// with -tags libsecp256k1 measures a node that uses it.
func TestBinarySecpImplementation(t *testing.T) {
	out, err := exec.Command(testutil.Binary(t), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("snapnode version: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	if want := "secp256k1=" + secp.Implementation; !strings.HasSuffix(line, want) {
		t.Errorf("snapnode version = %q, want it to end with %q", line, want)
	}
}
