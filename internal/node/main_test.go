package node_test

import (
	"os"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// TestMain shares one build of the snapnode binary among the tests that
// run it as a child process.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
