package main

import (
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// The commands are flags and wiring: they reach agents through the client
// package and the node's stores through node.OpenStores, never through
// the transports' or the stores' packages themselves.
func TestCommandsStayThin(t *testing.T) {
	forbidden := map[string]string{
		"github.com/snapnode/snapnode/relay":          "agents are reached through package client",
		"github.com/snapnode/snapnode/snapnostr":      "agents are reached through package client",
		"github.com/snapnode/snapnode/snaphttp":       "agents are reached through package client",
		"github.com/snapnode/snapnode/internal/sqldb": "the node's stores are opened by node.OpenStores",
		"github.com/snapnode/snapnode/tasks/sqlstore": "the node's stores are opened by node.OpenStores",
	}
	for _, imp := range testutil.ProductionImports(t) {
		if why, ok := forbidden[imp.Path]; ok {
			t.Errorf("%s imports %s: %s", imp.File, imp.Path, why)
		}
	}
}
