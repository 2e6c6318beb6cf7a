// Package worker runs external workers: programs, in any language, that
// do an agent's work in place of a model. The node starts the configured
// command for each job and speaks JSON lines over its standard input and
// output: it writes the job request (schemas/job-request.v1.json), then,
// after each answer, the observation of the step
// (schemas/worker-observation.v1.json); the worker answers each with
// exactly one line, a proposal or an agent response
// (schemas/worker-answer.v1.json).
//
// Every line the node writes names its step (the job request's step is
// the one its first answer answers), and an answer should name the step
// of the line it answers ([AnswerStep] takes the member off). An answer that
// names a past step (a late or duplicated line) is skipped, logged and
// counted ([Pool.StaleLines]), never run: past [MaxStaleLines] of one
// process, the worker is stopped (rule stale). An answer that names a step
// not asked yet, a step that is not a JSON integer from 0 or is named
// twice, or no step once the worker's earlier lines named theirs, is a
// violation (rule step). An answer that names no step from a worker
// that never named one is taken as the answer to the step the node waits
// for, as before steps were named: such a worker's late line cannot be
// told from its answer.
//
// A [Pool] is an agent.Model: the agent runtime asks it as it asks a
// model server, and the same validation, policy, sandbox, limits, stuck
// detection and history apply to what a worker proposes. A worker that
// exits, hangs past its step time-out, writes a line that is not one JSON
// object of that schema, writes a line over the bound, or writes a line
// it was not asked for that names no past step is killed (its whole
// process group) and the error wraps agent.ErrWorkerFailed, so that the
// job waits for a human with the reason; the violation is written to the
// audit log.
package worker
