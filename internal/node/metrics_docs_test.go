package node_test

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// documentedSeries is a series the guide names: its name (a pattern
// ending in * for a family of them) and the dialect it is limited to
// ("" for both).
type documentedSeries struct {
	name, only string
}

var seriesName = regexp.MustCompile("`(snapnode_[a-z_*]+)")

// documentedMetrics reads the series the operator guide's Metrics section
// lists, and those agent.md's "Watching it" names.
func documentedMetrics(t *testing.T) []documentedSeries {
	t.Helper()
	section := func(file, heading string) []string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
		if !ok {
			t.Fatalf("%s has no section %q", file, heading)
		}
		if i := strings.Index(rest, "\n## "); i >= 0 {
			rest = rest[:i]
		}
		return strings.Split(rest, "\n")
	}
	var out []documentedSeries
	for _, line := range section("../../docs/operator.md", "## Metrics") {
		if !strings.HasPrefix(line, "| `snapnode_") {
			continue
		}
		cell, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		m := seriesName.FindStringSubmatch(cell)
		s := documentedSeries{name: m[1]}
		switch {
		case strings.Contains(line, "SQLite only"):
			s.only = "sqlite"
		case strings.Contains(line, "PostgreSQL only"):
			s.only = "postgres"
		}
		out = append(out, s)
	}
	agent := strings.Join(section("../../docs/agent.md", "## Watching it"), " ")
	for _, m := range seriesName.FindAllStringSubmatch(agent, -1) {
		out = append(out, documentedSeries{name: m[1]})
	}
	if len(out) < 10 {
		t.Fatalf("the guides list %d series: %v; the test no longer reads them", len(out), out)
	}
	return out
}

// scrapedFamilies returns the names of the metric families url serves.
func scrapedFamilies(t *testing.T, url string) []string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			out = append(out, name)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every series the operator guide (and agent.md) names is served by a
// real node's /metrics, on SQLite and PostgreSQL, once it answered a
// request, failed one and ran an agent's job; and every snapnode_ series
// it serves is named there.
func TestMetricsDocumented(t *testing.T) {
	documented := documentedMetrics(t)
	for _, dialect := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(dialect.name, func(t *testing.T) {
			a := startAgentNode(t, dialect.dsn(t), func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
			a.llm.Push(finish("done"))
			id := a.send(t, "", "say done")
			if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
				t.Fatalf("the agent's task: %s %q", got.Status.State, got.Status.Message)
			}
			if code := errCode(a.alice.call(t, a.Node, "tasks/get", map[string]any{"taskId": "no-such-task"}, false)); code != 1001 {
				t.Fatalf("tasks/get of nothing: %d", code)
			}
			served := scrapedFamilies(t, a.HTTPURL()+"/metrics")
			matches := func(pattern, name string) bool {
				if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
					return strings.HasPrefix(name, prefix)
				}
				return name == pattern
			}
			for _, d := range documented {
				if d.only != "" && d.only != dialect.name {
					continue
				}
				if !slices.ContainsFunc(served, func(name string) bool { return matches(d.name, name) }) {
					t.Errorf("%s is documented but not served", d.name)
				}
			}
			for _, name := range served {
				if !strings.HasPrefix(name, "snapnode_") {
					continue
				}
				if !slices.ContainsFunc(documented, func(d documentedSeries) bool { return matches(d.name, name) }) {
					t.Errorf("%s is served but not documented in docs/operator.md's Metrics", name)
				}
			}
			if t.Failed() {
				t.Logf("served: %q", served)
			}
		})
	}
}
