package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/tasks"
)

// endedTask is fakeSource with its task failed (a follow-up message's
// proposal failed) while its action is still listed as held: another
// process ended it, and its withdrawal is yet to come.
type endedTask struct{ fakeSource }

func (s endedTask) Task(ctx context.Context, id string) (*tasks.Task, error) {
	t, err := s.fakeSource.Task(ctx, id)
	if t != nil {
		t.Status.State = tasks.StateFailed
	}
	return t, err
}

// The page of a task that has ended offers no decision on the actions
// still listed as held, which the node would refuse: it says they are
// being withdrawn. Before, it showed Approve and Deny.
func TestEndedTaskOffersNoDecision(t *testing.T) {
	body := taskPage(t, endedTask{fakeSource{dec: nil}})
	held := body[strings.Index(body, `<section class="held" id="held-act-1">`):]
	held = held[:strings.Index(held, "</section>")]
	if strings.Contains(held, `id="approve-act-1"`) || strings.Contains(held, `id="deny-act-1"`) {
		t.Error("the ended task's held action has an Approve or Deny button")
	}
	if !strings.Contains(held, `id="withdrawn-act-1"`) {
		t.Errorf("the held action does not say it is being withdrawn:\n%s", held)
	}
}
