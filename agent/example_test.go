package agent_test

import (
	"fmt"

	"github.com/snapnode/snapnode/agent"
)

func ExampleParseAnswer() {
	answers := []string{
		// A proposal: the executor validates, judges and runs it.
		`{"schema_version":"1.0.0","id":"0b8f1a3e-6c2d-4f5a-9b7e-1d2c3b4a5f60",
		  "reasoning":"The requester wants the summary in report.md.",
		  "action":"WRITE_FILE","args":{"path":"/sandbox/report.md","content":"# Report\n"}}`,
		// An agent response: it ends the phase.
		`{"action":"COMPLETED","evidence_files":["/sandbox/report.md"],
		  "summary_for_supervisor":"report.md summarises the notes."}`,
		// Neither: the refusal is fed back to the model.
		"```json\n{\"action\":\"COMPLETED\"}\n```",
	}
	for _, text := range answers {
		a, err := agent.ParseAnswer(text, 64<<10)
		if err != nil {
			fmt.Println("refused:", err.Rule)
			continue
		}
		fmt.Println(a.Kind, a.Action)
	}
	// Output:
	// proposal WRITE_FILE
	// agent_response COMPLETED
	// refused: object
}
