package config

import (
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/readfile"
	"github.com/snapnode/snapnode/internal/suggest"
)

// Config is every setting of `snapnode run`.
type Config struct {
	// ConfigFile is the TOML file read (flag --config, SNAPNODE_CONFIG).
	ConfigFile string `toml:"-"`
	// DataDir holds the identity, the databases and the sandbox.
	DataDir string `toml:"data_dir"`
	// KeyFile is the identity's secret; default <data-dir>/identity.key.
	// SNAPNODE_KEY, when set, is the key itself and wins over the file.
	KeyFile string `toml:"key_file"`
	// Database holds tasks and the replay records: a SQLite file path or
	// sqlite: DSN, or a postgres:// DSN shared by replicas. Default
	// <data-dir>/tasks.db.
	Database string `toml:"database"`
	// Testnet makes the node's address tb1p… instead of bc1p….
	Testnet bool `toml:"testnet"`
	// Relays to use. When empty the node starts its embedded relay on
	// RelayListen and uses that.
	Relays []string `toml:"relays"`
	// RelayListen is the embedded relay's address; empty disables it.
	RelayListen string `toml:"relay_listen"`
	// RelayMaxConns and RelayMaxConnsPerPeer cap the embedded relay's
	// connections, WebSocket clients or not, in all and per peer (an
	// IPv4 address, an IPv6 /64; loopback addresses count in the total
	// only); 0 takes the relay's defaults, 4096 and 64. Over a cap the
	// longest-idle connection in its scope is closed to make room, else
	// the new one gets 503 or 429 before its request (the upgrade) is
	// read.
	RelayMaxConns        int `toml:"relay_max_conns"`
	RelayMaxConnsPerPeer int `toml:"relay_max_conns_per_peer"`
	// RelayStoreMaxEvents and RelayStoreMaxBytes bound the embedded
	// relay's database (relay.db): past either, the oldest stored events
	// are deleted to make room, the node's own card aside; 0 takes the
	// relay's defaults, 1,000,000 events and 1 GiB.
	RelayStoreMaxEvents int   `toml:"relay_store_max_events"`
	RelayStoreMaxBytes  int64 `toml:"relay_store_max_bytes"`
	// RelayStorePeerShare is the part of each of those bounds one peer's
	// stored events may take (an IPv4 address, an IPv6 /64), between 0
	// and 1: past it, that peer's own oldest events are deleted, so that
	// one address cannot make the relay forget what others stored.
	// Loopback clients and the node itself have no share; 0: none.
	RelayStorePeerShare float64 `toml:"relay_store_peer_share"`
	// RelayEventRate and RelayEventBurst limit the EVENT messages the
	// embedded relay takes from one peer (an IPv4 address, an IPv6 /64),
	// all its connections together; loopback clients and the node itself
	// are not limited. 0: no limit. Over it an event is refused with
	// NIP-01's "rate-limited:" before its signature is checked.
	RelayEventRate  float64 `toml:"relay_event_rate"`
	RelayEventBurst int     `toml:"relay_event_burst"`
	// RelayAllowedOrigins are the origins of web pages ("scheme://host
	// [:port]", as browsers send Origin; "*": every one) that may open a
	// WebSocket to the embedded relay. On a loopback address (the
	// default) it takes clients that send no Origin, pages of loopback
	// origins (localhost, 127.0.0.1, [::1], any port) and those listed,
	// and refuses other pages with 403: any page the operator's browser
	// shows could otherwise publish requests to the node. On any other
	// address it takes every origin, as a public relay, unless a list is
	// given.
	RelayAllowedOrigins []string `toml:"relay_allowed_origins"`
	// HTTPListen is the address of SNAP over HTTP, SSE and WebSocket
	// (POST and GET /snap, the well-known card, /healthz, /metrics);
	// empty, or "off", disables it. When it is left at
	// DefaultHTTPListen and that port is taken, the node runs without
	// HTTP and logs a warning; an address set on purpose must be free.
	HTTPListen string `toml:"http_listen"`
	// HTTPPublicURL is the URL peers reach the HTTP transport at (behind
	// a reverse proxy, say: https://node.example.com); the card
	// advertises its /snap endpoint. Empty: the listen address, when it
	// is one other machines can reach.
	HTTPPublicURL string `toml:"http_public_url"`
	// HTTPAllowedOrigins are the origins of web pages ("scheme://host
	// [:port]"; "*": every one) that may send messages over HTTP and
	// WebSocket (POST /snap, SSE and the WebSocket upgrade); a request
	// without Origin (SDK peers, curl, snapnode's client) or from the
	// endpoint's own origin is served whatever it says, a page of
	// another origin gets 403.
	HTTPAllowedOrigins []string `toml:"http_allowed_origins"`
	// HTTPAllowedHosts are host names the HTTP transport answers to
	// (the Host of a request) besides IP addresses, localhost, the host
	// of http_listen and http_public_url and those of the card's
	// endpoints; "*": any. A request to another name gets 421: a web
	// page whose name was made to resolve to this machine (DNS
	// rebinding) is refused.
	HTTPAllowedHosts []string `toml:"http_allowed_hosts"`
	// ConsoleRemote lets clients that are not on loopback reach the
	// operator console at /console on HTTPListen; by default they get
	// 403. Turn it on only behind a TLS-terminating reverse proxy: the
	// node serves plain HTTP, and the session cookie would cross the
	// network in clear.
	ConsoleRemote bool `toml:"console_remote"`
	// HTTPMaxBody bounds a message posted or sent over WebSocket, in
	// bytes; a larger one gets 400 (or WebSocket close 1009).
	HTTPMaxBody int64 `toml:"http_max_body"`
	// HTTPMaxResponse bounds one response or stream event sent over
	// HTTP, SSE or WebSocket, in bytes; a larger task result is shrunk
	// (its oldest history dropped), else answered 5001 naming the limit.
	// Nostr's answers are bound by NIP-44 (65,535 bytes) whatever this
	// says; a result too large for Nostr is read with tasks/get here.
	HTTPMaxResponse int64 `toml:"http_max_response"`
	// HTTPRate is each peer's allowance of HTTP requests and WebSocket
	// messages per second (a peer is an IPv4 address or an IPv6 /64),
	// with bursts of HTTPBurst; over it an HTTP request gets 429 with
	// Retry-After before its body is read. 0 disables the limit.
	HTTPRate  float64 `toml:"http_rate"`
	HTTPBurst int     `toml:"http_burst"`
	// MonitorRate is each peer's allowance of GET /healthz and /metrics
	// requests per second, with bursts of MonitorBurst, apart from
	// HTTPRate; over it a request gets 429 with Retry-After. 0 disables
	// the limit.
	MonitorRate  float64 `toml:"monitor_rate"`
	MonitorBurst int     `toml:"monitor_burst"`
	// MetricsListen, when set, is the address /metrics is served on
	// instead of HTTPListen (whose /metrics then answers 404): a
	// loopback or internal address keeps the metrics off the public
	// interface.
	MetricsListen string `toml:"metrics_listen"`
	// MetricsPublic serves /metrics on HTTPListen to clients off
	// loopback too; by default they get 404, as when MetricsListen is
	// set. It does nothing when MetricsListen is set, whose address
	// serves every client that reaches it.
	MetricsPublic bool `toml:"metrics_public"`
	// HTTPMaxConns and HTTPMaxConnsPerPeer cap the TCP connections the
	// HTTP transport holds, in all and per peer; 0 derives them from the
	// process's open-file limit (half of it in all, a sixteenth of that
	// per peer). Over a cap the connection idle the longest is closed to
	// make room; when none is idle the new one gets 429 (per peer) or 503
	// (in all) with Retry-After and is closed.
	HTTPMaxConns        int `toml:"http_max_conns"`
	HTTPMaxConnsPerPeer int `toml:"http_max_conns_per_peer"`
	// HTTPBodyMemory bounds the bytes of the messages being read or
	// answered over HTTP and WebSocket at once, all peers together, a
	// peer holding at most a sixteenth of it (or HTTPMaxBody); beyond
	// either a POST gets 429 with Retry-After before its body is read,
	// and a WebSocket message waits. At least HTTPMaxBody.
	HTTPBodyMemory int64 `toml:"http_body_memory"`
	// HTTPAnswerMemory bounds the bytes of the answers being written
	// over HTTP, SSE and WebSocket at once, all peers together, a peer
	// holding at most a sixteenth of it (or HTTPMaxResponse): each
	// response or event counts its size until it is written, or its
	// write times out. An answer without room within a quarter of a
	// second is replaced by 5003 {retryAfter, limit: "answer_memory"}
	// (HTTP 503 with Retry-After for a POST). At least HTTPMaxResponse.
	HTTPAnswerMemory int64 `toml:"http_answer_memory"`
	// IdentityRate is each SNAP identity's allowance of requests per
	// second over every transport, with bursts of IdentityBurst. It is
	// checked after the signature verifies (a forger cannot spend
	// another's allowance) and before the message's id is recorded (a
	// refused request may be sent again); over it the answer is 5002
	// with data.retryAfter. 0 disables the limit.
	IdentityRate  float64 `toml:"identity_rate"`
	IdentityBurst int     `toml:"identity_burst"`
	// NostrKeyRate is each Nostr key's allowance of request events per
	// second, with bursts of NostrKeyBurst, checked before an event is
	// queued or decrypted. 0 disables the limit.
	NostrKeyRate  float64 `toml:"nostr_key_rate"`
	NostrKeyBurst int     `toml:"nostr_key_burst"`
	// MaxStreams bounds the message/stream and tasks/resubscribe streams
	// open at once over every transport; MaxStreamsPerIdentity those of
	// one SNAP identity; MaxStreamsPerKey those of one key's addresses
	// (mainnet and testnet, which one Nostr key signs for) together;
	// MaxNewcomerStreams those of the identities with no task history
	// (neither an operator nor the owner of a task) together, 0 meaning
	// half of MaxStreams. Past a bound the answer is 5002 with retryAfter,
	// limit and scope.
	MaxStreams            int `toml:"max_streams"`
	MaxStreamsPerIdentity int `toml:"max_streams_per_identity"`
	MaxStreamsPerKey      int `toml:"max_streams_per_key"`
	MaxNewcomerStreams    int `toml:"max_newcomer_streams"`
	// StreamWaitTimeout is how long a stream request waits for a slot
	// when MaxStreams (or, for a newcomer, MaxNewcomerStreams) are open,
	// known identities served before newcomers, before it gets the 5002;
	// 0 refuses at once. MaxStreamWaiters bounds the requests waiting,
	// known identities and newcomers each; past it the 5002 comes at once.
	StreamWaitTimeout Duration `toml:"stream_wait_timeout"`
	MaxStreamWaiters  int      `toml:"max_stream_waiters"`
	// RequestTimeout bounds the handling of one request, on every
	// transport, up to its answer: past it the database calls still
	// waiting are abandoned and the requester is answered 5003 with
	// retryAfter, the request's id unspent. Streams and the steps after a
	// request's commit (a run of proposals) have bounds of their own.
	RequestTimeout Duration `toml:"request_timeout"`
	// ServiceTimeout bounds one call of a node's service (service/call)
	// that declares no bound of its own, in place of RequestTimeout: a
	// service may take long, and the call's id is spent before it runs,
	// so that a call cut short is answered 2006, never told to retry.
	ServiceTimeout Duration `toml:"service_timeout"`
	// BackgroundTimeout bounds one pass of each background loop on the
	// database (the audit sealer and pruner, the recounts, the replay
	// and retention sweeps, the agent queue's): a pass that takes longer
	// is abandoned and the next tick tries again.
	BackgroundTimeout Duration `toml:"background_timeout"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `toml:"log_level"`
	// LogFormat is text (key=value lines) or json (one object a line).
	LogFormat string `toml:"log_format"`
	// MaxDrift is the SNAP timestamp window, also applied to the created_at
	// of action descriptors peers send.
	MaxDrift Duration `toml:"max_drift"`
	// ReplyTTL is the NIP-40 expiration of replies to stored requests.
	ReplyTTL Duration `toml:"reply_ttl"`
	// SandboxDir is the workspace proposals act on (their /sandbox/);
	// default <data-dir>/sandbox.
	SandboxDir string `toml:"sandbox_dir"`
	// Policy is the operator's Cedar policy file; empty uses the built-in
	// default policy.
	Policy string `toml:"policy"`
	// TaskRetention is how long a task is kept once it is terminal
	// (completed, failed, canceled); 0 keeps tasks forever.
	TaskRetention Duration `toml:"task_retention"`
	// MaxLiveTasksPerRequester bounds the live (not ended) tasks of one
	// requester, MaxLiveTasks those of all requesters together, in the
	// node's task store (a database or memory); past either a new task
	// is refused (5002, 5003) until one ends. 0 bounds nothing.
	MaxLiveTasksPerRequester int `toml:"max_live_tasks_per_requester"`
	MaxLiveTasks             int `toml:"max_live_tasks"`
	// ReconcileAfter is how long a task must have stood still before a
	// node on PostgreSQL takes it up as interrupted (another replica may
	// still run a younger one); SQLite's one process takes up everything
	// at start.
	ReconcileAfter Duration `toml:"reconcile_after"`
	// Workers handle requests concurrently.
	Workers int `toml:"workers"`
	// MemoryLimit is the memory the Go runtime aims to hold at most, in
	// bytes: after every collection the runtime's soft limit
	// (runtime/debug.SetMemoryLimit) is set to it, or to what lets the
	// heap's goal be 1.25 times the live heap when that is more (see
	// package memlimit). Under a burst the collector runs more often
	// instead of letting the heap grow to twice what is live; a node
	// whose live heap outgrows it keeps the limit above what is live, so
	// the collector never runs all the time. While it is held, GOGC is
	// off unless set in the environment: the collector runs when the
	// memory reaches the limit, not each time the heap doubles. It counts neither the
	// program's code nor SQLite's page caches. 0 leaves the runtime's own
	// limit (GOMEMLIMIT, else none), as does GOMEMLIMIT set in the
	// environment.
	MemoryLimit int64 `toml:"memory_limit"`
	// Operators are identities that may see and manage every task.
	Operators []string `toml:"operators"`
	// ServiceCallers are the identities that may call the node's
	// services (service/call); nobody may when it is empty.
	ServiceCallers []string `toml:"service_callers"`
	// Card is the agent card the node publishes.
	Card Card `toml:"card"`
	// Agent is the agent runtime: the model server it asks and the
	// limits of each job.
	Agent Agent `toml:"agent"`
	// Executor is what the node says of its host to the actions it
	// carries out.
	Executor Executor `toml:"executor"`
	// Audit is how long the audit log keeps its entries and what each
	// holds.
	Audit Audit `toml:"audit"`
}

// Executor is the [executor] table: facts about the host that an action
// descriptor's preconditions may ask for. The node does not probe them;
// the operator states them. An action whose descriptor asks for a fact
// the host does not state fails with PRECONDITION_FAILED, naming it.
type Executor struct {
	// UserIdle states that nobody uses the machine interactively (a
	// headless server), so actions may run unattended: it satisfies
	// preconditions.user_idle.
	UserIdle bool `toml:"user_idle"`
	// NetworkAvailable states that the host's network is up: it
	// satisfies preconditions.network_available. Actions get no network
	// access either way.
	NetworkAvailable bool `toml:"network_available"`
	// QuotaBytes, QuotaFiles and QuotaDirs cap what one requester's
	// promoted actions may add to the workspace: bytes of regular files,
	// regular files, directories (the folders a write creates included).
	// Past one, the action fails with LIMIT_EXCEEDED naming the quota
	// (requester_bytes, requester_files, requester_dirs).
	QuotaBytes int64 `toml:"quota_bytes"`
	QuotaFiles int64 `toml:"quota_files"`
	QuotaDirs  int64 `toml:"quota_dirs"`
	// WorkspaceMaxBytes and WorkspaceMaxEntries cap the whole
	// workspace, for every requester together and the operator's files
	// included: the bytes of its regular files, and its regular files
	// and folders. Past one, the action fails with LIMIT_EXCEEDED naming
	// the cap (total_bytes, total_entries). The workspace is counted
	// once at start and again every minute, outside the actions; each
	// action's change is counted as it is promoted.
	WorkspaceMaxBytes   int64 `toml:"workspace_max_bytes"`
	WorkspaceMaxEntries int64 `toml:"workspace_max_entries"`
	// SnapshotMaxAge is how long the rollback snapshot of a promoted
	// action is kept: an action promoted longer ago can no longer be
	// rolled back. 0 keeps snapshots whatever their age.
	SnapshotMaxAge Duration `toml:"snapshot_max_age"`
	// SnapshotMaxBytes bounds the bytes of the rollback snapshots kept for
	// one requester's actions; past it the oldest are pruned first. 0 is
	// no bound.
	SnapshotMaxBytes int64 `toml:"snapshot_max_bytes"`
}

// Audit is the [audit] table: the host's retention and levels of the
// audit log. A proposer's descriptor may state its own (audit.retain_days,
// audit.log_level); they are recorded, never applied.
type Audit struct {
	// RetainDays: entries older than this many days are pruned, every
	// hour, behind a checkpoint the node's key signs; 0 keeps every entry.
	RetainDays int `toml:"retain_days"`
	// LevelLow… LevelCritical are the audit level (SUMMARY, DETAILED or
	// FORENSIC) of the actions of each risk level.
	LevelLow      string `toml:"level_low"`
	LevelMedium   string `toml:"level_medium"`
	LevelHigh     string `toml:"level_high"`
	LevelCritical string `toml:"level_critical"`
}

// MaxAuditRetainDays is the largest audit.retain_days (100 years).
const MaxAuditRetainDays = 36500

// Agent is the [agent] table: the agent runtime's settings. The runtime is
// on when LLMURL and LLMModel are both set (see [Config.AgentEnabled]).
// The API key is not here: it comes from SNAPNODE_LLM_API_KEY or the file
// LLMAPIKeyFile (see [Config.LLMAPIKey]), so that printing a Config cannot
// show it.
type Agent struct {
	// LLMURL is the base URL of an OpenAI-compatible server, ending in
	// /v1: http://127.0.0.1:11434/v1 for Ollama. A trailing slash is
	// dropped.
	LLMURL string `toml:"llm_url"`
	// LLMModel is the model asked.
	LLMModel string `toml:"llm_model"`
	// LLMAPIKeyFile holds the API key when SNAPNODE_LLM_API_KEY is unset;
	// it must be readable by its owner only.
	LLMAPIKeyFile string `toml:"llm_api_key_file"`
	// ResponseFormat is how answers are constrained to JSON: auto (probe
	// the server), json_schema, json_object or none.
	ResponseFormat string `toml:"response_format"`
	// ReasoningEffort, when set, is sent with every model call as its
	// reasoning_effort, to turn a thinking model's thinking down or off:
	// none, minimal, low, medium, high or xhigh. Empty sends nothing:
	// the server's and the model's default.
	ReasoningEffort string `toml:"reasoning_effort"`
	// MaxSteps bounds the model calls of one job (1…MaxAgentSteps).
	MaxSteps int `toml:"max_steps"`
	// MaxCostCents bounds one job's cost in US cents, priced by
	// PricePerMTokPrompt and PricePerMTokCompletion; 0 is no limit.
	MaxCostCents float64 `toml:"max_cost_cents"`
	// MaxTimeMinutes bounds one job's wall-clock time.
	MaxTimeMinutes float64 `toml:"max_time_minutes"`
	// PricePerMTokPrompt and PricePerMTokCompletion are the model's
	// prices in US dollars per million prompt and completion tokens.
	PricePerMTokPrompt     float64 `toml:"price_per_mtok_prompt"`
	PricePerMTokCompletion float64 `toml:"price_per_mtok_completion"`
	// Temperature is the sampling temperature, 0…2.
	Temperature float64 `toml:"temperature"`
	// MaxTokens caps the tokens of one answer.
	MaxTokens int `toml:"max_tokens"`
	// RequestTimeout bounds one model call.
	RequestTimeout Duration `toml:"request_timeout"`
	// ContextTokens is the model's context window; 0 takes it from the
	// server's /v1/models entry, or 16384 when the server does not say.
	ContextTokens int `toml:"context_tokens"`
	// MaxJobs is how many jobs this node works on at once.
	MaxJobs int `toml:"max_jobs"`
	// MaxJobsPerRequester is how many of them one requester's jobs may
	// take; 0 is half of MaxJobs, rounded up.
	MaxJobsPerRequester int `toml:"max_jobs_per_requester"`
	// MaxQueuedJobs bounds the jobs that wait for a slot or are worked
	// on, every requester's together: a new free-text task past it is
	// refused (5003) rather than stored to wait.
	MaxQueuedJobs int `toml:"max_queued_jobs"`
	// MaxQueuedJobsPerRequester bounds one requester's of them (5002);
	// 0 is a sixteenth of MaxQueuedJobs, at least 1.
	MaxQueuedJobsPerRequester int `toml:"max_queued_jobs_per_requester"`
	// MaxNewcomerQueuedJobs is the share of MaxQueuedJobs open to
	// requesters the node does not know (no task it has answered): past
	// it their new free-text tasks are refused (5003), and the rest of
	// the queue is left to known peers; 0 is half of MaxQueuedJobs.
	MaxNewcomerQueuedJobs int `toml:"max_newcomer_queued_jobs"`
	// Lease is how long a claimed job stays this node's without renewal.
	Lease Duration `toml:"lease"`
	// RetryBackoff is the first wait before a failed model call is tried
	// again (10 s: the three waits span 70 s, a model server's restart);
	// it doubles each time, each wait at most a minute, and a longer
	// Retry-After wins, within the same minute. 0 takes the default
	// (agent.DefaultBackoff), as agent.Config.Backoff does.
	RetryBackoff Duration `toml:"retry_backoff"`
	// MaxObservationBytes bounds the file content fed back to the model
	// in one step, counted as the model is sent it (JSON escapes
	// included).
	MaxObservationBytes int `toml:"max_observation_bytes"`
	// MaxAnswerBytes bounds one model answer; a longer one is refused.
	MaxAnswerBytes int `toml:"max_answer_bytes"`
	// MaxPendingInputBytes bounds a job's pending input: the requester's
	// messages and operators' decisions since its last step, which its
	// next step is told. Past it, the oldest are left out with a note
	// and the newest kept (they stay in the task's history).
	MaxPendingInputBytes int `toml:"max_pending_input_bytes"`
	// MaxHistoryBytes bounds the live history of one job: past it, the
	// oldest interactions move into compressed archive segments.
	MaxHistoryBytes int64 `toml:"max_history_bytes"`
	// MaxRetries is how many RETRY answers are honoured in one phase.
	MaxRetries int `toml:"max_retries"`
	// Redact are regular expressions (RE2 syntax) whose matches are
	// removed from the stored history, beside the built-in ones.
	Redact []string `toml:"redact"`
	// SystemPrompt is appended to the built-in system prompt.
	SystemPrompt string `toml:"system_prompt"`
	// Command runs an external worker in place of a model server: the
	// program and its arguments. The node starts it for each job and
	// speaks JSON lines over its standard input and output.
	Command []string `toml:"command"`
	// CommandDir is the worker's working directory, outside the sandbox
	// (default: the system's temporary directory).
	CommandDir string `toml:"command_dir"`
	// CommandEnv is the worker's environment beside PATH: NAME=value
	// entries. Nothing else of the node's environment reaches it.
	CommandEnv []string `toml:"command_env"`
	// Delegate hands every job to another SNAP agent, by its P2TR
	// address, in place of a model server or an external worker: each
	// step is a signed message/send over the node's relays carrying the
	// external worker's lines, and the node still validates, judges and
	// carries out every proposal on its own sandbox.
	Delegate string `toml:"delegate"`
	// DelegatePrivateEndpoints lets the node post to the delegate's
	// endpoints on loopback, link-local, private, shared, unspecified,
	// multicast, reserved and the other non-public addresses
	// (client.NetConfig.RefusePrivate); off, such an endpoint is skipped (its card's
	// next, then Nostr).
	DelegatePrivateEndpoints bool `toml:"delegate_private_endpoints"`
	// StepTimeout bounds the wait for an external worker's (or the
	// delegate's) answer to one step; 0 takes RequestTimeout.
	StepTimeout Duration `toml:"step_timeout"`
	// Review makes a supervisor review every COMPLETED of the worker
	// before the job ends.
	Review bool `toml:"review"`
	// ReviewModel is the model the supervisor asks (on the same server);
	// empty: LLMModel.
	ReviewModel string `toml:"review_model"`
	// ReviewReasoningEffort is the supervisor's ReasoningEffort: empty
	// takes ReasoningEffort; "default" sends none (a review model that
	// does not think, which some servers refuse when asked to); any other
	// is one of ReasoningEffort's values.
	ReviewReasoningEffort string `toml:"review_reasoning_effort"`
	// Sensitive seals the jobs' archived history with the key in
	// HistoryKeyFile (AES-256-GCM).
	Sensitive bool `toml:"sensitive"`
	// HistoryKeyFile holds the key that seals and opens the archived
	// history of sensitive jobs: 64 hexadecimal digits, in a file only
	// its owner may read.
	HistoryKeyFile string `toml:"history_key_file"`
}

// Card is the configurable part of the agent card; the identity and the
// relays are filled in by the node.
type Card struct {
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Version     string   `toml:"version"`
	InputModes  []string `toml:"input_modes"`
	OutputModes []string `toml:"output_modes"`
	Skills      []Skill  `toml:"skills"`
	// NostrRelays are the relays the card tells peers to send to: the
	// URLs they reach the node's relays at (a TLS proxy in front of the
	// embedded relay, say: wss://relay.example.com). Empty: the relays
	// the node uses. The card advertises ws:// on loopback only.
	NostrRelays []string `toml:"nostr_relays"`
	Endpoints   []struct {
		Protocol string `toml:"protocol"`
		URL      string `toml:"url"`
	} `toml:"endpoints"`
}

// Skill is one skill of the card.
type Skill struct {
	ID          string   `toml:"id"`
	Name        string   `toml:"name"`
	Description string   `toml:"description"`
	Tags        []string `toml:"tags"`
	Examples    []string `toml:"examples"`
}

// Duration is a time.Duration written as "60s" in TOML.
type Duration struct{ time.Duration }

// MarshalText implements encoding.TextMarshaler: d as UnmarshalText
// reads it ("1m30s"), so that settings written out read back the same.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return errors.New("want a duration with its unit, such as 90s, 5m or 1h30m")
	}
	d.Duration = v
	return nil
}

// DefaultHTTPListen is the default address of the HTTP transport.
const DefaultHTTPListen = "127.0.0.1:7448"

// MaxHTTPBody is the largest http_max_body: the largest SNAP message.
const MaxHTTPBody = 10 << 20

// MinHTTPResponse and MaxHTTPResponse bound http_max_response: at least
// what Nostr carries, at most the largest SNAP message.
const (
	MinHTTPResponse = 64 << 10
	MaxHTTPResponse = 10 << 20
)

// DefaultMemoryLimit is memory_limit's default, 32 MiB: a node keeps
// about 12 MiB live at rest and 13 MiB under 20,000 forged and 20,000
// valid requests, where its peak is about 60 MiB resident (the
// program's code about 25 MiB of it).
//
// MinMemoryLimit is the smallest memory_limit other than 0: a node's
// runtime holds about 20 MiB at rest (12 MiB live, stacks and its own
// structures), so a smaller target would only ever be overruled by the
// live heap.
const (
	DefaultMemoryLimit = 32 << 20
	MinMemoryLimit     = 16 << 20
)

// MaxAgentSteps is the largest agent.max_steps.
const MaxAgentSteps = 10000

// LLMAPIKeyEnv is the environment variable holding the model server's API
// key. It is read by [Config.LLMAPIKey] only, never stored in a Config.
const LLMAPIKeyEnv = "SNAPNODE_LLM_API_KEY"

// maxKeyFileBytes bounds the API key file read by LLMAPIKey.
const maxKeyFileBytes = 64 << 10

// MaxFileBytes bounds the settings file (--config): a longer one, or one
// that is not a regular file (a FIFO would make the read wait for a
// writer), is refused at start and on SIGHUP.
const MaxFileBytes = 1 << 20

// Default returns the settings of a node with no configuration.
func Default() Config {
	return Config{
		DataDir:                  "snapnode-data",
		RelayListen:              "127.0.0.1:7447",
		HTTPListen:               DefaultHTTPListen,
		HTTPMaxBody:              256 << 10,
		HTTPMaxResponse:          4 << 20,
		HTTPRate:                 50,
		HTTPBurst:                100,
		MonitorRate:              5,
		MonitorBurst:             20,
		IdentityRate:             20,
		IdentityBurst:            100,
		NostrKeyRate:             20,
		NostrKeyBurst:            100,
		RelayEventRate:           20,
		RelayEventBurst:          100,
		RelayStorePeerShare:      0.01,
		LogLevel:                 "info",
		LogFormat:                "text",
		MaxDrift:                 Duration{60 * time.Second},
		ReplyTTL:                 Duration{7 * 24 * time.Hour},
		TaskRetention:            Duration{30 * 24 * time.Hour},
		ReconcileAfter:           Duration{5 * time.Minute}, // proposals.InterruptedAfter
		MaxLiveTasks:             100_000,                   // tasks.DefaultMaxLive
		MaxLiveTasksPerRequester: 1000,                      // tasks.DefaultMaxLivePerOwner
		Workers:                  8,
		MemoryLimit:              DefaultMemoryLimit,

		HTTPBodyMemory:   32 << 20,
		HTTPAnswerMemory: 64 << 20,

		MaxStreams:            1000,
		MaxStreamsPerIdentity: 16,
		MaxStreamsPerKey:      16,
		StreamWaitTimeout:     Duration{10 * time.Second},
		MaxStreamWaiters:      256,
		RequestTimeout:        Duration{DefaultRequestTimeout},
		ServiceTimeout:        Duration{DefaultServiceTimeout},
		BackgroundTimeout:     Duration{DefaultBackgroundTimeout},
		Card: Card{
			Name:        "snapnode",
			Description: "A SNAP agent run by snapnode: send it a task; file actions are validated, judged by policy and sandboxed.",
			Version:     "0.1.0",
			OutputModes: []string{"text/plain", "application/json"},
			Skills: []Skill{{
				ID: "tasks", Name: "Tasks",
				Description: "Accepts SNAP tasks (message/send, tasks/get, tasks/cancel) and keeps them durably.",
				Tags:        []string{"tasks", "snap"},
			}},
		},
		Agent: Agent{
			ResponseFormat:       "auto",
			MaxSteps:             30,
			MaxCostCents:         100,
			MaxTimeMinutes:       60,
			Temperature:          0.2,
			MaxTokens:            2048,
			RequestTimeout:       Duration{120 * time.Second},
			MaxJobs:              4,
			MaxQueuedJobs:        1024,
			Lease:                Duration{30 * time.Second},
			RetryBackoff:         Duration{10 * time.Second},
			MaxObservationBytes:  16 << 10,
			MaxAnswerBytes:       64 << 10,
			MaxPendingInputBytes: 1 << 20,
			MaxHistoryBytes:      100 << 20,
			MaxRetries:           3,
		},
		Executor: Executor{
			QuotaBytes: 32 << 20, QuotaFiles: 10_000, QuotaDirs: 1_000,
			WorkspaceMaxBytes: 100 << 20, WorkspaceMaxEntries: 100_000,
			SnapshotMaxAge:   Duration{7 * 24 * time.Hour},
			SnapshotMaxBytes: 128 << 20,
		},
		Audit: Audit{
			RetainDays:    30,
			LevelLow:      "SUMMARY",
			LevelMedium:   "DETAILED",
			LevelHigh:     "FORENSIC",
			LevelCritical: "FORENSIC",
		},
	}
}

// setting ties one setting to its flag and environment variable. A
// setting with no flag (flag "") is read from the environment and the file
// only; its bind is not called and may be nil.
type setting struct {
	flag, env, usage string
	bind             func(fs *flag.FlagSet, c *Config, name, usage string)
	fromEnv          func(c *Config, v string) error
	// list, for a repeatable flag, is the list it appends to.
	list func(c *Config) *[]string
}

// listSetting is a repeatable flag whose variable is comma-separated.
func listSetting(flagName, env, usage string, field func(*Config) *[]string) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.Func(name, usage, func(v string) error { *field(c) = append(*field(c), v); return nil })
		},
		func(c *Config, v string) error { *field(c) = splitTrimmed(v, ","); return nil },
		field}
}

// linesSetting is a list read from the file and the environment only; the
// variable holds one entry a line (for entries that may hold commas, such
// as regular expressions).
func linesSetting(env, usage string, field func(*Config) *[]string) setting {
	return setting{"", env, usage, nil,
		func(c *Config, v string) error { *field(c) = splitTrimmed(v, "\n"); return nil }, nil}
}

// typedSetting is a setting of a field of type T: define declares its
// flag (a flag.FlagSet method such as IntVar), parse reads the text of
// its environment variable.
func typedSetting[T any](flagName, env, usage string, field func(*Config) *T,
	define func(fs *flag.FlagSet, p *T, name string, value T, usage string), parse func(string) (T, error)) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) { define(fs, field(c), name, *field(c), usage) },
		func(c *Config, v string) (err error) { *field(c), err = parse(v); return err }, nil}
}

func stringSetting(flagName, env, usage string, field func(*Config) *string) setting {
	return typedSetting(flagName, env, usage, field, (*flag.FlagSet).StringVar, func(v string) (string, error) { return v, nil })
}

func intSetting(flagName, env, usage string, field func(*Config) *int) setting {
	return typedSetting(flagName, env, usage, field, (*flag.FlagSet).IntVar,
		func(v string) (int, error) { n, err := strconv.Atoi(v); return n, parseRule(err, "a whole number") })
}

func int64Setting(flagName, env, usage string, field func(*Config) *int64) setting {
	return typedSetting(flagName, env, usage, field, (*flag.FlagSet).Int64Var,
		func(v string) (int64, error) {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, parseRule(err, "a whole number")
		})
}

func floatSetting(flagName, env, usage string, field func(*Config) *float64) setting {
	return typedSetting(flagName, env, usage, field, (*flag.FlagSet).Float64Var,
		func(v string) (float64, error) {
			x, err := strconv.ParseFloat(v, 64)
			return x, parseRule(err, "a number")
		})
}

func boolSetting(flagName, env, usage string, field func(*Config) *bool) setting {
	return typedSetting(flagName, env, usage, field, (*flag.FlagSet).BoolVar,
		func(v string) (bool, error) {
			b, err := strconv.ParseBool(v)
			return b, parseRule(err, "true or false")
		})
}

// parseRule is a strconv error as a variable's error says it: the rule,
// not the parser's name.
func parseRule(err error, want string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("want %s, this one is out of range", want)
	}
	return errors.New("want " + want)
}

func durationSetting(flagName, env, usage string, field func(*Config) *Duration) setting {
	return setting{flagName, env, usage,
		func(fs *flag.FlagSet, c *Config, name, usage string) {
			fs.DurationVar(&field(c).Duration, name, field(c).Duration, usage)
		},
		func(c *Config, v string) error { return field(c).UnmarshalText([]byte(v)) }, nil}
}

var settings = []setting{
	stringSetting("data-dir", "SNAPNODE_DATA_DIR", "keep the identity and databases in `DIR`", func(c *Config) *string { return &c.DataDir }),
	stringSetting("key", "SNAPNODE_KEY_FILE", "the identity's secret key `FILE` (default <data-dir>/identity.key; SNAPNODE_KEY holds a key itself)", func(c *Config) *string { return &c.KeyFile }),
	stringSetting("sandbox-dir", "SNAPNODE_SANDBOX_DIR", "carry out proposals in the workspace `DIR` (their /sandbox/; default <data-dir>/sandbox)", func(c *Config) *string { return &c.SandboxDir }),
	stringSetting("policy", "SNAPNODE_POLICY", "judge proposals by the Cedar policy in `FILE` (default: the built-in policy)", func(c *Config) *string { return &c.Policy }),
	stringSetting("database", "SNAPNODE_DATABASE", "keep tasks and replay records in `DSN`: a SQLite file, postgres://…, or memory (nothing survives a restart); default <data-dir>/tasks.db", func(c *Config) *string { return &c.Database }),
	stringSetting("relay-listen", "SNAPNODE_RELAY_LISTEN", "run the embedded relay on `ADDR` when no --relay is given (empty: none)", func(c *Config) *string { return &c.RelayListen }),
	typedSetting("http-listen", "SNAPNODE_HTTP_LISTEN", "serve SNAP over HTTP, SSE and WebSocket on `ADDR` (empty or off: none)",
		func(c *Config) *string { return &c.HTTPListen }, (*flag.FlagSet).StringVar,
		func(v string) (string, error) {
			if v == "off" {
				return "", nil
			}
			return v, nil
		}),
	stringSetting("http-public-url", "SNAPNODE_HTTP_PUBLIC_URL", "advertise the HTTP transport at `URL` in the card (behind a reverse proxy: https://node.example.com)", func(c *Config) *string { return &c.HTTPPublicURL }),
	listSetting("http-allowed-origin", "SNAPNODE_HTTP_ALLOWED_ORIGINS", "let web pages of `ORIGIN` (scheme://host[:port], or * for every one) send messages over HTTP and WebSocket (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.HTTPAllowedOrigins }),
	listSetting("http-allowed-host", "SNAPNODE_HTTP_ALLOWED_HOSTS", "answer HTTP requests addressed to the host name `NAME` too (or * for any; repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.HTTPAllowedHosts }),
	listSetting("relay-allowed-origin", "SNAPNODE_RELAY_ALLOWED_ORIGINS", "let web pages of `ORIGIN` (scheme://host[:port], or * for every one) use the embedded relay (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.RelayAllowedOrigins }),
	boolSetting("console-remote", "SNAPNODE_CONSOLE_REMOTE", "serve the operator console (/console) to clients off loopback too (only behind a TLS reverse proxy)", func(c *Config) *bool { return &c.ConsoleRemote }),
	int64Setting("http-max-body", "SNAPNODE_HTTP_MAX_BODY", "refuse HTTP and WebSocket messages over `BYTES` (413 with SNAP code 1004, or close 1009)", func(c *Config) *int64 { return &c.HTTPMaxBody }),
	int64Setting("http-max-response", "SNAPNODE_HTTP_MAX_RESPONSE", "answer over HTTP and WebSocket with at most `BYTES` a message (larger: 5001 naming the limit)", func(c *Config) *int64 { return &c.HTTPMaxResponse }),
	floatSetting("http-rate", "SNAPNODE_HTTP_RATE", "allow each peer `N` HTTP requests or WebSocket messages a second (0: no limit)", func(c *Config) *float64 { return &c.HTTPRate }),
	intSetting("http-burst", "SNAPNODE_HTTP_BURST", "let each peer burst to `N` HTTP requests above its rate", func(c *Config) *int { return &c.HTTPBurst }),
	floatSetting("monitor-rate", "SNAPNODE_MONITOR_RATE", "allow each peer `N` /healthz and /metrics requests a second (0: no limit)", func(c *Config) *float64 { return &c.MonitorRate }),
	intSetting("monitor-burst", "SNAPNODE_MONITOR_BURST", "let each peer burst to `N` /healthz and /metrics requests above its rate", func(c *Config) *int { return &c.MonitorBurst }),
	stringSetting("metrics-listen", "SNAPNODE_METRICS_LISTEN", "serve /metrics on `ADDR` instead of the HTTP transport's address (empty: on --http-listen, to clients on loopback)", func(c *Config) *string { return &c.MetricsListen }),
	boolSetting("metrics-public", "SNAPNODE_METRICS_PUBLIC", "serve /metrics on --http-listen to clients off loopback too (by default they get 404)", func(c *Config) *bool { return &c.MetricsPublic }),
	intSetting("http-max-conns", "SNAPNODE_HTTP_MAX_CONNS", "hold at most `N` HTTP and WebSocket connections (0: half the open-file limit)", func(c *Config) *int { return &c.HTTPMaxConns }),
	intSetting("relay-max-conns", "SNAPNODE_RELAY_MAX_CONNS", "hold at most `N` connections (WebSocket clients or not) on the embedded relay (0: 4096)", func(c *Config) *int { return &c.RelayMaxConns }),
	intSetting("relay-store-max-events", "SNAPNODE_RELAY_STORE_MAX_EVENTS", "keep at most `N` stored events in the embedded relay's database, deleting the oldest past it (0: 1,000,000)", func(c *Config) *int { return &c.RelayStoreMaxEvents }),
	int64Setting("relay-store-max-bytes", "SNAPNODE_RELAY_STORE_MAX_BYTES", "keep at most `BYTES` of stored events in the embedded relay's database, deleting the oldest past it (0: 1 GiB)", func(c *Config) *int64 { return &c.RelayStoreMaxBytes }),
	floatSetting("relay-store-peer-share", "SNAPNODE_RELAY_STORE_PEER_SHARE", "let the stored events of each client address of the embedded relay take at most the part `P` (0 to 1) of its store bounds, deleting its own oldest past it (0: no share; loopback has none)", func(c *Config) *float64 { return &c.RelayStorePeerShare }),
	floatSetting("relay-event-rate", "SNAPNODE_RELAY_EVENT_RATE", "let the embedded relay take `N` events a second from each client address, its connections together (0: no limit; loopback not limited)", func(c *Config) *float64 { return &c.RelayEventRate }),
	intSetting("relay-event-burst", "SNAPNODE_RELAY_EVENT_BURST", "let each client address of the embedded relay burst to `N` events above its rate", func(c *Config) *int { return &c.RelayEventBurst }),
	intSetting("relay-max-conns-per-peer", "SNAPNODE_RELAY_MAX_CONNS_PER_PEER", "hold at most `N` of the embedded relay's clients from one address (0: 64; loopback not counted)", func(c *Config) *int { return &c.RelayMaxConnsPerPeer }),
	intSetting("http-max-conns-per-peer", "SNAPNODE_HTTP_MAX_CONNS_PER_PEER", "hold at most `N` connections from one client address (0: a sixteenth of --http-max-conns)", func(c *Config) *int { return &c.HTTPMaxConnsPerPeer }),
	int64Setting("http-body-memory", "SNAPNODE_HTTP_BODY_MEMORY", "hold at most `BYTES` of HTTP and WebSocket messages at once, all peers together (over: HTTP 429)", func(c *Config) *int64 { return &c.HTTPBodyMemory }),
	int64Setting("http-answer-memory", "SNAPNODE_HTTP_ANSWER_MEMORY", "hold at most `BYTES` of HTTP, SSE and WebSocket answers being written at once, all peers together (over: 5003, HTTP 503)", func(c *Config) *int64 { return &c.HTTPAnswerMemory }),
	floatSetting("identity-rate", "SNAPNODE_IDENTITY_RATE", "allow each SNAP identity `N` requests a second over every transport (0: no limit)", func(c *Config) *float64 { return &c.IdentityRate }),
	intSetting("identity-burst", "SNAPNODE_IDENTITY_BURST", "let each identity burst to `N` requests above its rate", func(c *Config) *int { return &c.IdentityBurst }),
	floatSetting("nostr-key-rate", "SNAPNODE_NOSTR_KEY_RATE", "allow each Nostr key `N` request events a second, checked before decryption (0: no limit)", func(c *Config) *float64 { return &c.NostrKeyRate }),
	intSetting("nostr-key-burst", "SNAPNODE_NOSTR_KEY_BURST", "let each Nostr key burst to `N` request events above its rate", func(c *Config) *int { return &c.NostrKeyBurst }),
	intSetting("max-streams", "SNAPNODE_MAX_STREAMS", "hold at most `N` streams (message/stream, tasks/resubscribe) open at once", func(c *Config) *int { return &c.MaxStreams }),
	intSetting("max-streams-per-identity", "SNAPNODE_MAX_STREAMS_PER_IDENTITY", "hold at most `N` streams of one SNAP identity", func(c *Config) *int { return &c.MaxStreamsPerIdentity }),
	intSetting("max-streams-per-key", "SNAPNODE_MAX_STREAMS_PER_KEY", "hold at most `N` streams of one key's addresses (mainnet and testnet) together", func(c *Config) *int { return &c.MaxStreamsPerKey }),
	intSetting("max-newcomer-streams", "SNAPNODE_MAX_NEWCOMER_STREAMS", "hold at most `N` streams of identities with no task history together (0: half of --max-streams)", func(c *Config) *int { return &c.MaxNewcomerStreams }),
	durationSetting("stream-wait-timeout", "SNAPNODE_STREAM_WAIT_TIMEOUT", "let a stream request wait `DURATION` for a slot, known identities first, before refusing it (0: refuse at once)", func(c *Config) *Duration { return &c.StreamWaitTimeout }),
	durationSetting("request-timeout", "SNAPNODE_REQUEST_TIMEOUT", "answer a request that is not done within `DURATION` 5003, abandoning its database calls (streams and runs of proposals excepted)", func(c *Config) *Duration { return &c.RequestTimeout }),
	durationSetting("service-timeout", "SNAPNODE_SERVICE_TIMEOUT", "end a service/call whose service declares no bound of its own after `DURATION` (answered 2006: its id is spent)", func(c *Config) *Duration { return &c.ServiceTimeout }),
	durationSetting("background-timeout", "SNAPNODE_BACKGROUND_TIMEOUT", "abandon one pass of a background loop on the database (sealer, recounts, sweeps, retention) after `DURATION`, to try again at its next tick", func(c *Config) *Duration { return &c.BackgroundTimeout }),
	intSetting("max-stream-waiters", "SNAPNODE_MAX_STREAM_WAITERS", "let at most `N` stream requests wait for a slot, known identities and newcomers each", func(c *Config) *int { return &c.MaxStreamWaiters }),
	intSetting("max-live-tasks-per-requester", "SNAPNODE_MAX_LIVE_TASKS_PER_REQUESTER", "hold at most `N` live (not ended) tasks of one requester (over: 5002; 0: no bound)", func(c *Config) *int { return &c.MaxLiveTasksPerRequester }),
	intSetting("max-live-tasks", "SNAPNODE_MAX_LIVE_TASKS", "hold at most `N` live (not ended) tasks of all requesters together (over: 5003; 0: no bound)", func(c *Config) *int { return &c.MaxLiveTasks }),
	stringSetting("log-level", "SNAPNODE_LOG_LEVEL", "log `LEVEL`: debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	stringSetting("log-format", "SNAPNODE_LOG_FORMAT", "log in `FORMAT`: text (key=value) or json (one object a line)", func(c *Config) *string { return &c.LogFormat }),
	boolSetting("testnet", "SNAPNODE_TESTNET", "use the testnet (tb1p…) address", func(c *Config) *bool { return &c.Testnet }),
	listSetting("relay", "SNAPNODE_RELAYS", "use the relay at `URL` (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.Relays }),
	durationSetting("max-drift", "SNAPNODE_MAX_DRIFT", "accept SNAP timestamps and action descriptors' created_at within `DURATION` of the clock", func(c *Config) *Duration { return &c.MaxDrift }),
	durationSetting("reply-ttl", "SNAPNODE_REPLY_TTL", "expire replies to stored requests after `DURATION`", func(c *Config) *Duration { return &c.ReplyTTL }),
	durationSetting("task-retention", "SNAPNODE_TASK_RETENTION", "delete tasks `DURATION` after they end (completed, failed, canceled); 0 keeps them", func(c *Config) *Duration { return &c.TaskRetention }),
	durationSetting("reconcile-after", "SNAPNODE_RECONCILE_AFTER", "take up a task as interrupted once it stood still for `DURATION`, in the passes every minute (on PostgreSQL at start too; longer than a replica ever works on one step)", func(c *Config) *Duration { return &c.ReconcileAfter }),
	intSetting("workers", "SNAPNODE_WORKERS", "handle `N` requests at once", func(c *Config) *int { return &c.Workers }),
	int64Setting("memory-limit", "SNAPNODE_MEMORY_LIMIT", "hold the Go runtime's memory near `BYTES`, collecting when it is reached, while 1.25 times its live heap fits (past that the soft limit follows the live heap); 0: GOMEMLIMIT, else none", func(c *Config) *int64 { return &c.MemoryLimit }),
	listSetting("card-relay", "SNAPNODE_CARD_RELAYS", "advertise the relay at `URL` in the card instead of the relays the node uses (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.Card.NostrRelays }),
	listSetting("operator", "SNAPNODE_OPERATORS", "give `ADDR` the operator role (repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.Operators }),
	listSetting("service-caller", "SNAPNODE_SERVICE_CALLERS", "let `ADDR` call the node's services (service/call; repeatable; the variable is comma-separated)", func(c *Config) *[]string { return &c.ServiceCallers }),

	// The agent runtime, [agent]. Settings with no flag are set in the
	// environment or the file. The API key is none of them: see LLMAPIKey.
	stringSetting("llm-url", "SNAPNODE_LLM_URL", "run the agent with the OpenAI-compatible model server at `URL`, a base URL ending in /v1 (such as http://127.0.0.1:11434/v1 for Ollama; needs --llm-model)", func(c *Config) *string { return &c.Agent.LLMURL }),
	stringSetting("llm-model", "SNAPNODE_LLM_MODEL", "ask the model server for the model `NAME` (needs --llm-url)", func(c *Config) *string { return &c.Agent.LLMModel }),
	stringSetting("", "SNAPNODE_LLM_API_KEY_FILE", "read the model server's API key from FILE, readable by its owner only, when SNAPNODE_LLM_API_KEY is unset", func(c *Config) *string { return &c.Agent.LLMAPIKeyFile }),
	stringSetting("", "SNAPNODE_LLM_RESPONSE_FORMAT", "constrain answers to JSON by auto, json_schema, json_object or none", func(c *Config) *string { return &c.Agent.ResponseFormat }),
	stringSetting("agent-reasoning-effort", "SNAPNODE_AGENT_REASONING_EFFORT", "ask a thinking model to think with `EFFORT`: none (off), minimal, low, medium, high or xhigh, sent as reasoning_effort (empty: nothing sent)", func(c *Config) *string { return &c.Agent.ReasoningEffort }),
	intSetting("agent-max-steps", "SNAPNODE_AGENT_MAX_STEPS", "end an agent job after `N` model calls (1…10000)", func(c *Config) *int { return &c.Agent.MaxSteps }),
	floatSetting("", "SNAPNODE_AGENT_MAX_COST_CENTS", "end an agent job once it has cost CENTS US cents (0: no limit)", func(c *Config) *float64 { return &c.Agent.MaxCostCents }),
	floatSetting("", "SNAPNODE_AGENT_MAX_TIME_MINUTES", "end an agent job after MINUTES minutes", func(c *Config) *float64 { return &c.Agent.MaxTimeMinutes }),
	floatSetting("", "SNAPNODE_AGENT_PRICE_PER_MTOK_PROMPT", "price prompt tokens at USD US dollars a million", func(c *Config) *float64 { return &c.Agent.PricePerMTokPrompt }),
	floatSetting("", "SNAPNODE_AGENT_PRICE_PER_MTOK_COMPLETION", "price completion tokens at USD US dollars a million", func(c *Config) *float64 { return &c.Agent.PricePerMTokCompletion }),
	floatSetting("agent-temperature", "SNAPNODE_AGENT_TEMPERATURE", "sample the model at temperature `T` (0…2)", func(c *Config) *float64 { return &c.Agent.Temperature }),
	intSetting("", "SNAPNODE_AGENT_MAX_TOKENS", "cap one answer at N tokens", func(c *Config) *int { return &c.Agent.MaxTokens }),
	durationSetting("", "SNAPNODE_AGENT_REQUEST_TIMEOUT", "give up on one model call after DURATION", func(c *Config) *Duration { return &c.Agent.RequestTimeout }),
	intSetting("", "SNAPNODE_AGENT_CONTEXT_TOKENS", "take the model's context window to be N tokens (0: ask the server, else 16384)", func(c *Config) *int { return &c.Agent.ContextTokens }),
	intSetting("agent-max-jobs", "SNAPNODE_AGENT_MAX_JOBS", "work on `N` agent jobs at once", func(c *Config) *int { return &c.Agent.MaxJobs }),
	intSetting("", "SNAPNODE_AGENT_MAX_JOBS_PER_REQUESTER", "work on at most N agent jobs of one requester at once (0: half of max_jobs, rounded up)", func(c *Config) *int { return &c.Agent.MaxJobsPerRequester }),
	intSetting("", "SNAPNODE_AGENT_MAX_QUEUED_JOBS", "refuse a new free-text task (5003) while N agent jobs wait for a slot or are worked on", func(c *Config) *int { return &c.Agent.MaxQueuedJobs }),
	intSetting("", "SNAPNODE_AGENT_MAX_QUEUED_JOBS_PER_REQUESTER", "refuse a requester's new free-text task (5002) while N of its agent jobs wait or are worked on (0: a sixteenth of max_queued_jobs)", func(c *Config) *int { return &c.Agent.MaxQueuedJobsPerRequester }),
	intSetting("", "SNAPNODE_AGENT_MAX_NEWCOMER_QUEUED_JOBS", "refuse a new free-text task of a requester with no task answered here (5003) while N agent jobs wait or are worked on (0: half of max_queued_jobs)", func(c *Config) *int { return &c.Agent.MaxNewcomerQueuedJobs }),
	durationSetting("", "SNAPNODE_AGENT_LEASE", "keep a claimed job this node's for DURATION without renewal", func(c *Config) *Duration { return &c.Agent.Lease }),
	durationSetting("", "SNAPNODE_AGENT_RETRY_BACKOFF", "wait DURATION before trying a failed model call again (doubling each time, each wait at most 1m)", func(c *Config) *Duration { return &c.Agent.RetryBackoff }),
	intSetting("", "SNAPNODE_AGENT_MAX_OBSERVATION_BYTES", "feed the model at most BYTES of file content a step", func(c *Config) *int { return &c.Agent.MaxObservationBytes }),
	intSetting("", "SNAPNODE_AGENT_MAX_ANSWER_BYTES", "refuse a model answer over BYTES", func(c *Config) *int { return &c.Agent.MaxAnswerBytes }),
	intSetting("", "SNAPNODE_AGENT_MAX_PENDING_INPUT_BYTES", "tell a job's next step at most BYTES of the messages since its last one (the rest is left out with a note)", func(c *Config) *int { return &c.Agent.MaxPendingInputBytes }),
	int64Setting("", "SNAPNODE_AGENT_MAX_HISTORY_BYTES", "archive a job's oldest history, compressed, once its live history passes BYTES", func(c *Config) *int64 { return &c.Agent.MaxHistoryBytes }),
	intSetting("", "SNAPNODE_AGENT_MAX_RETRIES", "honour N RETRY answers a phase", func(c *Config) *int { return &c.Agent.MaxRetries }),
	linesSetting("SNAPNODE_AGENT_REDACT", "remove matches of these regular expressions, one a line, from stored history", func(c *Config) *[]string { return &c.Agent.Redact }),
	stringSetting("", "SNAPNODE_AGENT_SYSTEM_PROMPT", "append TEXT to the built-in system prompt", func(c *Config) *string { return &c.Agent.SystemPrompt }),
	linesSetting("SNAPNODE_AGENT_COMMAND", "run the agent with this external worker instead of a model server: the program and its arguments, one a line", func(c *Config) *[]string { return &c.Agent.Command }),
	stringSetting("", "SNAPNODE_AGENT_COMMAND_DIR", "run the external worker in DIR, outside the sandbox (default: the system's temporary directory)", func(c *Config) *string { return &c.Agent.CommandDir }),
	linesSetting("SNAPNODE_AGENT_COMMAND_ENV", "give the external worker these NAME=value variables, one a line, and PATH: nothing else of the node's environment", func(c *Config) *[]string { return &c.Agent.CommandEnv }),
	stringSetting("", "SNAPNODE_AGENT_DELEGATE", "run the agent by handing each job to the SNAP agent at this P2TR address (bc1p…) over the node's relays, instead of a model server or an external worker", func(c *Config) *string { return &c.Agent.Delegate }),
	boolSetting("agent-delegate-private-endpoints", "SNAPNODE_AGENT_DELEGATE_PRIVATE_ENDPOINTS", "let the node post to the delegate's HTTP and WebSocket endpoints on loopback, link-local, private and other non-public addresses (off: only Nostr reaches such a delegate)", func(c *Config) *bool { return &c.Agent.DelegatePrivateEndpoints }),
	durationSetting("", "SNAPNODE_AGENT_STEP_TIMEOUT", "stop an external worker that does not answer a step within DURATION (0: the request time-out)", func(c *Config) *Duration { return &c.Agent.StepTimeout }),
	boolSetting("agent-review", "SNAPNODE_AGENT_REVIEW", "have a supervisor review every job the agent's worker says is COMPLETED before it ends", func(c *Config) *bool { return &c.Agent.Review }),
	boolSetting("", "SNAPNODE_AGENT_SENSITIVE", "seal the jobs' archived history (their prompts) with the key in agent.history_key_file", func(c *Config) *bool { return &c.Agent.Sensitive }),
	stringSetting("", "SNAPNODE_AGENT_HISTORY_KEY_FILE", "read the key that seals archived job history from FILE (64 hex digits, readable by its owner only)", func(c *Config) *string { return &c.Agent.HistoryKeyFile }),
	stringSetting("", "SNAPNODE_AGENT_REVIEW_MODEL", "ask the model NAME as the supervisor (default: --llm-model)", func(c *Config) *string { return &c.Agent.ReviewModel }),
	stringSetting("", "SNAPNODE_AGENT_REVIEW_REASONING_EFFORT", "ask the supervisor's model to think with EFFORT: default (nothing sent), none, minimal, low, medium, high or xhigh (empty: agent.reasoning_effort's)", func(c *Config) *string { return &c.Agent.ReviewReasoningEffort }),

	// What the host states for actions' preconditions, [executor].
	boolSetting("executor-user-idle", "SNAPNODE_EXECUTOR_USER_IDLE", "state that nobody uses this machine interactively: actions whose descriptor asks for an idle user may run", func(c *Config) *bool { return &c.Executor.UserIdle }),
	boolSetting("executor-network-available", "SNAPNODE_EXECUTOR_NETWORK_AVAILABLE", "state that this host's network is up: actions whose descriptor asks for it may run (they still get no network access)", func(c *Config) *bool { return &c.Executor.NetworkAvailable }),
	int64Setting("executor-quota-bytes", "SNAPNODE_EXECUTOR_QUOTA_BYTES", "let one requester's actions add at most `BYTES` of files to the workspace (over: LIMIT_EXCEEDED, limit requester_bytes)", func(c *Config) *int64 { return &c.Executor.QuotaBytes }),
	int64Setting("executor-quota-files", "SNAPNODE_EXECUTOR_QUOTA_FILES", "let one requester's actions add at most `N` files to the workspace (over: LIMIT_EXCEEDED, limit requester_files)", func(c *Config) *int64 { return &c.Executor.QuotaFiles }),
	int64Setting("executor-quota-dirs", "SNAPNODE_EXECUTOR_QUOTA_DIRS", "let one requester's actions add at most `N` folders to the workspace (over: LIMIT_EXCEEDED, limit requester_dirs)", func(c *Config) *int64 { return &c.Executor.QuotaDirs }),
	int64Setting("executor-workspace-max-bytes", "SNAPNODE_EXECUTOR_WORKSPACE_MAX_BYTES", "let the actions of all requesters together fill the workspace with at most `BYTES` of files (over: LIMIT_EXCEEDED, limit total_bytes)", func(c *Config) *int64 { return &c.Executor.WorkspaceMaxBytes }),
	int64Setting("executor-workspace-max-entries", "SNAPNODE_EXECUTOR_WORKSPACE_MAX_ENTRIES", "let the actions of all requesters together fill the workspace with at most `N` files and folders (over: LIMIT_EXCEEDED, limit total_entries)", func(c *Config) *int64 { return &c.Executor.WorkspaceMaxEntries }),
	durationSetting("", "SNAPNODE_EXECUTOR_SNAPSHOT_MAX_AGE", "keep the rollback snapshot of a promoted action for DURATION; older actions cannot be rolled back (0: whatever their age)", func(c *Config) *Duration { return &c.Executor.SnapshotMaxAge }),
	int64Setting("", "SNAPNODE_EXECUTOR_SNAPSHOT_MAX_BYTES", "keep at most BYTES of rollback snapshots per requester, the oldest pruned first (0: no bound)", func(c *Config) *int64 { return &c.Executor.SnapshotMaxBytes }),
	// The audit log, [audit].
	intSetting("audit-retain-days", "SNAPNODE_AUDIT_RETAIN_DAYS", "keep audit entries `N` days, pruned behind a signed checkpoint (0: keep every entry)", func(c *Config) *int { return &c.Audit.RetainDays }),
	stringSetting("", "SNAPNODE_AUDIT_LEVEL_LOW", "audit LOW-risk actions at LEVEL: SUMMARY, DETAILED or FORENSIC", func(c *Config) *string { return &c.Audit.LevelLow }),
	stringSetting("", "SNAPNODE_AUDIT_LEVEL_MEDIUM", "audit MEDIUM-risk actions at LEVEL: SUMMARY, DETAILED or FORENSIC", func(c *Config) *string { return &c.Audit.LevelMedium }),
	stringSetting("", "SNAPNODE_AUDIT_LEVEL_HIGH", "audit HIGH-risk actions at LEVEL: SUMMARY, DETAILED or FORENSIC", func(c *Config) *string { return &c.Audit.LevelHigh }),
	stringSetting("", "SNAPNODE_AUDIT_LEVEL_CRITICAL", "audit CRITICAL-risk actions (refused) at LEVEL: SUMMARY, DETAILED or FORENSIC", func(c *Config) *string { return &c.Audit.LevelCritical }),
}

// splitTrimmed splits v at sep into its non-blank entries, trimmed.
func splitTrimmed(v, sep string) []string {
	var out []string
	for _, s := range strings.Split(v, sep) {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Flags defines the settings' flags on fs, plus --config.
func Flags(fs *flag.FlagSet, c *Config) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "read settings from the TOML `FILE` (also SNAPNODE_CONFIG)")
	for _, s := range settings {
		if s.flag != "" {
			s.bind(fs, c, s.flag, s.usage)
		}
	}
}

// Load completes c after fs has parsed the command line: it reads the TOML
// file, then the environment, then re-applies the flags that were set, so
// that each setting has the value of its most specific source. getenv is
// os.Getenv in production. A daemon that reloads its settings uses
// [NewSources] instead.
func Load(c *Config, fs *flag.FlagSet, getenv func(string) string) error {
	base, _, err := NewSources(c, fs, getenv).LoadOverridden()
	if err != nil {
		return err
	}
	*c = base
	return nil
}

// Sources are where a command's settings come from: its command line as
// parsed, the SNAPNODE_* environment, and the TOML file named by --config
// or SNAPNODE_CONFIG. Each Load reads the environment and the file again,
// so that a node reloading its settings gets what a restart with the same
// command line would give it.
type Sources struct {
	getenv func(string) string
	// set are the flags given on the command line; texts their values
	// (repeatable flags excepted), lists what the repeatable ones said.
	set   map[string]bool
	texts map[string]string
	lists Config
	// file is --config, when it was given.
	file string
}

// NewSources records what the command line said: call it after fs parsed
// it, with c the settings that [Flags] bound to fs. Later changes to c do
// not change the Sources.
func NewSources(c *Config, fs *flag.FlagSet, getenv func(string) string) *Sources {
	s := &Sources{getenv: getenv, set: map[string]bool{}, texts: map[string]string{}, file: c.ConfigFile}
	fs.Visit(func(f *flag.Flag) {
		s.set[f.Name] = true
		s.texts[f.Name] = f.Value.String()
	})
	for _, st := range settings {
		if st.list != nil {
			*st.list(&s.lists) = slices.Clone(*st.list(c))
		}
	}
	return s
}

// Load reads the settings from the sources, as at start: the file, then
// the environment, then the flags; the result is validated.
func (s *Sources) Load() (Config, error) {
	c, _, err := s.LoadOverridden()
	return c, err
}

// LoadOverridden is Load, and names the settings the file gives a value
// that a flag or a SNAPNODE_* variable replaces with another (by their
// TOML names, as Changed names them): the file's values of those are not
// used, at start as on a reload, and editing them changes nothing.
func (s *Sources) LoadOverridden() (Config, []string, error) {
	c, overridden, locate, err := s.read()
	if err != nil {
		return Config{}, nil, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, nil, locate(err)
	}
	return c, overridden, nil
}

// read is LoadOverridden without validation. locate says an error of
// Validate on the settings read with where each setting's value comes
// from: its place in the file, or the variable or flag that gave it.
func (s *Sources) read() (_ Config, overridden []string, locate func(error) error, _ error) {
	file := s.file
	if !s.set["config"] {
		file = s.getenv("SNAPNODE_CONFIG")
	}
	base := Default()
	inFile := map[string]bool{} // the keys the file gives, and their tables
	var text string
	if file != "" {
		b, err := readfile.Regular(file, MaxFileBytes)
		if err != nil {
			return Config{}, nil, nil, fmt.Errorf("config: %w", err)
		}
		text = string(b)
		md, err := toml.Decode(text, &base)
		if err != nil {
			return Config{}, nil, nil, decodeError(file, text, err)
		}
		if un := md.Undecoded(); len(un) > 0 {
			key := un[0].String()
			known := append(fileKeys(reflect.TypeFor[Config](), ""), "agent", "card", "executor", "audit")
			known = append(known, arrayTableKeys(reflect.TypeFor[Card](), "card.")...)
			return Config{}, nil, nil, fmt.Errorf("config: %s: unknown setting %q%s", at(file, text, un[0]), key, suggest.DidYouMean(key, known, ""))
		}
		for _, k := range md.Keys() {
			for i := 1; i <= len(k); i++ {
				inFile[strings.Join(k[:i], ".")] = true
			}
		}
	}
	base.ConfigFile = file
	fromFile := base // the environment and the flags assign, never change a list in place
	// given names the variable or flag that gave each setting its value,
	// for the errors of Validate; a later source replaces an earlier one.
	given := map[string]string{}
	for _, st := range settings {
		if v := s.getenv(st.env); v != "" {
			before := base
			if err := st.fromEnv(&base, v); err != nil {
				return Config{}, nil, nil, fmt.Errorf("config: %s=%q: %w", st.env, v, err)
			}
			for _, key := range Changed(before, base) {
				given[key] = st.env
			}
		}
	}
	// Flags win. A repeatable flag's value is what was parsed; the others
	// are re-applied from their text.
	for name := range s.set {
		st, ok := lookupSetting(name)
		switch {
		case !ok:
			continue // --config, or a flag of the command's own
		case st.list != nil:
			before := base
			*st.list(&base) = slices.Clone(*st.list(&s.lists))
			for _, key := range Changed(before, base) {
				given[key] = "--" + name
			}
		default:
			before := base
			if err := st.fromEnv(&base, s.texts[name]); err != nil {
				return Config{}, nil, nil, fmt.Errorf("config: --%s: %w", name, err)
			}
			for _, key := range Changed(before, base) {
				given[key] = "--" + name
			}
		}
	}
	changed := map[string]bool{}
	for _, name := range Changed(fromFile, base) {
		changed[name] = true
		if inFile[name] {
			overridden = append(overridden, name)
		}
	}
	locate = func(err error) error {
		return locateErrors(err, func(key string) (string, bool) {
			// [card] changes as a whole: Changed names it so.
			whole, _, _ := strings.Cut(key, ".")
			if whole != "card" {
				whole = key
			}
			switch {
			case given[whole] != "":
				return given[whole], false
			case inFile[key] && !changed[whole]:
				return at(file, text, toml.Key(strings.Split(key, "."))), true
			}
			return "", false
		})
	}
	return base, overridden, locate, nil
}

// Changed returns the settings that differ between a and b, by their TOML
// names ("operators", "card", "agent.max_steps"), in the order of Config.
func Changed(a, b Config) []string {
	var out []string
	diff(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

// diff appends the TOML names of the fields of the structs a and b that
// differ, descending into the [agent], [executor] and [audit] tables
// (their settings need a restart, and a warning names each one); [card]
// is named as a whole, since it changes on a reload as one.
func diff(a, b reflect.Value, prefix string, out *[]string) {
	for i := range a.NumField() {
		f := a.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if t := f.Type; t == reflect.TypeFor[Agent]() || t == reflect.TypeFor[Executor]() || t == reflect.TypeFor[Audit]() {
			diff(a.Field(i), b.Field(i), name+".", out)
			continue
		}
		x, y := a.Field(i), b.Field(i)
		if x.Kind() == reflect.Slice && x.Len() == 0 && y.Len() == 0 {
			continue // nil and empty say the same
		}
		if x.Kind() == reflect.Float64 && math.IsNaN(x.Float()) && math.IsNaN(y.Float()) {
			continue // NaN, which equals nothing, is the same setting
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			*out = append(*out, prefix+name)
		}
	}
}

// UnknownVariables returns the SNAPNODE_* variables of environ (entries
// NAME=value, as os.Environ gives them) that the node does not read, in
// order, each with the variable it may be a misspelling of: "SNAPNODE_WORKER
// (did you mean SNAPNODE_WORKERS?)". Such a variable is ignored, so that
// an edit of it changes nothing; `snapnode run` warns of them. Values are
// never returned: a variable may hold a key.
func UnknownVariables(environ []string) []string {
	known := []string{"CONFIG", strings.TrimPrefix(identity.EnvKey, "SNAPNODE_"), strings.TrimPrefix(LLMAPIKeyEnv, "SNAPNODE_")} // without SNAPNODE_
	for _, s := range settings {
		known = append(known, strings.TrimPrefix(s.env, "SNAPNODE_"))
	}
	var out []string
	for _, e := range environ {
		name, _, _ := strings.Cut(e, "=")
		rest, ok := strings.CutPrefix(name, "SNAPNODE_")
		if !ok || slices.Contains(known, rest) || testVariable(rest) {
			continue
		}
		out = append(out, name+suggest.DidYouMean(rest, known, "SNAPNODE_"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// testVariable reports whether SNAPNODE_ followed by rest is a variable of
// snapnode's tests and benchmarks, which a developer's shell may hold.
func testVariable(rest string) bool {
	return strings.HasPrefix(rest, "TEST") || strings.HasPrefix(rest, "BENCH_") || rest == "SNAP_REFERENCE"
}

// lookupSetting returns the setting whose flag is name.
func lookupSetting(name string) (setting, bool) {
	for _, s := range settings {
		if s.flag != "" && s.flag == name {
			return s, true
		}
	}
	return setting{}, false
}

// source names where the setting read from the variable env is set on the
// command line: its flag, or the variable when it has no flag.
func source(env string) string {
	for _, s := range settings {
		if s.env == env && s.flag != "" {
			return "--" + s.flag
		}
	}
	return env
}

// Validate checks the settings that can be checked before starting.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("config: data_dir is empty"))
	}
	if len(c.Relays) == 0 && c.RelayListen == "" {
		errs = append(errs, errors.New("config: no relay: give --relay URL or an embedded relay address (--relay-listen)"))
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"relays", c.Relays}, {"card.nostr_relays", c.Card.NostrRelays}} {
		for _, r := range l.list {
			if !relayURL(r) {
				errs = append(errs, fmt.Errorf("config: %s: %s: want a ws:// or wss:// URL with a host and no user or password", l.name, showURL(r)))
			}
		}
	}
	if c.HTTPListen == "off" {
		c.HTTPListen = ""
	}
	if c.HTTPListen != "" {
		if _, _, err := net.SplitHostPort(c.HTTPListen); err != nil {
			errs = append(errs, fmt.Errorf("config: http_listen %q: want host:port: %w", c.HTTPListen, err))
		}
	}
	if c.HTTPPublicURL != "" {
		u, err := url.Parse(c.HTTPPublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("config: http_public_url %s: want an http:// or https:// URL with a host and no user, password or query", showURL(c.HTTPPublicURL)))
		}
	}
	for _, l := range []struct {
		name string
		list []string
	}{{"http_allowed_origins", c.HTTPAllowedOrigins}, {"relay_allowed_origins", c.RelayAllowedOrigins}} {
		if _, err := origins.Parse(l.list); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", l.name, err))
		}
	}
	if _, err := origins.ParseHosts(c.HTTPAllowedHosts); err != nil {
		errs = append(errs, fmt.Errorf("config: http_allowed_hosts: %w", err))
	}
	if c.MetricsListen != "" {
		if _, port, err := net.SplitHostPort(c.MetricsListen); err != nil {
			errs = append(errs, fmt.Errorf("config: metrics_listen %q: want host:port: %w", c.MetricsListen, err))
		} else if c.MetricsListen == c.HTTPListen && port != "0" { // port 0: any free one
			errs = append(errs, fmt.Errorf("config: metrics_listen %q: want an address other than http_listen's, or empty to serve /metrics there", c.MetricsListen))
		}
	}
	errs = append(errs, checkBounds(c)...)
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("config: log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("config: log_format %q: want text or json", c.LogFormat))
	}
	for _, list := range []struct {
		name  string
		addrs []string
	}{{"operators", c.Operators}, {"service_callers", c.ServiceCallers}} {
		for _, a := range list.addrs {
			if _, err := identity.ParseAddress(a); err != nil {
				errs = append(errs, fmt.Errorf("config: %s: %w", list.name, err))
			}
		}
	}
	errs = append(errs, c.Agent.validate()...)
	errs = append(errs, c.Audit.validate()...)
	return errors.Join(errs...)
}

// validate checks the [audit] table; each error names the TOML key and
// its flag (or variable), the rule and the value received.
func (a *Audit) validate() []error {
	var errs []error
	for _, l := range []struct{ key, env, v string }{
		{"level_low", "SNAPNODE_AUDIT_LEVEL_LOW", a.LevelLow},
		{"level_medium", "SNAPNODE_AUDIT_LEVEL_MEDIUM", a.LevelMedium},
		{"level_high", "SNAPNODE_AUDIT_LEVEL_HIGH", a.LevelHigh},
		{"level_critical", "SNAPNODE_AUDIT_LEVEL_CRITICAL", a.LevelCritical},
	} {
		switch l.v {
		case "SUMMARY", "DETAILED", "FORENSIC":
		default:
			errs = append(errs, fmt.Errorf("config: audit.%s (%s): want SUMMARY, DETAILED or FORENSIC; got %q", l.key, source(l.env), l.v))
		}
	}
	return errs
}

// maxTimeMinutes is the largest agent.max_time_minutes: what a
// time.Duration holds.
const maxTimeMinutes = float64(math.MaxInt64 / int64(time.Minute))

// validate checks the [agent] table. Each error names the TOML key and
// its flag (or variable), the rule, and the value received.
func (a *Agent) validate() []error {
	var errs []error
	bad := func(key, env, rule string, got any) {
		errs = append(errs, fmt.Errorf("config: agent.%s (%s): want %s; got %v", key, source(env), rule, got))
	}
	a.LLMURL = strings.TrimSuffix(a.LLMURL, "/")
	if a.LLMURL != "" {
		if got, ok := checkLLMURL(a.LLMURL); !ok {
			bad("llm_url", "SNAPNODE_LLM_URL", "a base URL ending in /v1, such as http://127.0.0.1:11434/v1", got)
		}
	}
	if len(a.Command) > 0 && (a.LLMURL != "" || a.LLMModel != "") {
		errs = append(errs, fmt.Errorf("config: agent.command (%s) and agent.llm_url (%s): want one of them (an external worker or a model server); got both",
			source("SNAPNODE_AGENT_COMMAND"), source("SNAPNODE_LLM_URL")))
	}
	if a.Delegate != "" {
		if _, err := identity.ParseAddress(a.Delegate); err != nil {
			bad("delegate", "SNAPNODE_AGENT_DELEGATE", "the P2TR address (bc1p…) of a SNAP agent", fmt.Sprintf("%q (%v)", a.Delegate, err))
		}
		if len(a.Command) > 0 || a.LLMURL != "" || a.LLMModel != "" {
			errs = append(errs, fmt.Errorf("config: agent.delegate (%s), agent.command (%s) and agent.llm_url (%s): want one of them (a delegate, an external worker or a model server); got more",
				source("SNAPNODE_AGENT_DELEGATE"), source("SNAPNODE_AGENT_COMMAND"), source("SNAPNODE_LLM_URL")))
		}
	}
	if a.Review && (len(a.Command) > 0 || a.Delegate != "") {
		// The supervisor is a model of agent.llm_url, which a worker or
		// a delegate excludes: it would be asked to review its own work.
		errs = append(errs, fmt.Errorf("config: agent.review (%s): want it with a model server (agent.llm_url), whose model supervises; an external worker or a delegate would review its own work",
			source("SNAPNODE_AGENT_REVIEW")))
	}
	if len(a.Command) > 0 && a.Command[0] == "" {
		bad("command", "SNAPNODE_AGENT_COMMAND", "a program, then its arguments", strconv.Quote(a.Command[0]))
	}
	for i, e := range a.CommandEnv {
		name, _, ok := strings.Cut(e, "=")
		switch {
		case !ok || !envVarName.MatchString(name):
			errs = append(errs, fmt.Errorf("config: agent.command_env[%d] (%s): want NAME=value, NAME of letters, digits and _; got %q", i, source("SNAPNODE_AGENT_COMMAND_ENV"), name))
		case strings.HasPrefix(strings.ToUpper(name), "SNAPNODE_"):
			errs = append(errs, fmt.Errorf("config: agent.command_env[%d] (%s): want a variable that is not the node's own (SNAPNODE_…: keys, the API key); got %q", i, source("SNAPNODE_AGENT_COMMAND_ENV"), name))
		}
	}
	if (a.LLMURL == "") != (a.LLMModel == "") {
		errs = append(errs, fmt.Errorf("config: agent.llm_url (%s) and agent.llm_model (%s): want both set (the agent runs) or neither (it does not); got llm_url %q and llm_model %q",
			source("SNAPNODE_LLM_URL"), source("SNAPNODE_LLM_MODEL"), ShowURL(a.LLMURL), a.LLMModel))
	}
	switch a.ResponseFormat {
	case "auto", "json_schema", "json_object", "none":
	default:
		bad("response_format", "SNAPNODE_LLM_RESPONSE_FORMAT", "auto, json_schema, json_object or none", strconv.Quote(a.ResponseFormat))
	}
	switch a.ReasoningEffort {
	case "", "none", "minimal", "low", "medium", "high", "xhigh":
	default:
		bad("reasoning_effort", "SNAPNODE_AGENT_REASONING_EFFORT", "none, minimal, low, medium, high or xhigh (empty: none sent)", strconv.Quote(a.ReasoningEffort))
	}
	switch a.ReviewReasoningEffort {
	case "", "default", "none", "minimal", "low", "medium", "high", "xhigh":
	default:
		bad("review_reasoning_effort", "SNAPNODE_AGENT_REVIEW_REASONING_EFFORT", "default (none sent), none, minimal, low, medium, high or xhigh (empty: agent.reasoning_effort's)", strconv.Quote(a.ReviewReasoningEffort))
	}
	if a.Sensitive && a.HistoryKeyFile == "" {
		bad("sensitive", "SNAPNODE_AGENT_SENSITIVE", "agent.history_key_file set (the key that seals the archives)", a.Sensitive)
	}
	for i, re := range a.Redact {
		if _, err := regexp.Compile(re); err != nil {
			errs = append(errs, fmt.Errorf("config: agent.redact[%d] (%s): want a regular expression (RE2 syntax); got %q: %w", i, source("SNAPNODE_AGENT_REDACT"), re, err))
		}
	}
	return errs
}

// checkLLMURL reports whether s is an http(s) URL with a host and a path
// ending in /v1, and no query or fragment; got is s as it may be shown,
// without a password or query.
func checkLLMURL(s string) (got string, ok bool) {
	u, err := url.Parse(s)
	if err != nil {
		// The error holds s itself; keep only its reason.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "a URL that does not parse (" + err.Error() + ")", false
	}
	got = strconv.Quote(ShowURL(s))
	ok = (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		strings.HasSuffix(u.Path, "/v1") && u.RawQuery == "" && !u.ForceQuery && u.Fragment == ""
	return got, ok
}

// ShowURL returns s for an error message or the log: a URL's password and
// query are masked, since either may hold a credential (a proxy's basic
// authentication in front of a server, a token). What does not parse is
// not shown: its password could not be told apart.
func ShowURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "xxxxx", false
	}
	return u.Redacted()
}

// showURL is ShowURL quoted, or its words for a URL that does not parse.
func showURL(s string) string {
	if _, err := url.Parse(s); err != nil {
		return ShowURL(s)
	}
	return strconv.Quote(ShowURL(s))
}

// relayURL reports whether s is a relay's URL the node can dial: ws://
// or wss://, with a host, and without a user or password (which the
// WebSocket client refuses, and which a card would publish).
func relayURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "ws" || u.Scheme == "wss") && u.Host != "" && u.User == nil
}

// AgentEnabled reports whether the agent runtime runs: whether both
// agent.llm_url and agent.llm_model are set, or agent.command is, or
// agent.delegate is.
func (c Config) AgentEnabled() bool {
	return c.Agent.LLMURL != "" && c.Agent.LLMModel != "" || len(c.Agent.Command) > 0 || c.Agent.Delegate != ""
}

// envVarName is the rule of a variable's name in agent.command_env.
var envVarName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// LLMAPIKey returns the model server's API key: the variable
// SNAPNODE_LLM_API_KEY (read with getenv, os.Getenv in production) when it
// is set, else the trimmed content of agent.llm_api_key_file, else "" (a
// server that needs no key, such as Ollama). Like ssh with its keys, it
// refuses a file that its group or others may read or write. Errors name
// the file, never its content.
func (c Config) LLMAPIKey(getenv func(string) string) (string, error) {
	if k := strings.TrimSpace(getenv(LLMAPIKeyEnv)); k != "" {
		return k, nil
	}
	name := c.Agent.LLMAPIKeyFile
	if name == "" {
		return "", nil
	}
	return readSecretFile("config: agent.llm_api_key_file (SNAPNODE_LLM_API_KEY_FILE)", "an API key", name)
}

// HistoryKey returns the key that seals the archived history of sensitive
// jobs, read from agent.history_key_file (64 hexadecimal digits, a file
// only its owner may read); nil when the setting is empty.
func (c Config) HistoryKey() ([]byte, error) {
	name := c.Agent.HistoryKeyFile
	if name == "" {
		return nil, nil
	}
	const what = "config: agent.history_key_file (SNAPNODE_AGENT_HISTORY_KEY_FILE)"
	s, err := readSecretFile(what, "a key", name)
	if err != nil {
		return nil, err
	}
	k, err := hex.DecodeString(s)
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("%s: %s: want 64 hexadecimal digits (a 256-bit key, such as from: openssl rand -hex 32)", what, name)
	}
	return k, nil
}

// readSecretFile reads a secret (want names it) from the file name, which
// must be a regular file only its owner may read; what names the setting
// in errors.
func readSecretFile(what, want, name string) (string, error) {
	f, fi, err := readfile.Open(name) // a regular file, opened without waiting
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	// Windows reports no Unix permissions to check.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return "", fmt.Errorf("%s: %s: permissions %04o are too open: want a file only its owner may read (chmod 600 %s)", what, name, perm, name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", what, name, err)
	}
	if len(b) > maxKeyFileBytes {
		return "", fmt.Errorf("%s: %s: want %s; got a file over %d bytes", what, name, want, maxKeyFileBytes)
	}
	k := strings.TrimSpace(string(b))
	if k == "" {
		return "", fmt.Errorf("%s: %s: want %s; got an empty file", what, name, want)
	}
	return k, nil
}

// KeyPath returns the identity file: KeyFile, or identity.key in DataDir.
func (c *Config) KeyPath() string {
	if c.KeyFile != "" {
		return c.KeyFile
	}
	return filepath.Join(c.DataDir, "identity.key")
}

// DefaultRequestTimeout is the default RequestTimeout: under the 30 s
// the SNAP SDK's requester waits, so that its answer reaches it.
const DefaultRequestTimeout = 20 * time.Second

// DefaultServiceTimeout is the default ServiceTimeout.
const DefaultServiceTimeout = time.Minute

// DefaultBackgroundTimeout is the default BackgroundTimeout.
const DefaultBackgroundTimeout = 5 * time.Minute

// MemoryDatabase as the database keeps tasks and replay records in memory:
// nothing survives a restart. For throwaway nodes and measurements.
const MemoryDatabase = "memory"

// DatabaseDSN returns Database, or the SQLite file tasks.db in DataDir.
func (c *Config) DatabaseDSN() string {
	if c.Database != "" {
		return c.Database
	}
	return filepath.Join(c.DataDir, "tasks.db")
}

// SealRecordPath returns the node's record of the last seal it wrote
// on its audit log: audit-seal.json in DataDir, one per node process
// (replicas on one database each keep their own).
func (c *Config) SealRecordPath() string {
	return filepath.Join(c.DataDir, "audit-seal.json")
}

// SandboxPath returns SandboxDir, or the folder sandbox in DataDir.
func (c *Config) SandboxPath() string {
	if c.SandboxDir != "" {
		return c.SandboxDir
	}
	return filepath.Join(c.DataDir, "sandbox")
}

// EnsureDataDir creates the data folder (0700) if it does not exist.
func (c *Config) EnsureDataDir() error {
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("config: data folder: %w", err)
	}
	return nil
}

// fileKeys lists the settings a configuration file may hold: the toml
// names of t's fields, tables as "table.key".
func fileKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[Duration]() {
			keys = append(keys, fileKeys(f.Type, prefix+name+".")...)
			continue
		}
		keys = append(keys, prefix+name)
	}
	return keys
}

// arrayTableKeys lists the keys of the arrays of tables among t's fields
// ([[card.skills]]), as "table.array.key", for the suggestions made for an
// unknown key.
func arrayTableKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct && name != "" && name != "-" {
			keys = append(keys, fileKeys(f.Type.Elem(), prefix+name+".")...)
		}
	}
	return keys
}

// Level is LogLevel as a slog.Level (Validate checked it).
func (c *Config) Level() slog.Level {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	return level
}

// Logger returns the node's logger writing to w in LogFormat, at level
// (a *slog.LevelVar that a reload may change), or at LogLevel when level
// is nil.
func (c *Config) Logger(w io.Writer, level slog.Leveler) *slog.Logger {
	if level == nil {
		level = c.Level()
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
