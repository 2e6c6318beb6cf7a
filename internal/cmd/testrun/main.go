// Command testrun is the project's test command: it runs `go test -json`
// with its arguments (./... when there are none), prints one line per
// package as it finishes and every failing test's output, and ends with
// one line that counts what ran and says what was skipped and the command
// that runs it. Its exit status is go test's.
//
//	go run ./internal/cmd/testrun -race ./...
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/snapnode/snapnode/internal/testreport"
)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"./..."}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, args))
}

func run(ctx context.Context, args []string) int {
	// The race detector needs cgo, which Go turns off where there is no C
	// compiler: the tests then run without it rather than not at all.
	var notes []string
	if slices.Contains(args, "-race") && !cgo(ctx) {
		args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == "-race" })
		notes = append(notes, "ran without -race: the race detector needs cgo and a C compiler (apt-get install gcc)")
		fmt.Fprintln(os.Stderr, "testrun: "+notes[0])
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testrun: go test:", err)
		return 2
	}
	rep := testreport.New(os.Stdout, testreport.ProjectNeeds())
	for _, n := range notes {
		rep.Note(n)
	}
	readErr := rep.Read(out)
	waitErr := cmd.Wait()
	rep.Summary()
	if readErr != nil {
		fmt.Fprintln(os.Stderr, "testrun: reading go test's output:", readErr)
		return 2
	}
	var exit *exec.ExitError
	switch {
	case errors.As(waitErr, &exit):
		return exit.ExitCode()
	case waitErr != nil:
		fmt.Fprintln(os.Stderr, "testrun: go test:", waitErr)
		return 2
	case rep.Failed():
		return 1
	}
	return 0
}

// cgo reports whether go builds with cgo here (CGO_ENABLED, which Go sets
// to 0 when it finds no C compiler).
func cgo(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "go", "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(out)) == "1"
}
