package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Event is one line of `go test -json` (cmd/test2json's TestEvent, with
// the build events Go 1.24 added).
type Event struct {
	Time        time.Time `json:"Time"`
	Action      string    `json:"Action"`
	Package     string    `json:"Package"`
	ImportPath  string    `json:"ImportPath"` // build-output and build-fail
	Test        string    `json:"Test"`
	Elapsed     float64   `json:"Elapsed"`
	Output      string    `json:"Output"`
	FailedBuild string    `json:"FailedBuild"`
}

// A Need is something some tests require and a machine may lack: the
// skip messages that mention Marker are counted under Name, and Enable is
// the command that provides it.
type Need struct {
	Name   string
	Marker string
	Enable string
	// Entry marks a test that is the entry point of a child process
	// another test starts: its skip in a normal run is no test left out,
	// and it is not counted as skipped.
	Entry bool
}

// ProjectNeeds are this project's: what its tests skip without, and how
// to get it. The markers are the skip messages of internal/testdb,
// internal/jsinterop and internal/snapref.
func ProjectNeeds() []Need {
	return []Need{
		{Name: "PostgreSQL", Marker: "PostgreSQL tests skipped", Enable: "scripts/test-all"},
		{Name: "the npm packages of interop/js", Marker: "run npm ci in interop/js", Enable: "scripts/test-all"},
		{Name: "Chromium", Marker: "no Chromium found", Enable: "scripts/test-all"},
		{Name: "the SNAP reference vectors", Marker: "snap-reference vectors not found", Enable: "the specification's test vectors and schemas in $SNAPNODE_SNAP_REFERENCE (see the README)"},
		{Name: "a run without -race", Marker: "run without -race", Enable: "go test ./relay/embedded (without -race)"},
		{Name: "a run without -short", Marker: "not with -short", Enable: "go test without -short"},
		{Name: "a parent test", Marker: "process of Test", Entry: true},
	}
}

// maxKept bounds the output kept per running test (a test that floods its
// output keeps its last lines).
const maxKept = 200

// Report accumulates the events of one `go test -json` run.
type Report struct {
	w     io.Writer
	needs []Need

	running map[string][]string // output of tests still running, by package and name
	panics  map[string][]string // the panic a running test printed, and the lines after it
	pkgs    map[string]*pkgCount
	order   []string
	pass    int
	fail    []string // package.Test
	skips   map[string]int
	other   []string // skip messages no Need matched
	build   int      // packages that did not build
	notes   []string // said with the summary
	notRun  []string // runs left out, said in the last line
}

// Note adds a remark to the summary (how the run differed from the one
// asked for).
func (rep *Report) Note(s string) { rep.notes = append(rep.notes, s) }

// NotRun names, in the last line, a run that was left out and how to get
// it, such as "the crypto tests with -tags libsecp256k1 (apt-get install
// libsecp256k1-dev)".
func (rep *Report) NotRun(s string) { rep.notRun = append(rep.notRun, s) }

type pkgCount struct{ pass, fail, skip int }

// New returns a Report that prints to w and groups skips by needs.
func New(w io.Writer, needs []Need) *Report {
	return &Report{w: w, needs: needs, running: map[string][]string{}, panics: map[string][]string{}, pkgs: map[string]*pkgCount{}, skips: map[string]int{}}
}

// Read consumes events until r ends, printing as packages finish. A line
// that is not an event (what go test prints outside -json) is passed
// through.
func (rep *Report) Read(r io.Reader) error { return rep.ReadAs(r, "") }

// ReadAs is Read for a run of packages that have run already in another
// build: label (such as "[-tags libsecp256k1]") follows each package's
// name, so that both runs are counted and a failure says which build it
// is from.
func (rep *Report) ReadAs(r io.Reader, label string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev Event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(rep.w, "%s\n", line)
			continue
		}
		if label != "" && ev.Package != "" {
			ev.Package += " " + label
		}
		rep.Add(ev)
	}
	return sc.Err()
}

// Add takes one event.
func (rep *Report) Add(ev Event) {
	switch ev.Action {
	case "build-output":
		fmt.Fprint(rep.w, ev.Output)
		return
	case "build-fail":
		rep.build++
		return
	}
	if ev.Package == "" {
		return
	}
	pc := rep.pkgs[ev.Package]
	if pc == nil {
		pc = &pkgCount{}
		rep.pkgs[ev.Package] = pc
		rep.order = append(rep.order, ev.Package)
	}
	if ev.Test == "" {
		if ev.Action == "fail" {
			rep.unfinished(ev.Package, pc)
		}
		rep.packageEvent(ev, pc)
		return
	}
	key := ev.Package + " " + ev.Test
	switch ev.Action {
	case "output":
		out := append(rep.running[key], ev.Output)
		if len(out) > maxKept {
			out = out[len(out)-maxKept:]
		}
		rep.running[key] = out
		// A panic (go test's -timeout among them) is kept apart: the
		// goroutine dump after it would push it out of the kept lines.
		if p, ok := rep.panics[key]; ok && len(p) < maxPanicLines {
			rep.panics[key] = append(p, ev.Output)
		} else if !ok && strings.HasPrefix(ev.Output, "panic: ") {
			rep.panics[key] = []string{ev.Output}
		}
	case "pass":
		rep.pass++
		pc.pass++
		delete(rep.running, key)
		delete(rep.panics, key)
	case "skip":
		pc.skip++
		rep.skipped(rep.running[key])
		delete(rep.running, key)
		delete(rep.panics, key)
	case "fail":
		pc.fail++
		rep.fail = append(rep.fail, ev.Package+"."+ev.Test)
		fmt.Fprintf(rep.w, "=== FAIL %s.%s\n", ev.Package, ev.Test)
		for _, l := range rep.running[key] {
			if !strings.HasPrefix(l, "=== ") {
				fmt.Fprint(rep.w, l)
			}
		}
		delete(rep.running, key)
		delete(rep.panics, key)
	}
}

// maxPanicLines bounds the lines of a panic kept for a running test: the
// panic, the tests that were running, the first goroutines.
const maxPanicLines = 30

// unfinished reports, when package pkg fails, its tests that never ended
// (its test binary stopped: go test's -timeout, a panic, an os.Exit) as
// failed, each with its panic if it printed one, else its last output.
func (rep *Report) unfinished(pkg string, pc *pkgCount) {
	var keys []string
	for key := range rep.running {
		if strings.HasPrefix(key, pkg+" ") {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		name := strings.TrimPrefix(key, pkg+" ")
		pc.fail++
		rep.fail = append(rep.fail, pkg+"."+name)
		fmt.Fprintf(rep.w, "=== FAIL %s.%s (it did not finish)\n", pkg, name)
		lines := rep.panics[key]
		if lines == nil {
			lines = rep.running[key]
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "=== ") {
				fmt.Fprint(rep.w, l)
			}
		}
		delete(rep.running, key)
		delete(rep.panics, key)
	}
}

// packageEvent prints a package's line when it finishes.
func (rep *Report) packageEvent(ev Event, pc *pkgCount) {
	switch ev.Action {
	case "output":
		// Package-level output (a panic outside a test, coverage, "ok"):
		// shown only with the failure it explains.
		if o := ev.Output; strings.HasPrefix(o, "panic:") {
			fmt.Fprint(rep.w, o)
		}
	case "pass", "fail":
		status := "ok  "
		if ev.Action == "fail" {
			status = "FAIL"
		}
		fmt.Fprintf(rep.w, "%s %s %.1fs (%d passed%s)\n", status, ev.Package, ev.Elapsed, pc.pass, counts(pc))
	case "skip":
		// No test files: nothing to say.
	}
}

func counts(pc *pkgCount) string {
	s := ""
	if pc.fail > 0 {
		s += fmt.Sprintf(", %d failed", pc.fail)
	}
	if pc.skip > 0 {
		s += fmt.Sprintf(", %d skipped", pc.skip)
	}
	return s
}

// skipped files a skip under the first Need its output names.
func (rep *Report) skipped(out []string) {
	text := strings.Join(out, "")
	for _, n := range rep.needs {
		if strings.Contains(text, n.Marker) {
			rep.skips[n.Name]++
			return
		}
	}
	msg := lastLine(text)
	if msg == "" {
		msg = "(no reason given)"
	}
	rep.other = append(rep.other, msg)
}

// lastLine is the last non-blank line of a test's output, without the
// "    file_test.go:12: " prefix and the "--- SKIP" line.
func lastLine(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if _, rest, ok := strings.Cut(l, ".go:"); ok {
			if _, msg, ok := strings.Cut(rest, ": "); ok {
				return msg
			}
		}
		return l
	}
	return ""
}

// Failed reports whether a test failed or a package did not build.
func (rep *Report) Failed() bool { return len(rep.fail) > 0 || rep.build > 0 }

// Summary prints the last line (and, before it, the failing tests by
// name and the skips no Need explains).
func (rep *Report) Summary() {
	if len(rep.fail) > 0 {
		fmt.Fprintf(rep.w, "\nfailed:\n  %s\n", strings.Join(rep.fail, "\n  "))
	}
	if len(rep.other) > 0 {
		slices.Sort(rep.other)
		fmt.Fprintf(rep.w, "\nskipped for other reasons:\n")
		for _, g := range group(rep.other) {
			fmt.Fprintf(rep.w, "  %s\n", g)
		}
	}
	skipped := len(rep.other)
	var parts []string
	enable := map[string][]string{}
	var enableOrder []string
	for _, n := range rep.needs {
		if c := rep.skips[n.Name]; c > 0 && !n.Entry {
			skipped += c
			parts = append(parts, fmt.Sprintf("%d need %s", c, n.Name))
			if _, ok := enable[n.Enable]; !ok {
				enableOrder = append(enableOrder, n.Enable)
			}
			enable[n.Enable] = append(enable[n.Enable], n.Name)
		}
	}
	if len(rep.other) > 0 {
		parts = append(parts, fmt.Sprintf("%d for other reasons (above)", len(rep.other)))
	}
	for _, n := range rep.notes {
		fmt.Fprintf(rep.w, "\nnote: %s\n", n)
	}
	if len(rep.pkgs) == 0 {
		fmt.Fprintln(rep.w, "\nno test ran: go test stopped before any package (its errors are above)")
		return
	}
	ran := rep.pass + len(rep.fail)
	line := fmt.Sprintf("\nran %s in %s: %d passed, %d failed", plural(ran, "test"), plural(len(rep.pkgs), "package"), rep.pass, len(rep.fail))
	if rep.build > 0 {
		line += fmt.Sprintf(", %s did not build", plural(rep.build, "package"))
	}
	if skipped == 0 {
		line += "; nothing skipped"
	} else {
		line += fmt.Sprintf("; skipped %d (%s)", skipped, strings.Join(parts, ", "))
		var how []string
		for _, e := range enableOrder {
			how = append(how, fmt.Sprintf("%s for %s", e, strings.Join(enable[e], " and ")))
		}
		if len(how) > 0 {
			line += ": run " + strings.Join(how, "; ")
		}
	}
	if len(rep.notRun) > 0 {
		line += "; not run: " + strings.Join(rep.notRun, "; ")
	}
	fmt.Fprintln(rep.w, line)
}

// group collapses repeated messages into "message (×n)".
func group(sorted []string) []string {
	var out []string
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		if j-i > 1 {
			out = append(out, fmt.Sprintf("%s (×%d)", sorted[i], j-i))
		} else {
			out = append(out, sorted[i])
		}
		i = j
	}
	return out
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
