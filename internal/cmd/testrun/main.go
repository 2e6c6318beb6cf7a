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
	args = withTimeout(args)
	rep := testreport.New(os.Stdout, testreport.ProjectNeeds())
	for _, n := range notes {
		rep.Note(n)
	}
	code := goTest(ctx, rep, "", args)
	if slices.Contains(args, "./...") {
		withCgo := cgo(ctx)
		libsecp := withCgo && exec.CommandContext(ctx, "pkg-config", "--exists", "libsecp256k1").Run() == nil
		if tagged, why := libsecpRun(args, withCgo, libsecp); why != "" {
			rep.NotRun(why)
		} else {
			code = max(code, goTest(ctx, rep, "[-tags libsecp256k1]", tagged))
		}
	}
	rep.Summary()
	if code == 0 && rep.Failed() {
		return 1
	}
	return code
}

// defaultTimeout is go test's -timeout when none is given: a package's
// test binary runs at most this long. go test's own 10 minutes is less
// than the node's integration tests take with -race on a small, busy
// machine (2 cores with other work: 8 to 10 minutes); a test that hangs is
// still stopped, and named (testreport reports a test that did not finish).
const defaultTimeout = "30m"

// withTimeout returns args with -timeout defaultTimeout first, unless
// they give a -timeout of their own.
func withTimeout(args []string) []string {
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "timeout" || name == "test.timeout") {
			return args
		}
	}
	return append([]string{"-timeout", defaultTimeout}, args...)
}

// libsecpRun returns the arguments of the second run, after one with args:
// the tests of the packages whose signatures, keys and NIP-44 keys the tag
// libsecp256k1 changes, with the first run's -race and -short. When cgo
// is off or pkg-config finds no libsecp256k1 it returns instead why that
// run is left out, for the summary's last line.
func libsecpRun(args []string, cgo, libsecp bool) (tagged []string, why string) {
	switch {
	case !cgo:
		return nil, "the crypto tests with -tags libsecp256k1 (they need cgo and a C compiler)"
	case !libsecp:
		return nil, "the crypto tests with -tags libsecp256k1 (pkg-config finds no libsecp256k1: apt-get install libsecp256k1-dev)"
	}
	tagged = []string{"-tags", "libsecp256k1"}
	for _, a := range args {
		if a == "-race" || a == "-short" {
			tagged = append(tagged, a)
		}
	}
	return append(tagged, "./internal/secp", "./identity", "./snap", "./relay", "./snapnostr"), ""
}

// goTest runs go test -json with args, its events going to rep with label
// after each package's name, and returns its exit status (2 when it could
// not run or be read).
func goTest(ctx context.Context, rep *testreport.Report, label string, args []string) int {
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
	readErr := rep.ReadAs(out, label)
	waitErr := cmd.Wait()
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
	}
	return 0
}

// cgo reports whether go builds with cgo here (CGO_ENABLED, which Go sets
// to 0 when it finds no C compiler).
func cgo(ctx context.Context) bool {
	out, err := exec.CommandContext(ctx, "go", "env", "CGO_ENABLED").Output()
	return err == nil && strings.TrimSpace(string(out)) == "1"
}
