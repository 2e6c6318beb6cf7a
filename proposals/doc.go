// Package proposals owns the life of the proposals a task carries, as the
// task sees it: a Runner carries a message's proposals out through the
// executor and maps each outcome to the task's state and artifacts; a
// Proposals takes the operator's decisions on held actions, lists them,
// rolls promoted ones back, withdraws what an ended task still holds, and
// reconciles the tasks a stop interrupted.
//
// Deciding has one entry point, Proposals.Decide: the admin socket
// (`snapnode approve|deny`), the operator console, and operators' signed
// messages all call it. A decision is bound to its task as it is now: an
// ended task's actions can be neither approved nor denied (ErrTaskEnded),
// and a task that holds several actions needs the one decided named
// (ErrAmbiguous lists them).
//
// The parts are built in order, with no cycle: the Runner needs only the
// executor, the task service is built on the Runner, and Proposals on the
// task service (and the agent runtime, when there is one):
//
//	runner := proposals.NewRunner(exec, logger, nil)
//	svc := tasks.NewService(store, tasks.ServiceOptions{Runner: runner})
//	props, err := proposals.New(proposals.Config{Executor: exec, Tasks: svc, Claims: proposals.DBClaims(db)})
//	…
//	if _, err := props.Reconcile(ctx, time.Now()); err != nil { … } // at start
//	go props.ReconcileEvery(ctx, ticker.C, proposals.InterruptedAfter, 5*time.Minute, nil)
//	…
//	t, err := props.Decide(ctx, proposals.Decision{TaskID: id, ActionID: action, Approver: executor.Host, Approve: true})
//	if errors.Is(err, proposals.ErrTaskEnded) { … } // nothing ran
//
// The package's Example builds these parts on one SQLite database and a
// sandbox folder, holds a task's delete for the operator, lists it with
// Held and approves it by its id.
package proposals
