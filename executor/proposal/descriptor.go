package proposal

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// DescriptorVersion is the descriptor_version this package writes.
const DescriptorVersion = "1.0"

// ActionType classifies a descriptor (action_type in
// schemas/action-descriptor.v1.json).
type ActionType string

// The action types of the action descriptor specification's v1, and three
// extensions for the proposal actions that fit none of them (an action
// that fits no type extends the schema rather than bypass it):
// TypeDirectoryList, TypeThink and TypeFinish.
const (
	TypeFileRead           ActionType = "FILE_READ"
	TypeFileWrite          ActionType = "FILE_WRITE"
	TypeFileDelete         ActionType = "FILE_DELETE"
	TypeFileMove           ActionType = "FILE_MOVE"
	TypeDirectoryCreate    ActionType = "DIRECTORY_CREATE"
	TypeDirectoryDelete    ActionType = "DIRECTORY_DELETE"
	TypeCommandExecution   ActionType = "COMMAND_EXECUTION"
	TypePackageInstall     ActionType = "PACKAGE_INSTALL"
	TypePackageRemove      ActionType = "PACKAGE_REMOVE"
	TypeNetworkRequest     ActionType = "NETWORK_REQUEST"
	TypeUIAutomation       ActionType = "UI_AUTOMATION"
	TypeConfigChange       ActionType = "CONFIG_CHANGE"
	TypeMultiStepComposite ActionType = "MULTI_STEP_COMPOSITE"

	TypeDirectoryList ActionType = "DIRECTORY_LIST"
	TypeThink         ActionType = "THINK"
	TypeFinish        ActionType = "FINISH"
)

// Risk is a descriptor's risk_level.
type Risk string

// The risk levels, lowest first.
const (
	RiskLow      Risk = "LOW"
	RiskMedium   Risk = "MEDIUM"
	RiskHigh     Risk = "HIGH"
	RiskCritical Risk = "CRITICAL"
)

// rank orders the levels; an unknown level ranks above CRITICAL, so it is
// never taken for a low one.
func (r Risk) rank() int {
	switch r {
	case RiskLow:
		return 0
	case RiskMedium:
		return 1
	case RiskHigh:
		return 2
	case RiskCritical:
		return 3
	}
	return 4
}

// AtLeast reports whether r is o or higher.
func (r Risk) AtLeast(o Risk) bool { return r.rank() >= o.rank() }

// The values of the descriptor's enumerated strings.
const (
	SandboxOSRoot = "os_root"

	RollbackSnapshot       = "filesystem_snapshot"
	RollbackNoEffects      = "no_effects"
	RollbackDeclaredEffect = "declared_effects_only"

	AuditSummary  = "SUMMARY"
	AuditDetailed = "DETAILED"
	AuditForensic = "FORENSIC"

	CreatedByAI = "ai"
)

// ActionType returns the descriptor type of an action.
func (k Kind) ActionType() ActionType {
	switch k {
	case KindThink:
		return TypeThink
	case KindFinish:
		return TypeFinish
	case KindReadFile:
		return TypeFileRead
	case KindListFiles:
		return TypeDirectoryList
	case KindWriteFile:
		return TypeFileWrite
	case KindCreateDirectory:
		return TypeDirectoryCreate
	case KindDeleteFile:
		return TypeFileDelete
	case KindRenameFile:
		return TypeFileMove
	}
	return ""
}

// Risk returns the action's risk: reads, THINK and FINISH are LOW, writes
// and directory creation MEDIUM, delete and rename HIGH.
func (k Kind) Risk() Risk {
	switch k {
	case KindWriteFile, KindCreateDirectory:
		return RiskMedium
	case KindDeleteFile, KindRenameFile:
		return RiskHigh
	case KindThink, KindFinish, KindReadFile, KindListFiles:
		return RiskLow
	}
	return RiskCritical
}

// Descriptor is the Action Descriptor: the form in which an action is
// judged, sandboxed, promoted, rolled back and audited. A leaf carries its
// Operation; a MULTI_STEP_COMPOSITE carries Children instead. Its JSON is
// schemas/action-descriptor.v1.json, members in the order the specification
// lists them.
type Descriptor struct {
	DescriptorVersion string        `json:"descriptor_version"`
	ActionID          string        `json:"action_id"`
	CreatedAt         time.Time     `json:"created_at"`
	CreatedBy         string        `json:"created_by"`
	IntentSummary     string        `json:"intent_summary"`
	ActionType        ActionType    `json:"action_type"`
	RiskLevel         Risk          `json:"risk_level"`
	Scope             Scope         `json:"scope"`
	Resources         Resources     `json:"resources"`
	Preconditions     Preconditions `json:"preconditions"`
	Effects           Effects       `json:"effects"`
	Sandbox           Sandbox       `json:"sandbox"`
	Rollback          Rollback      `json:"rollback"`
	Confirmation      Confirmation  `json:"confirmation"`
	Audit             Audit         `json:"audit"`
	Operation         *Operation    `json:"operation,omitempty"`
	Children          []*Descriptor `json:"children,omitempty"`
}

// Scope says where the action applies: absolute paths, a wildcard only
// with the recursion flag, never widened after creation.
type Scope struct {
	Filesystem FilesystemScope `json:"filesystem"`
	Network    Requirement     `json:"network"`
	UI         Requirement     `json:"ui"`
}

// FilesystemScope lists absolute /sandbox/ paths. With Recursive, each also
// covers what lies below it; a path with a wildcard needs Recursive.
type FilesystemScope struct {
	Paths     []string `json:"paths"`
	Recursive bool     `json:"recursive"`
}

// Requirement says whether the action needs a capability; the core grants
// neither network nor UI, so Required is always false.
type Requirement struct {
	Required bool `json:"required"`
}

// Resources are hard caps: exceeding any ends the action, with no best
// effort.
type Resources struct {
	MaxCPUMillis      int64 `json:"max_cpu_ms"`
	MaxMemoryMB       int64 `json:"max_memory_mb"`
	MaxDiskMB         int64 `json:"max_disk_mb"`
	MaxDurationMillis int64 `json:"max_duration_ms"`
}

// Preconditions must hold before the action runs; if one fails the action
// is blocked and not retried without the user.
type Preconditions struct {
	PathsExist       []string `json:"paths_exist"`
	NetworkAvailable bool     `json:"network_available"`
	UserIdle         bool     `json:"user_idle"`
}

// Effects are everything the action will change; a sandbox diff beyond
// them blocks the action for good.
type Effects struct {
	Filesystem        FilesystemEffects `json:"filesystem"`
	Network           bool              `json:"network"`
	SystemStateChange bool              `json:"system_state_change"`
}

// FilesystemEffects lists the paths created, modified and deleted.
type FilesystemEffects struct {
	Create []string `json:"create"`
	Modify []string `json:"modify"`
	Delete []string `json:"delete"`
}

// Sandbox declares how the action is isolated; its results are advisory
// only.
type Sandbox struct {
	Required     bool   `json:"required"`
	SandboxType  string `json:"sandbox_type"`
	AllowNetwork bool   `json:"allow_network"`
	MaxRuns      int    `json:"max_runs"`
}

// Rollback declares how the action is undone; an action without rollback
// is blocked, and only the host rolls back.
type Rollback struct {
	Supported     bool   `json:"supported"`
	RollbackType  string `json:"rollback_type"`
	RollbackScope string `json:"rollback_scope"`
}

// Confirmation says whether an operator must confirm, and why: a factual
// reason, never persuasion.
type Confirmation struct {
	Required         bool   `json:"required"`
	Reason           string `json:"reason"`
	CooldownOnRepeat bool   `json:"cooldown_on_repeat"`
}

// Audit declares logging (SUMMARY, DETAILED or FORENSIC); the host's
// values, never the proposer's.
type Audit struct {
	Log        bool   `json:"log"`
	LogLevel   string `json:"log_level"`
	RetainDays int    `json:"retain_days"`
}

// Operation is the exact action of a leaf descriptor.
type Operation struct {
	Action Kind `json:"action"`
	Args   Args `json:"args"`
}

// Defaults are the operator's values a derived descriptor takes. Zero
// fields take the values of NewDefaults.
type Defaults struct {
	Resources        Resources
	SandboxType      string // os_root
	AuditLevel       string // SUMMARY, DETAILED or FORENSIC
	RetainDays       int
	ConfirmAtOrAbove Risk // confirmation.required from this risk up

	// Now and NewID give created_at and action_id (time.Now and a random
	// UUID when nil); tests set them.
	Now   func() time.Time
	NewID func() string
}

// NewDefaults returns the values of the action descriptor specification's
// examples: 2 s of CPU, 256 MB of memory, 50 MB of disk, 5 s in all; the
// os_root sandbox; SUMMARY audit kept 30 days; confirmation for HIGH risk
// and above.
func NewDefaults() Defaults {
	return Defaults{
		Resources:        Resources{MaxCPUMillis: 2000, MaxMemoryMB: 256, MaxDiskMB: 50, MaxDurationMillis: 5000},
		SandboxType:      SandboxOSRoot,
		AuditLevel:       AuditSummary,
		RetainDays:       30,
		ConfirmAtOrAbove: RiskHigh,
	}
}

func (d Defaults) filled() Defaults {
	std := NewDefaults()
	r := &d.Resources
	r.MaxCPUMillis = nonZero(r.MaxCPUMillis, std.Resources.MaxCPUMillis)
	r.MaxMemoryMB = nonZero(r.MaxMemoryMB, std.Resources.MaxMemoryMB)
	r.MaxDiskMB = nonZero(r.MaxDiskMB, std.Resources.MaxDiskMB)
	r.MaxDurationMillis = nonZero(r.MaxDurationMillis, std.Resources.MaxDurationMillis)
	d.SandboxType = nonZero(d.SandboxType, std.SandboxType)
	d.AuditLevel = nonZero(d.AuditLevel, std.AuditLevel)
	d.RetainDays = nonZero(d.RetainDays, std.RetainDays)
	d.ConfirmAtOrAbove = nonZero(d.ConfirmAtOrAbove, std.ConfirmAtOrAbove)
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.NewID == nil {
		d.NewID = func() string { return uuid.NewString() }
	}
	return d
}

func nonZero[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Describe derives the full Action Descriptor of a validated proposal. It
// reads nothing: the descriptor states what the action may do, and the
// sandbox checks what it did.
//
//   - action_id is new (the proposer's id is not trusted to be unique; the
//     caller keeps both in the audit), created_at is now, created_by "ai".
//   - intent_summary is written by the host from the operation, never
//     taken from the proposer's reasoning.
//   - scope lists exactly the paths read or changed (a write's folders it
//     may create included), not recursive.
//   - preconditions: the file or directory read, deleted or moved exists;
//     the parent of a path created exists (the workspace root always does).
//   - effects: a write may create or replace its file, so its path is
//     declared under both create and modify, and it creates the folders
//     missing above the file, so each folder between the workspace root
//     and the file is declared under create (the file's parent need not
//     exist); a rename deletes its source
//     and creates (or replaces) its destination; a directory is created;
//     a delete deletes. Nothing else.
//   - sandbox is required for every action that touches the workspace.
//   - rollback is a filesystem snapshot for actions with effects, and
//     no_effects for the others; it is always supported.
//   - confirmation is required from Defaults.ConfirmAtOrAbove up (HIGH by
//     default), with a factual reason; the operator's policy may require
//     more. A rollback is followed by a cooldown for actions with effects.
func Describe(p *Proposal, d Defaults) *Descriptor {
	d = d.filled()
	k, a := p.Action.Kind, p.Args
	desc := &Descriptor{
		DescriptorVersion: DescriptorVersion,
		ActionID:          d.NewID(),
		CreatedAt:         d.Now().UTC().Truncate(time.Millisecond),
		CreatedBy:         CreatedByAI,
		IntentSummary:     intent(k, a),
		ActionType:        k.ActionType(),
		RiskLevel:         k.Risk(),
		Scope:             Scope{Filesystem: FilesystemScope{Paths: opPaths(k, a)}},
		Resources:         d.Resources,
		Sandbox:           Sandbox{Required: k != KindThink && k != KindFinish, SandboxType: d.SandboxType, MaxRuns: 1},
		Rollback:          Rollback{Supported: true, RollbackType: RollbackNoEffects, RollbackScope: RollbackDeclaredEffect},
		Audit:             Audit{Log: true, LogLevel: d.AuditLevel, RetainDays: d.RetainDays},
		Operation:         &Operation{Action: k, Args: a},
	}
	fx := &desc.Effects.Filesystem
	var exist []string
	switch k {
	case KindReadFile, KindListFiles:
		exist = []string{a.Path}
	case KindWriteFile:
		// A write creates the folders missing above its file: each one
		// it may create is declared, and none has to exist before.
		fx.Create, fx.Modify = append(Ancestors(a.Path), a.Path), []string{a.Path}
		desc.Scope.Filesystem.Paths = fx.Create
	case KindCreateDirectory:
		fx.Create = []string{a.Path}
		exist = parentIfNotRoot(a.Path)
	case KindDeleteFile:
		fx.Delete = []string{a.Path}
		exist = []string{a.Path}
	case KindRenameFile:
		fx.Delete = []string{a.Source}
		fx.Create, fx.Modify = []string{a.Destination}, []string{a.Destination}
		exist = append([]string{a.Source}, parentIfNotRoot(a.Destination)...)
	}
	desc.Preconditions.PathsExist = Dedupe(exist)
	if len(fx.Create)+len(fx.Modify)+len(fx.Delete) > 0 {
		desc.Rollback.RollbackType = RollbackSnapshot
		desc.Confirmation.CooldownOnRepeat = true
	}
	if desc.RiskLevel.AtLeast(d.ConfirmAtOrAbove) {
		desc.Confirmation.Required = true
		desc.Confirmation.Reason = desc.IntentSummary
	}
	desc.normalise()
	return desc
}

// intent is the host's factual one-line summary of an operation.
func intent(k Kind, a Args) string {
	switch k {
	case KindThink:
		return "Record a thought; no effect."
	case KindFinish:
		return "Finish the task with a response."
	case KindReadFile:
		return "Read the file " + a.Path + "."
	case KindListFiles:
		return "List the directory " + a.Path + "."
	case KindWriteFile:
		return fmt.Sprintf("Write %d bytes to %s.", len(a.Content), a.Path)
	case KindCreateDirectory:
		return "Create the directory " + a.Path + "."
	case KindDeleteFile:
		return "Delete the file " + a.Path + "."
	case KindRenameFile:
		return "Move " + a.Source + " to " + a.Destination + "."
	}
	return ""
}

// maxText is the schema's limit on intent_summary and confirmation.reason.
const maxText = 10000

// sandboxRoot is the workspace itself, the one path that ends in a slash.
const sandboxRoot = "/sandbox/"

// parent returns the directory holding p ("/sandbox/" for a top-level
// name), or "" for the root itself.
func parent(p string) string {
	if p == sandboxRoot || !strings.HasPrefix(p, sandboxRoot) {
		return ""
	}
	dir := path.Dir(p)
	if dir == "/sandbox" {
		return sandboxRoot
	}
	return dir
}

// Ancestors returns the folders between the workspace root and the path
// p, shallowest first: those a write of p creates when they are missing.
// The root itself is never one.
func Ancestors(p string) []string {
	var out []string
	for dir := parent(p); dir != "" && dir != sandboxRoot; dir = parent(dir) {
		out = append(out, dir)
	}
	slices.Reverse(out)
	return out
}

func parentIfNotRoot(p string) []string {
	if dir := parent(p); dir != "" && dir != sandboxRoot {
		return []string{dir}
	}
	return nil
}

// Dedupe returns s without its repeats, each value where it first stands
// (the order a descriptor lists paths and messages in is kept).
func Dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// normalise makes every list non-nil, so the JSON has [] where the schema
// asks for an array.
func (d *Descriptor) normalise() {
	for _, l := range []*[]string{&d.Scope.Filesystem.Paths, &d.Preconditions.PathsExist,
		&d.Effects.Filesystem.Create, &d.Effects.Filesystem.Modify, &d.Effects.Filesystem.Delete} {
		if *l == nil {
			*l = []string{}
		}
	}
}

// ErrComposite is returned by Compose for children it cannot combine.
var ErrComposite = errors.New("proposal: a composite needs at least one child and no nested composite")

// Compose builds a MULTI_STEP_COMPOSITE over leaf descriptors (as Describe
// makes them), run in order in one sandbox. The composite's risk is its
// highest child's; its scope, effects and confirmation are the union of
// the children's; its resources are the Defaults' (a cap on the whole run);
// it lists no precondition of its own, because a later step's may be made
// true by an earlier one: each child's preconditions are checked when it
// runs. Rollback covers the whole composite.
func Compose(children []*Descriptor, d Defaults) (*Descriptor, error) {
	if len(children) == 0 || len(children) > 64 {
		return nil, fmt.Errorf("%w (got %d children, at most 64)", ErrComposite, len(children))
	}
	d = d.filled()
	c := &Descriptor{
		DescriptorVersion: DescriptorVersion,
		ActionID:          d.NewID(),
		CreatedAt:         d.Now().UTC().Truncate(time.Millisecond),
		CreatedBy:         CreatedByAI,
		ActionType:        TypeMultiStepComposite,
		RiskLevel:         RiskLow,
		Resources:         d.Resources,
		Sandbox:           Sandbox{Required: true, SandboxType: d.SandboxType, MaxRuns: 1},
		Rollback:          Rollback{Supported: true, RollbackType: RollbackSnapshot, RollbackScope: RollbackDeclaredEffect},
		Audit:             Audit{Log: true, LogLevel: d.AuditLevel, RetainDays: d.RetainDays},
		Children:          children,
	}
	var summary, reasons []string
	for i, ch := range children {
		if ch == nil || ch.ActionType == TypeMultiStepComposite || ch.Operation == nil {
			return nil, fmt.Errorf("%w (child %d)", ErrComposite, i)
		}
		if ch.RiskLevel.rank() > c.RiskLevel.rank() {
			c.RiskLevel = ch.RiskLevel
		}
		c.Scope.Filesystem.Paths = Dedupe(append(c.Scope.Filesystem.Paths, ch.Scope.Filesystem.Paths...))
		c.Scope.Filesystem.Recursive = c.Scope.Filesystem.Recursive || ch.Scope.Filesystem.Recursive
		fx, cfx := &c.Effects.Filesystem, ch.Effects.Filesystem
		fx.Create = Dedupe(append(fx.Create, cfx.Create...))
		fx.Modify = Dedupe(append(fx.Modify, cfx.Modify...))
		fx.Delete = Dedupe(append(fx.Delete, cfx.Delete...))
		c.Confirmation.Required = c.Confirmation.Required || ch.Confirmation.Required
		c.Confirmation.CooldownOnRepeat = c.Confirmation.CooldownOnRepeat || ch.Confirmation.CooldownOnRepeat
		if ch.Confirmation.Reason != "" {
			reasons = append(reasons, ch.Confirmation.Reason)
		}
		summary = append(summary, fmt.Sprintf("(%d) %s", i+1, ch.IntentSummary))
	}
	c.IntentSummary = fmt.Sprintf("Run %d steps in one sandbox: %s", len(children), strings.Join(summary, " "))
	if utf8.RuneCountInString(c.IntentSummary) > maxText {
		c.IntentSummary = fmt.Sprintf("Run %d steps in one sandbox, each summarised in its child descriptor.", len(children))
	}
	if c.Confirmation.Required {
		c.Confirmation.Reason = strings.Join(reasons, " ")
		if utf8.RuneCountInString(c.Confirmation.Reason) > maxText {
			c.Confirmation.Reason = "Steps that need confirmation, each with its reason in its child descriptor."
		}
	}
	c.normalise()
	return c, nil
}
