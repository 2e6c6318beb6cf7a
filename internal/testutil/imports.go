package testutil

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Import is one import of a production (non-test) Go file.
type Import struct {
	File, Path string
}

// ProductionImports returns the imports of the non-test Go files in the
// test's package folder (the working directory of `go test`), for tests
// that keep a package's dependencies pointing the way the design says.
func ProductionImports(tb testing.TB) []Import {
	tb.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		tb.Fatal(err)
	}
	var out []Import
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			tb.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out = append(out, Import{File: f, Path: path})
		}
	}
	return out
}
