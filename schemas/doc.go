// Package schemas embeds the JSON Schema (2020-12) files snapnode enforces
// and publishes for other implementations:
//
//   - proposal.v1.json: one action proposed by an agent, its fields and
//     each action's arguments, and its schema_version (1.x.x);
//   - action-descriptor.v1.json: an Action Descriptor, the host's bounded,
//     checkable form of one action;
//   - agent-response.v1.json: a worker's report on its phase,
//     COMPLETED, STUCK or RETRY, with its evidence files and a summary;
//   - agent-answer.v1.json: what a model may answer at each step, exactly
//     one of a proposal and an agent response;
//   - job-manifest.v1.json: a job's state, as `snapnode job show
//     ID --format json` prints it;
//   - job-history.v1.json: a job's full record, every interaction
//     with its exact request, answer and observation, as `snapnode job
//     history ID --format json` prints it;
//   - log-line.v1.json: one line of the node's log with log_format =
//     "json";
//   - job-request.v1.json: the request that starts an agent's work on a
//     job, the first line the node writes to an external worker and the
//     data part with which a peer starts a job;
//   - worker-observation.v1.json: the lines the node writes to an
//     external worker after the job request;
//   - worker-answer.v1.json: a line an external worker writes, a
//     proposal envelope or an agent response.
//
// The files are the contract; the Go code that applies the proposal and
// descriptor schemas (executor/proposal) is tested against them, so they
// cannot drift apart.
//
// Validating a decoded JSON value (maps, slices, strings, float64 or
// json.Number, bool, nil) with the compiled schema (the package's Example
// does so with a worker's report):
//
//	var v any
//	if err := json.Unmarshal(data, &v); err != nil { … }
//	if err := schemas.AgentResponse().Validate(v); err != nil {
//		var ve *jsonschema.ValidationError // errors.As; its innermost Causes
//		                                   // name the member (InstanceLocation)
//		                                   // and the rule (ErrorKind)
//	}
//
// Each file has its accessor (Proposal, ActionDescriptor, AgentResponse,
// AgentAnswer, JobManifest, JobHistory, LogLine, JobRequest,
// WorkerObservation, WorkerAnswer). The compiled schemas are built
// once, on first use. Formats (uuid, date-time) are annotations only, as
// 2020-12 defaults to; every format the files rely on is also written as a
// pattern, so any conforming validator reaches the same verdict. The files
// are served as they are by FS, for publication:
//
//	raw, _ := fs.ReadFile(schemas.FS, schemas.ProposalFile)
//
// Some schemas refer to others by $id: the descriptor to the proposal
// schema's argument rules (proposal.v1.json#/$defs/…), the agent answer to
// the proposal and agent response schemas, the job history to the job
// manifest's status and timestamp rules. A validator needs the referenced
// files too, which NewCompiler provides. A model server fetches no
// reference, so AgentAnswerBundle gives the agent answer schema as one
// self-contained document, for the response_format of a request.
package schemas
