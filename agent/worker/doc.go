// Package worker runs external workers: programs, in any language, that
// do an agent's work in place of a model. The node starts the configured
// command for each job and speaks JSON lines over its standard input and
// output: it writes the job request (schemas/job-request.v1.json), then,
// after each answer, the observation of the step
// (schemas/worker-observation.v1.json); the worker answers each with
// exactly one line, a proposal or an agent response
// (schemas/worker-answer.v1.json).
//
// A [Pool] is an agent.Model: the agent runtime asks it as it asks a
// model server, and the same validation, policy, sandbox, limits, stuck
// detection and history apply to what a worker proposes. A worker that
// exits, hangs past its step time-out, writes a line that is not one JSON
// object of that schema, writes a line over the bound, or writes more
// lines than it was asked for is killed (its whole process group) and the
// error wraps agent.ErrWorkerFailed, so that the job waits for a human
// with the reason; the violation is written to the audit log.
package worker
