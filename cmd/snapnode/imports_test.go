package main

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, ok := forbidden[path]; ok {
				t.Errorf("%s imports %s: %s", f, path, why)
			}
		}
	}
}
