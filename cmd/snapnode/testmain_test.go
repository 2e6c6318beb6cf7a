package main

import (
	"os"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// TestMain shares one build of the binary among the tests that run it.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
