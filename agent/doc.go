// Package agent is the node's agent runtime: it works on the SNAP tasks
// whose messages carry free text rather than a proposal, by asking a
// model what to do next and carrying out its answers through the same
// executor that runs a peer's proposals.
//
// # The loop
//
// A job is worked on one step at a time. At each step the runtime sends
// the model the conversation so far (the system prompt, the task, and for
// every earlier step the model's answer and what came of it) and reads
// its answer with [ParseAnswer], strictly: exactly one JSON object, no
// prose and no markdown fences. A thinking model's reasoning, which the
// server sends beside the answer ([Completion].Reasoning) or as one
// <think>…</think> block before it, is set apart and kept in the step's
// history ([Response].Reasoning), never sent back to the model; an answer
// that is all reasoning is refused naming why (the token budget spent
// thinking, or no answer after it). The answer is either
//
//   - a proposal (it has a schema_version): one action, such as
//     READ_FILE or WRITE_FILE. The executor validates it against the
//     proposal schema, judges it by the operator's policy, runs it in the
//     sandbox (or holds it until an operator confirms it) and audits it;
//     the outcome is fed back to the model as the observation of the
//     step, and the model proposes the next action. A THINK only records
//     a thought, and FINISH ends the task with the model's answer.
//   - an agent response (schemas/agent-response.v1.json): COMPLETED ends
//     the job, listing its evidence files; STUCK hands it to a human;
//     RETRY starts the current phase again.
//
// An answer that is neither is refused, and the refusal is fed back so
// that the model can answer again; after [MaxInvalidAnswers] refusals in a
// row the job waits for a human. A failed model call is retried with
// backoff, up to [MaxAPIRetries] times, but for a refusal of the model
// server that asking again does not mend ([ModelError.Transient]: a bad
// API key, a model it does not have), which makes the job wait at once.
//
// Every step is recorded in the job history before the runtime acts on
// it, and completed with its observation after: the exact messages sent,
// the raw answer, the cost and timing, and what the host did. The history
// validates against schemas/job-history.v1.json, and [Replay] checks that
// it still reads as the runtime wrote it. A step the node's stop
// interrupted is finished from the executor's record, so no action runs
// twice.
//
// The runtime stops a job that goes round in circles: the same action
// with the same observation four times, the same error three times, THINK
// after THINK without acting, or two actions alternating without progress
// (see the Pattern constants). It halts a job at its step, time or cost
// limit. When the conversation outgrows the model's context, old
// observations are condensed to a line naming their size and hash, old
// THINKs are dropped and at last the oldest steps are left out with a
// note; the stored history keeps everything.
//
// # Review, recovery points and archives
//
// With Config.Review a worker's COMPLETED ends the job's work phase at a
// recovery point (the executor action ids of the phase's changes) and a
// supervisor, with its own system prompt and optionally its own model,
// reviews the task, the worker's summary and its evidence files:
// COMPLETED ends the job, RETRY sends the work back with the reasons,
// STUCK waits for a human (see PhaseReview). [Runtime.ResumeFrom] restarts
// a waiting job from a recovery point, undoing the later changes through
// the executor's rollback. A history that passes Config.MaxHistoryBytes is
// rotated into gzipped, hash-chained segments ([Store.Archive]), sealed
// for sensitive jobs, which every reader of the history verifies and reads
// transparently.
//
// # Models and workers
//
// The runtime does not know which model answers: it asks a [Model], whose
// Complete takes a [Prompt] and returns a [Completion]. Package agent/llm
// is the built-in implementation, a client of the OpenAI-compatible
// chat-completions API that Ollama, llama.cpp, vLLM and others serve;
// package agent/worker runs external workers (programs in any language,
// over JSON lines) behind the same interface. A model may implement
// [JobEnder] to learn when the runtime stops working on a job, and
// [JobCanceler] to stop the work it started elsewhere for a job (a
// delegate's task on another agent) once the job ends other than in
// success (canceled by any path, halted, its task failed) or is rewound to
// a checkpoint, with what it recorded of the job ([Prompt.KeepSent]), at
// least once: until its CancelJob succeeds, the record stays, and is given
// to it again after a failure or a crash, up to [MaxCancelTries] times,
// after which it is given up and counted in the job's history
// ([History.CancelsGivenUp]). Each record
// given up to be canceled is kept apart ([Store.CanceledSent]; a model
// gives one up itself with [Prompt.KeepSentCanceling]), so that none
// takes another's place, up to [MaxCancelsPerJob] a job. A model wraps
// [ErrWorkerFailed] when the job must wait for a human at once. Errors the model server
// reports are a [*ModelError], and an answer it sent that cannot be taken
// an [*AnsweredError], whose usage the job is charged; a model that knows
// its context length implements [ContextSizer].
//
// # Jobs and their statuses
//
// The task service hands free-text tasks to a [Queue] (its tasks.Agent),
// which records each as a job in a [Store], in the node's SQLite or
// PostgreSQL database. A [Runtime] claims runnable jobs with a lease, so
// that of several processes sharing the database exactly one works on a
// job, and a job whose process died is taken up again once its lease
// lapses. A follow-up message on a job that waits for a human puts it back
// in the queue, and the model is told the message at its next step.
//
// A job's status is that of its manifest (schemas/job-manifest.v1.json);
// its task shows the SNAP task state [Status.TaskState] maps it to:
//
//	Status                  Task state       The job
//	DRAFT                   submitted        is being prepared
//	PENDING                 submitted        waits for a claim (new, or resumed)
//	RUNNING                 working          is worked on by the lease holder
//	REVIEWING               working          is being reviewed
//	INTERVENTION_REQUIRED   input_required   waits for a human: STUCK, a held action
//	SUCCESS                 completed        is done
//	CANCELED                canceled         was canceled
//	HALTED_COST             failed           reached its cost limit
//	HALTED_TIME             failed           reached its step or time limit
//
// SUCCESS, CANCELED, HALTED_COST and HALTED_TIME are terminal
// ([Status.Terminal]).
//
// # Usage
//
// The queue needs only the store, so the task service can be built with it
// before the runtime, which needs the service:
//
//	store, err := agent.OpenStore(ctx, db) // db is the node's *sqldb.DB
//	if err != nil {
//		return err
//	}
//	queue := agent.NewQueue(store, nil)
//	if err := queue.Recount(ctx); err != nil { // the jobs queued, counted in memory
//		return err
//	}
//	svc := tasks.NewService(taskStore, tasks.ServiceOptions{Agent: queue})
//	rt, err := agent.New(agent.Config{
//		Queue:    queue,
//		Store:    store,
//		Tasks:    svc,
//		Executor: exec,  // the node's *executor.Executor
//		Model:    model, // llm.New(llm.Config{…}), or any Model
//	})
//	if err != nil {
//		return err
//	}
//	go rt.Run(ctx) // until ctx ends
//	// On PostgreSQL shared with other processes (replicas):
//	go queue.RunRecount(ctx, time.Minute, 5*time.Minute, nil)
package agent
