package testreport_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testreport"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden reads a real `go test -json` stream (testdata/run.jsonl: a
// module with a failing test, skips of two kinds the project knows and one
// it does not, and a package that does not build) and compares what a
// person sees with testdata/run.golden.
func TestGolden(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "run.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	rep := testreport.New(&out, testreport.ProjectNeeds())
	if err := rep.Read(in); err != nil {
		t.Fatal(err)
	}
	rep.Summary()
	if !rep.Failed() {
		t.Error("Failed() = false for a run with a failing test and a broken build")
	}
	golden := filepath.Join("testdata", "run.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out.String() != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, out.String())
	}
}

// TestSummaryLine: the last line counts what ran and names, for each kind
// of skip, the command that enables it; a clean run says nothing skipped.
func TestSummaryLine(t *testing.T) {
	needs := []testreport.Need{{Name: "PostgreSQL", Marker: "PostgreSQL tests skipped", Enable: "scripts/test-all"}}
	for _, tc := range []struct {
		name   string
		events []testreport.Event
		notRun []string
		want   string
	}{
		{"clean", []testreport.Event{
			{Action: "pass", Package: "p", Test: "TestA"},
			{Action: "pass", Package: "p"},
		}, nil, "ran 1 test in 1 package: 1 passed, 0 failed; nothing skipped"},
		{"skips", []testreport.Event{
			{Action: "pass", Package: "p", Test: "TestA"},
			{Action: "output", Package: "p", Test: "TestPG", Output: "    pg_test.go:9: PostgreSQL tests skipped: set …\n"},
			{Action: "skip", Package: "p", Test: "TestPG"},
			{Action: "output", Package: "q", Test: "TestX", Output: "    x_test.go:3: no chromium\n"},
			{Action: "skip", Package: "q", Test: "TestX"},
		}, nil, "ran 1 test in 2 packages: 1 passed, 0 failed; skipped 2 (1 need PostgreSQL, 1 for other reasons (above)): run scripts/test-all for PostgreSQL"},
		{"a run left out", []testreport.Event{
			{Action: "pass", Package: "p", Test: "TestA"},
		}, []string{"the crypto tests with -tags libsecp256k1 (apt-get install libsecp256k1-dev)"},
			"ran 1 test in 1 package: 1 passed, 0 failed; nothing skipped; not run: the crypto tests with -tags libsecp256k1 (apt-get install libsecp256k1-dev)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			rep := testreport.New(&out, needs)
			for _, ev := range tc.events {
				rep.Add(ev)
			}
			for _, n := range tc.notRun {
				rep.NotRun(n)
			}
			rep.Summary()
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if got := lines[len(lines)-1]; got != tc.want {
				t.Errorf("last line\n got %q\nwant %q", got, tc.want)
			}
			if rep.Failed() {
				t.Error("Failed() = true without a failure")
			}
		})
	}
}

// FuzzRead: any input is read without a panic, and a Summary follows.
func FuzzRead(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "run.jsonl")); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"Action":"skip","Package":"p","Test":"T"}` + "\nnot json\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		rep := testreport.New(&out, testreport.ProjectNeeds())
		_ = rep.Read(bytes.NewReader(b))
		rep.Summary()
		if !strings.Contains(out.String(), "ran ") {
			t.Fatalf("no summary line in %q", out.String())
		}
	})
}

// TestChildProcessEntries: a test that only runs as another test's child
// process skips in a normal run; it is not reported as left out.
func TestChildProcessEntries(t *testing.T) {
	var out bytes.Buffer
	rep := testreport.New(&out, testreport.ProjectNeeds())
	rep.Add(testreport.Event{Action: "pass", Package: "p", Test: "TestCrash"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestCrashWriter", Output: "    crash_test.go:38: the writer process of TestCrashSIGKILL\n"})
	rep.Add(testreport.Event{Action: "skip", Package: "p", Test: "TestCrashWriter"})
	rep.Summary()
	if !strings.HasSuffix(strings.TrimSpace(out.String()), "1 passed, 0 failed; nothing skipped") {
		t.Errorf("a child-process entry counted as skipped:\n%s", out.String())
	}
}

// TestNothingRan: a run that stopped before any package says so rather
// than "nothing skipped", and the notes come before the last line.
func TestNothingRan(t *testing.T) {
	var out bytes.Buffer
	rep := testreport.New(&out, testreport.ProjectNeeds())
	rep.Note("ran without -race")
	rep.Summary()
	got := out.String()
	if !strings.Contains(got, "note: ran without -race") || !strings.HasSuffix(strings.TrimSpace(got), "no test ran: go test stopped before any package (its errors are above)") {
		t.Errorf("summary of an empty run:\n%s", got)
	}
}

// TestReadAs: a second run of a package in another build is counted apart,
// and its failure names the build.
func TestReadAs(t *testing.T) {
	var out bytes.Buffer
	rep := testreport.New(&out, testreport.ProjectNeeds())
	first := `{"Action":"pass","Package":"m/identity","Test":"TestA"}
{"Action":"pass","Package":"m/identity"}
`
	second := `{"Action":"fail","Package":"m/identity","Test":"TestA"}
{"Action":"fail","Package":"m/identity"}
`
	if err := rep.Read(strings.NewReader(first)); err != nil {
		t.Fatal(err)
	}
	if err := rep.ReadAs(strings.NewReader(second), "[-tags libsecp256k1]"); err != nil {
		t.Fatal(err)
	}
	rep.Summary()
	got := out.String()
	if !strings.Contains(got, "m/identity [-tags libsecp256k1].TestA") {
		t.Errorf("the failure does not name its build:\n%s", got)
	}
	if !strings.HasSuffix(strings.TrimSpace(got), "ran 2 tests in 2 packages: 1 passed, 1 failed; nothing skipped") {
		t.Errorf("last line of two builds of one package:\n%s", got)
	}
}

// A test binary stopped by go test's -timeout leaves the test it was
// running with no pass or fail: the report names it as failed, with the
// panic and the tests that were running, however long the goroutine dump
// after them, and the run fails.
func TestUnfinishedTestNamed(t *testing.T) {
	var out bytes.Buffer
	rep := testreport.New(&out, nil)
	rep.Add(testreport.Event{Action: "pass", Package: "p", Test: "TestFast"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: "=== RUN   TestHang\n"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: "    a_test.go:4: waiting\n"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: "panic: test timed out after 10m0s\n"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: "\trunning tests:\n"})
	rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: "\t\tTestHang (10m0s)\n"})
	for i := range 1000 {
		rep.Add(testreport.Event{Action: "output", Package: "p", Test: "TestHang", Output: fmt.Sprintf("goroutine %d [select]:\n", i)})
	}
	rep.Add(testreport.Event{Action: "output", Package: "p", Output: "FAIL\tp\t600.1s\n"})
	rep.Add(testreport.Event{Action: "fail", Package: "p", Elapsed: 600.1})
	rep.Summary()
	got := out.String()
	for _, want := range []string{
		"=== FAIL p.TestHang (it did not finish)\n",
		"panic: test timed out after 10m0s\n",
		"\t\tTestHang (10m0s)\n",
		"FAIL p 600.1s (1 passed, 1 failed)\n",
		"1 failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	if !rep.Failed() {
		t.Error("Failed() = false after a test that did not finish")
	}
}
