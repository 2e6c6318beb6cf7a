// Package tasks is the SNAP task engine: Task, Status and Artifact with
// the JSON form of the SNAP schemas (Message and Part are snap's); the task
// state machine; the Store interface with an in-memory
// implementation; task events; and the Service the node routes those three
// methods, and the streams message/stream and tasks/resubscribe, to.
//
// Wiring the Service to the node's router (a Registrar, such as
// snap.Router), which decodes and validates each request payload once
// into the typed params (snap.ParseSendParams and the others) the
// Service's methods take:
//
//	store := tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 100_000}) // or a SQL Store
//	svc := tasks.NewService(store, tasks.ServiceOptions{
//		Operators: []string{operatorAddr}, // may read and cancel every task
//	})
//	svc.Register(router, nil) // message/send, tasks/get, tasks/cancel, and the streams
//
// Each handler takes the requester from the verified request's from and
// returns a *tasks.TaskResponse ({"task": …}) or a *snap.Error: 1004 naming
// the payload field ("payload.message.parts[0].text"), 1005 {provided,
// supported, field} for a part of a media type the node does not read
// (ServiceOptions.InputModes; nothing is stored), 1001 {taskId} for a
// task that does not exist or is another requester's, 1002 {taskId, state}
// for canceling a completed or failed task, 5003 when the store is full,
// 5001 for anything internal. A response too large for its transport
// shrinks (snap.Shrinker) by dropping its oldest history, as
// task.TrimHistory(n) does.
//
// The same operations are methods, for callers that hold the requester and
// the params themselves; they take types, never bytes:
//
//	task, err := svc.SendMessage(ctx, from, &tasks.SendParams{Message: msg}) // new task, or continue one
//	task, err = svc.GetTask(ctx, from, &tasks.GetParams{TaskID: id, HistoryLength: &ten})
//	task, err = svc.CancelTask(ctx, from, &tasks.CancelParams{TaskID: id})
//
// A new task is submitted and waits for a worker. Workers and the executor
// move it on and attach results; the SNAP specification's task state machine
// is enforced (errors.Is(err, tasks.ErrIllegalTransition)):
//
//	svc.Transition(ctx, task.ID, tasks.StateWorking, "")
//	svc.AddArtifact(ctx, task.ID, tasks.Artifact{ArtifactID: "result",
//		Parts: []tasks.Part{tasks.DataPart(resultJSON)}})
//	svc.Transition(ctx, task.ID, tasks.StateCompleted, "")
//
// Every change of state and every artifact is an Event carrying the task's
// version. Streams (message/stream, tasks/resubscribe) take the task and
// its later events with no gap between them:
//
//	snapshot, events, err := svc.Subscribe(ctx, from, taskID)
//	for ev := range events { … } // closed after the final event, when ctx
//	                            // ends, or if the reader falls behind
//
// Register adds the streams message/stream and tasks/resubscribe too. Each
// emits the task's events as the SNAP specification's stream payloads with
// the task's version (ProgressUpdate for a state, ArtifactUpdate for an
// artifact), a heartbeat while the task is quiet, and ends with the task
// when it is terminal or needs input, or after StreamMaxDuration. A
// requester whose stream broke resumes with tasks/resubscribe {"taskId": …,
// "afterVersion": <last version seen>}:
//
//	task, err := svc.StreamMessage(ctx, from, params, func(event any) error {
//		return send(event) // an error ends the stream
//	})
//
// What a Runner (or the executor, for an operator's decision) made of a
// task is an Outcome, recorded in one write (Store.Apply, through
// Service.Resolve): the state, the artifacts and their events together,
// published to subscribers once durable. A component whose own record of
// the work lives in the same SQL database commits the outcome in its own
// transaction (Settlement, over a TxApplier store), so that the work and
// the task's state are durable together:
//
//	st := svc.Settle(taskID)
//	res, err := exec.ApproveThen(ctx, actionID, operator, st.Unended,
//		func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
//			return st.In(ctx, tx, outcomeOf(res))
//		})
//	if err == nil {
//		task, err = st.Done(ctx, outcomeOf(res)) // publishes the events
//	}
//
// Stores keep tasks with their owner and a version for optimistic
// concurrency (Update with an expected version fails with
// ErrVersionConflict). A new Store proves itself with the shared suite:
//
//	storetest.Run(t, func(t *testing.T) tasks.Store { return newStore(t) })
package tasks
