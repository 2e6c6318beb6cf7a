package agent

import (
	"encoding/json"
	"time"

	"github.com/snapnode/snapnode/tasks"
)

// Status is a job manifest's status.
type Status string

// The manifest statuses and the SNAP task state of each (TaskState).
const (
	Draft                Status = "DRAFT"                 // submitted
	Pending              Status = "PENDING"               // submitted (new) or working (resumed): waits for a claim
	Running              Status = "RUNNING"               // working
	Reviewing            Status = "REVIEWING"             // working
	Success              Status = "SUCCESS"               // completed
	Canceled             Status = "CANCELED"              // canceled
	InterventionRequired Status = "INTERVENTION_REQUIRED" // input_required: STUCK, a held action, exhausted retries
	HaltedCost           Status = "HALTED_COST"           // failed, the halt in data
	HaltedTime           Status = "HALTED_TIME"           // failed (steps count as time)
)

// Statuses lists every manifest status.
func Statuses() []Status {
	return []Status{Draft, Pending, Running, Reviewing, Success, Canceled, InterventionRequired, HaltedCost, HaltedTime}
}

// Terminal reports whether a job in s is over.
func (s Status) Terminal() bool {
	switch s {
	case Success, Canceled, HaltedCost, HaltedTime:
		return true
	}
	return false
}

// TaskState is the SNAP task state a job in s shows its task in.
func (s Status) TaskState() tasks.State {
	switch s {
	case Draft, Pending:
		return tasks.StateSubmitted
	case Running, Reviewing:
		return tasks.StateWorking
	case InterventionRequired:
		return tasks.StateInputRequired
	case Success:
		return tasks.StateCompleted
	case Canceled:
		return tasks.StateCanceled
	}
	return tasks.StateFailed
}

// Job is a job's manifest: its task, status and metrics.
type Job struct {
	TaskID      string
	Requester   string
	Description string
	Status      Status
	Phase       string
	LeaseHolder string
	LeaseUntil  time.Time
	// Metrics.
	Steps            int
	CostCents        float64
	Seconds          float64
	PromptTokens     int64
	CompletionTokens int64
	// Retries counts the RETRY answers of the current phase.
	Retries int
	// HistoryBytes is the size of the stored interactions.
	HistoryBytes int64
	// NextSeq is the sequence of the next interaction.
	NextSeq int
	// PendingInput is told to the model first on the next call: a
	// follow-up message, an operator's decision.
	PendingInput string
	// RecoverySeq is the first sequence after the last recovery point; -1
	// when there is none.
	RecoverySeq int
	// ReviewSeq is the sequence of the worker's COMPLETED answer the
	// supervisor reviews in the review phase; -1 when there is none.
	ReviewSeq int
	// Reason is why the job stopped (STUCK, halted, held), or its answer
	// when it completed.
	Reason string
	// Told is how many of its task's messages the job was given (the
	// first as its description, the others as follow-ups); -1 for a job
	// stored before it was counted, whose messages are taken as given.
	Told int
	// Shown is what the task of a job waiting for a human shows its
	// requester, when it is not Reason (the operator's): "" is Reason.
	Shown string
	// settled is false while the job's task has yet to show its status.
	settled   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// The kinds of model answers, as the history records them.
const (
	KindProposal      = "proposal"
	KindAgentResponse = "agent_response"
	KindInvalid       = "invalid"
	KindAPIError      = "api_error"
	KindCanceled      = "canceled"
)

// The response statuses of the history.
const (
	ResponseSuccess = "SUCCESS"
	ResponseError   = "ERROR"
	ResponseTimeout = "TIMEOUT"
)

// The observation outcomes.
const (
	ObsCompleted         = "completed"
	ObsFailed            = "failed"
	ObsNeedsConfirmation = "needs_confirmation"
	ObsApproved          = "approved"
	ObsDenied            = "denied"
	ObsInvalid           = "invalid"
	ObsRetried           = "retried"
	ObsNone              = "none"
)

// Interaction is one entry of the job history: a model call, what it
// answered and what the host did with it. Its JSON is the jobHistory
// interaction (schemas/job-history.v1.json).
type Interaction struct {
	Sequence      int          `json:"sequence"`
	Timestamp     time.Time    `json:"timestamp"`
	StateBefore   Status       `json:"state_before"`
	WorkspacePath string       `json:"workspace_path,omitempty"`
	Request       Request      `json:"request"`
	Response      Response     `json:"response"`
	Observation   *Observation `json:"observation,omitempty"`
	// Guidance is what the model was told before this call beyond the
	// earlier steps (a follow-up message, a decision); it is the last of
	// Request.Messages too, and the prompt of later calls shows it again.
	Guidance string `json:"guidance,omitempty"`

	// base are the messages of an earlier interaction (of sequence
	// baseSeq) that Request.Messages most likely start with: the store
	// keeps only what Request.Messages add to them (see encodeInteraction).
	base    []ChatMessage
	baseSeq int
	// guidanceEnd is where Guidance ended among the input the job was
	// ever given (StepInput), for the write that takes it off
	// (Save.ConsumedEnd).
	guidanceEnd int64
}

// Request is what one model call sent.
type Request struct {
	Messages []ChatMessage `json:"messages,omitempty"`
	// MessagesSHA256 is the SHA-256 of Messages as the store checked
	// it (see messagesHash): a history read back from its export is
	// checked against it by Replay.
	MessagesSHA256 string          `json:"messages_sha256,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	FilesContext   []string        `json:"files_context,omitempty"`
	Metadata       RequestMetadata `json:"metadata"`
}

// RequestMetadata are a model call's parameters.
type RequestMetadata struct {
	Role        string  `json:"role"`
	Phase       string  `json:"phase"`
	Model       string  `json:"model,omitempty"`
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens,omitempty"`
}

// Response is what a model call answered.
type Response struct {
	Status               string   `json:"status"`
	Kind                 string   `json:"kind,omitempty"`
	Action               string   `json:"action,omitempty"`
	EvidenceFiles        []string `json:"evidence_files,omitempty"`
	SummaryForSupervisor string   `json:"summary_for_supervisor,omitempty"`
	RawResponse          string   `json:"raw_response,omitempty"`
	// Reasoning is the model's reasoning for this step, as the server
	// sent it beside the answer or as a <think> block before it,
	// redacted and cut to MaxReasoningBytes; it is never sent back to
	// the model.
	Reasoning string `json:"reasoning,omitempty"`
	// Redacted reports that secrets were taken out of the raw response:
	// what is stored is not what the model sent.
	Redacted             bool    `json:"redacted,omitempty"`
	Error                string  `json:"error,omitempty"`
	NewStatus            Status  `json:"new_status"`
	ExecutionTimeSeconds float64 `json:"execution_time_seconds"`
	CostUSD              float64 `json:"cost_usd"`
	PromptTokens         int     `json:"prompt_tokens,omitempty"`
	CompletionTokens     int     `json:"completion_tokens,omitempty"`
	// LateLines are the past steps named by the lines a worker wrote
	// late that were skipped during this call, never run
	// (Completion.LateLines), at most MaxLateLines.
	LateLines []int `json:"late_lines,omitempty"`
}

// MaxLateLines bounds Response.LateLines: a worker pool stops a worker
// that writes more lines for past steps (worker.MaxStaleLines).
const MaxLateLines = 8

// Observation is what the host made of an answer, and what it fed back.
type Observation struct {
	Outcome  string          `json:"outcome"`
	ActionID string          `json:"action_id,omitempty"`
	Output   json.RawMessage `json:"output,omitempty"`
	Reason   string          `json:"reason,omitempty"`
	Diff     string          `json:"diff,omitempty"`
	// Text is exactly what the model was told.
	Text string `json:"text,omitempty"`
	// HeldReason is why the action was held for an operator (the rule
	// of the policy that held it), kept when the operator's decision
	// gives the step its outcome.
	HeldReason string `json:"held_reason,omitempty"`
	// DecidedBy is who approved or denied the held action (an
	// operator's identity, or "host"); "" when the node learned the
	// decision from the executor's record after a stop (the audit log
	// names the operator under action_id).
	DecidedBy string `json:"decided_by,omitempty"`
	// DecidedAt is when the job was given the decision.
	DecidedAt *time.Time `json:"decided_at,omitempty"`
}

// RecoveryPoint marks a completed phase the job can resume from.
type RecoveryPoint struct {
	CheckpointID  string         `json:"checkpoint_id"`
	Sequence      int            `json:"sequence"`
	CanResumeFrom bool           `json:"can_resume_from"`
	ResumePhase   string         `json:"resume_phase,omitempty"`
	RollbackFiles []string       `json:"rollback_files,omitempty"`
	Description   string         `json:"description,omitempty"`
	Metadata      map[string]any `json:"metadata,omitempty"`
}

// History is a job's history in the jobHistory shape
// (schemas/job-history.v1.json).
type History struct {
	JobID          string          `json:"job_id"`
	CreatedAt      time.Time       `json:"created_at"`
	Description    string          `json:"description,omitempty"`
	Status         Status          `json:"status,omitempty"`
	Interactions   []Interaction   `json:"interactions"`
	RecoveryPoints []RecoveryPoint `json:"recovery_points"`
	// CancelsDropped counts the job's records of work elsewhere to cancel
	// (a delegate's task it no longer goes on with) that were dropped
	// past MaxCancelsPerJob: work the node does not cancel.
	CancelsDropped int64 `json:"cancels_dropped,omitempty"`
	// CancelsGivenUp counts the job's records of work elsewhere to
	// cancel given up after MaxCancelTries tries its peer did not
	// answer: work the node did not cancel, which may still run.
	CancelsGivenUp int64 `json:"cancels_given_up,omitempty"`
}

// Manifest is a job's manifest in the shape of
// schemas/job-manifest.v1.json.
type Manifest struct {
	JobID        string          `json:"job_id"`
	Description  string          `json:"description,omitempty"`
	Status       Status          `json:"status"`
	CurrentPhase *string         `json:"current_phase"`
	TaskState    tasks.State     `json:"task_state,omitempty"`
	Metrics      Metrics         `json:"metrics"`
	Retries      int             `json:"retries"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	History      []ManifestEntry `json:"history,omitempty"`
}

// Metrics are a job's cumulative figures.
type Metrics struct {
	CumulativeCost        float64 `json:"cumulative_cost"`
	CumulativeTimeSeconds float64 `json:"cumulative_time_seconds"`
	Steps                 int     `json:"steps"`
	PromptTokens          int64   `json:"prompt_tokens"`
	CompletionTokens      int64   `json:"completion_tokens"`
}

// ManifestEntry is one line of the manifest's short history.
type ManifestEntry struct {
	Timestamp     time.Time `json:"timestamp"`
	Role          string    `json:"role"`
	Action        string    `json:"action"`
	EvidenceFiles []string  `json:"evidence_files,omitempty"`
}

// Manifest returns j's manifest with the short history of its
// interactions.
func (j *Job) Manifest(state tasks.State, its []Interaction) *Manifest {
	m := &Manifest{JobID: j.TaskID, Description: j.Description, Status: j.Status, TaskState: state,
		Metrics: Metrics{CumulativeCost: j.CostCents, CumulativeTimeSeconds: j.Seconds, Steps: j.Steps,
			PromptTokens: j.PromptTokens, CompletionTokens: j.CompletionTokens},
		Retries: j.Retries, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt}
	if j.Phase != "" {
		p := j.Phase
		m.CurrentPhase = &p
	}
	for _, it := range its {
		m.History = append(m.History, ManifestEntry{Timestamp: it.Timestamp, Role: it.Request.Metadata.Role,
			Action: it.Response.Action, EvidenceFiles: it.Response.EvidenceFiles})
	}
	return m
}
