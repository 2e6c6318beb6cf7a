// Package delegate hands an agent's jobs to another SNAP agent: a remote
// worker that speaks the external workers' JSON lines (see package
// agent/worker) inside signed SNAP messages.
//
// The delegate is found by its card on the node's relays. When the card
// declares HTTP or WebSocket endpoints and the Delegate has an HTTP client
// (Config.HTTP, made by [NewHTTP]), every request tries them in their
// declared order, then Nostr on the node's relays, as the SNAP fallback
// strategy says (client.ToCard), whether or not the card names relays:
// the card was found there, as a card without endpoints is reached;
// else it goes over Nostr. An endpoint that failed after
// its retries is set aside for the later steps and polls (30 s, doubling
// on each failed try up to 5 minutes) and then tried once, so that an
// endpoint that is down does not cost each request its retries' waits.
// Each step's message/send
// carries an idempotencyKey and a message id of its own, so that an
// attempt sent again after an answer was lost does not make a second
// task; a step whose exchange failed on every transport keeps them when
// the runtime tries it again, until it is answered or the job leaves it.
// A step an endpoint may have taken and the client's resend rule does not
// send again (client.ErrNotSentAgain: answered HTTP 500 or 204, or a
// connection quiet once the step was sent, as an agent of the reference
// SDK, which keeps no idempotency keys, answers its handler's failures;
// see the client package's "What is sent again") is not sent again: the job waits
// for a human with the reason, keeping the task the step continued, and
// the step that resumes it continues that task with a key of its own.
// They are recorded in the job's row before the step is sent, and again
// before each time it is sent again (agent.Prompt.KeepSent, which fails
// once the process no longer holds the job: another node of a shared
// database that took it up sends the step alone), with the remote task it
// continues, and the record is written again once the step is answered,
// with the task the answer came on: a node that stopped or crashed before
// the answer was recorded sends the step again alike once it takes the
// job up (agent.Prompt.Sent), and the job's next step continues the job's
// remote task, whether the node stopped between steps or the job waited
// for a human and a message resumed it. The node's HTTP client does not
// follow redirects and, unless allowed, does not connect to loopback,
// link-local, private, shared, unspecified, multicast or reserved
// addresses (client.NetConfig.RefusePrivate): a card anyone can publish
// must not make the node post into its own network.
//
// The first step of a job sends the delegate a message/send whose one data
// part is the job request (schemas/job-request.v1.json); every later step
// continues the same remote task (its taskId) with a data part holding the
// observation (schemas/worker-observation.v1.json). The delegate's answer
// is the data part of the returned task's latest agent message after the
// step's own message (when the task's history holds it), or, when there is
// none, of its latest artifact: exactly one worker answer
// (schemas/worker-answer.v1.json), a proposal or an agent response. An
// answer is tied to its step: it must come on the job's remote task, and,
// unless it is an agent message after the step's own, must not be one the
// task held when the step before was answered. A delegate that
// answers later (its task submitted or working, with no new answer yet) is
// asked again with tasks/get, at growing intervals, until the answer comes
// or the step's time runs out.
//
// A [Delegate] is an agent.Model: the node still validates, judges and
// carries out every proposal itself, on its own sandbox; the delegate
// never touches it. An answer that is missing, not a worker answer, on a
// task whose id is not a SNAP id (snap.CheckID: the node keeps it with
// the job and sends it back), an error response, or late (past the step
// time-out or the caller's deadline) is a protocol violation, audited as a worker's, and the error
// wraps agent.ErrWorkerFailed: the job waits for a human with the reason.
// When the node gives up on a step the delegate is at work on (a time-out,
// the job's time limit, the job canceled: agent.ErrCanceled), it sends
// the delegate tasks/cancel for the job's task there, within
// Config.CancelTimeout, and the job's next step, if any, opens a new
// task; a cancel the delegate did not answer is given up to be sent again
// (agent.Prompt.KeepSentCanceling, in the write that records the job's
// step canceled), a record of its own that the job's next steps do not
// take the place of: the runtime's next reconcile pass, or the job's end,
// sends it (agent.JobCanceler, below). A step that opens the job's task (its first) sends its
// message/send on a context of its own: given up while that send is in
// flight, the step still reads its answer, within Config.CancelTimeout,
// and cancels the task it names alike, the job's record saying so, so
// that the job's end sends no second cancel. A step stopped because the node stops leaves the task at work,
// for the step sent again when the job is taken up. Any other end of the
// job but its success (the delegate's final answer) cancels its task on
// the delegate alike (agent.JobCanceler), once, on a goroutine of the
// runtime's own: canceled while it is not in a step (it waits for a human,
// is queued, or was canceled while the node was down, found so when it
// starts), halted at its cost, step or time limit between steps, or its
// task failed. So does a rewind to a checkpoint (agent.Runtime.ResumeFrom),
// the task's history holding the steps undone: the job's next step opens
// a new task with the job request, whose task description tells what the
// job's model is told after the rewind (worker.RequestLine: the earlier
// phases' messages and the operator's note of the checkpoint and of what
// was undone). A job that waits for a human keeps its task, which the step
// that resumes it continues, also one that a step whose answer was
// refused opened. The cancel is sent by the process that takes the
// record (agent.Store.TakeCanceledSent), one process at a time, each
// record given up apart from the job's others (a job rewound while its
// old task's cancel is unanswered, which then ends, cancels both); the record
// is forgotten once the delegate answered it (a refusal, such as a task it
// ended already or does not know, included). A process that stops or
// crashes before that answer, or a delegate that did not answer, leaves
// it: once the take lapses (agent.Config.Lease), whichever process takes
// it next sends the cancel again, up to agent.MaxCancelTries times.
//
// The package's Example runs both sides on the embedded relay: a worker
// behind SNAP that publishes its card and answers on its task, and a
// Delegate asked two steps of one job.
package delegate
