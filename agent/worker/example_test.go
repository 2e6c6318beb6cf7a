package worker_test

import (
	"errors"
	"fmt"

	"github.com/snapnode/snapnode/agent/worker"
)

// A worker answers each line the node writes with one line of its own: a
// proposal, which the executor then judges, or an agent response that
// ends the job. Anything else is a violation, and the worker is stopped.
func ExampleParseLine() {
	lines := []string{
		`{"schema_version":"1.0.0","id":"0b6a0f7e-8a3e-4f39-9a53-2e6d1c7b8a90","reasoning":"write the report","action":"WRITE_FILE","args":{"path":"/sandbox/report.md","content":"# Report"}}`,
		`{"action":"COMPLETED","evidence_files":["report.md"],"summary_for_supervisor":"the report is written"}`,
		`{"action":"COMPLETED","evidence_files":["report.md"],"summary_for_supervisor":"done","action":"STUCK"}`,
	}
	for _, l := range lines {
		ans, err := worker.ParseLine([]byte(l), 64<<10)
		var le *worker.LineError
		switch {
		case errors.As(err, &le):
			fmt.Println("refused:", le.Rule)
		case ans.Response != nil:
			fmt.Println(ans.Kind, ans.Action, ans.Response.SummaryForSupervisor)
		default:
			fmt.Println(ans.Kind, ans.Action, ans.Reasoning)
		}
	}
	// Output:
	// proposal WRITE_FILE write the report
	// agent_response COMPLETED the report is written
	// refused: json
}
