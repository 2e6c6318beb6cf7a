package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A history whose model padded its answers replays: the live run and
// Replay read an answer by one rule (ParseAnswer). JSON's white space
// around the object is accepted and the answer acted on; any other
// (a no-break space, an ideographic space, a line separator, a vertical
// tab, a form feed, NEL, a BOM) is text around it, so the answer was
// refused in the live run and is refused again in the replay. The job
// refused twice is STUCK, as it was.
func TestPaddedAnswersReplay(t *testing.T) {
	const finish = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000002","reasoning":"done","action":"FINISH","args":{"response":"done"}}`
	for _, c := range []struct {
		pad  string
		kind string
	}{
		{" \t\r\n", agent.KindProposal},
		{"\u00a0", agent.KindInvalid},
		{"\u3000", agent.KindInvalid},
		{"\u2028", agent.KindInvalid},
		{"\v", agent.KindInvalid},
		{"\f", agent.KindInvalid},
		{"\u0085", agent.KindInvalid},
		{"\ufeff", agent.KindInvalid},
	} {
		t.Run(fmt.Sprintf("%U", []rune(c.pad)[0]), func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			task := r.send(t, "go")
			padded := c.pad + finish + c.pad
			m := &scripted{answers: []string{padded, padded, padded}}
			got := r.run(t, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			h, err := r.store.History(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tasks.StateCompleted
			if c.kind == agent.KindInvalid {
				want = tasks.StateInputRequired
			}
			if got.Status.State != want {
				t.Fatalf("task %s %q; want %s", got.Status.State, got.Status.Message, want)
			}
			for _, it := range h.Interactions {
				if it.Response.Kind != c.kind || it.Response.RawResponse != padded {
					t.Fatalf("interaction %d recorded %s %q; want %s, the answer as sent", it.Sequence, it.Response.Kind, it.Response.RawResponse, c.kind)
				}
			}
			if err := agent.Replay(h, 64<<10); err != nil {
				t.Fatalf("the history does not replay: %v", err)
			}
		})
	}
}
