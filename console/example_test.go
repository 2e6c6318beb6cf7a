package console_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// source is what this console shows: the tasks of a task service. A node
// reads its proposals (held actions, decisions), its agent's jobs and its
// audit log too; this one has none of them.
type source struct{ svc *tasks.Service }

func (s source) Tasks(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	return s.svc.List(ctx, f)
}

func (s source) Task(ctx context.Context, id string) (*tasks.Task, error) {
	t, err := s.svc.Task(ctx, id)
	if snap.CodeOf(err) == snap.CodeTaskNotFound {
		return nil, fmt.Errorf("task %s: %w", id, tasks.ErrNotFound)
	}
	return t, err
}

func (source) HeldPage(context.Context, proposals.HeldQuery) (*proposals.HeldPage, error) {
	return &proposals.HeldPage{}, nil
}
func (source) HeldAction(context.Context, string, string) (*executor.Pending, error) {
	return nil, nil
}
func (source) Job(context.Context, string, int) (*agent.Job, []agent.Interaction, error) {
	return nil, nil, nil
}

func (source) Proposer(context.Context, string, string) (*agent.Interaction, error) {
	return nil, nil
}
func (source) Audit(context.Context, audit.Filter) ([]audit.Entry, error) { return nil, nil }
func (source) AuditCount(context.Context, audit.Filter) (int64, error)    { return 0, nil }
func (source) VerifyAudit(context.Context) (audit.Report, error)          { return audit.Report{}, nil }
func (source) Decide(context.Context, proposals.Decision) (*tasks.Task, error) {
	return nil, errors.New("this node holds no actions") // a node's: *proposals.Proposals
}

// The console mounted on a mux: the operator opens a one-time login link
// (what `snapnode console-url` prints), lands on the session's task list
// under a prefix of its own, and the same link is refused after its first
// use.
func Example() {
	ctx := context.Background()
	ids := 0
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 100}), tasks.ServiceOptions{
		NewID: func() string { ids++; return fmt.Sprintf("task-%d", ids) }})
	svc.SendMessage(ctx, "bc1palice", &tasks.SendParams{Message: tasks.Message{MessageID: "m-1", Role: tasks.RoleUser,
		Parts: []tasks.Part{tasks.TextPart("list /sandbox")}}})

	c, err := console.New(console.Config{Source: source{svc}, Decider: source{svc}})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", c)
	ts := httptest.NewServer(mux) // on loopback, as the console asks by default
	defer ts.Close()

	link, _, err := c.LoginURL(ts.URL, executor.Host, console.AnyUser)
	if err != nil {
		panic(err)
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	for range 2 {
		resp, err := browser.Get(link)
		if err != nil {
			panic(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.HasPrefix(resp.Request.URL.Path, "/console/s/"), strings.Contains(string(page), "task-1"))
	}
	// Output:
	// 200 true true
	// 401 false false
}
