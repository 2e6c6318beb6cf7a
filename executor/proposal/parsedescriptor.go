package proposal

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/schemas"
)

const msgDescriptorVersion = "Unsupported action descriptor version."

var descriptorVersionForm = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// The action types the core never runs, by their lower-case name, and why.
var refusedTypes = map[string]string{
	"command_execution": msgCommand,
	"package_install":   "Installing or removing packages is not permitted in the core schema.",
	"package_remove":    "Installing or removing packages is not permitted in the core schema.",
	"network_request":   msgNetwork,
	"ui_automation":     msgUI,
	"config_change":     "Changing host configuration is not permitted in the core schema.",
	"directory_delete":  "Deleting directories is not permitted in the core schema.",
}

// sandboxTypes are the values the schema names for sandbox_type;
// hostSandboxTypes those this host has. A descriptor asking for one it
// lacks is refused, never run in another.
var (
	sandboxTypes     = []string{SandboxOSRoot, "container", "vm"}
	hostSandboxTypes = []string{SandboxOSRoot}
)

const (
	msgNetwork = "Network access is not permitted in the core schema."
	msgUI      = "UI automation is not permitted in the core schema."
	msgHost    = "Changing system state outside the sandbox is not permitted in the core schema."
)

// ParseDescriptor validates an Action Descriptor sent by a peer and
// returns it. Every failure is an *Error, checked in this order:
//
//  1. the bytes are one strict JSON object (as for Parse);
//  2. descriptor_version, then each child's, is MAJOR.MINOR of major 1
//     (else ErrValidation or ErrVersionIncompatible with
//     supported_version_range "1.x");
//  3. nothing asks for what the core never runs, at the top then in each
//     child (ErrActionNotAllowed): the action types COMMAND_EXECUTION,
//     PACKAGE_INSTALL, PACKAGE_REMOVE, NETWORK_REQUEST, UI_AUTOMATION,
//     CONFIG_CHANGE and DIRECTORY_DELETE in any letter case, an operation
//     run_command or spawn_process, network or UI required, network
//     effects or allowed, a system state change (network_available as a
//     precondition asks the host whether its network is up, and grants
//     nothing: it is accepted), a sandbox_type the host lacks (container or
//     vm: the host has os_root only; the error's available lists it);
//  4. schemas/action-descriptor.v1.json (ErrValidation naming field and
//     keyword), then created_at a real instant (rule format);
//  5. the descriptor's forbidden patterns (docs/conformance.md) that the
//     schema cannot express (ErrValidation): each child alone, then the
//     whole. A leaf's effects must declare every change its operation makes
//     (undeclaredEffect) and nothing it does not make
//     (effectOutsideOperation); its scope must cover every changed path
//     (persistenceOutsideScope) and every path read (implicitScope);
//     paths_exist may name only covered paths or their parent directories
//     (implicitScope); wildcards must be well formed (globSyntax) and total
//     at most 64 KiB (wildcardBudget). A composite's effects are exactly its
//     children's, its scope covers theirs, and its risk is at least each
//     child's (riskFloor).
//
// What the schema requires already covers the rest of the forbidden
// patterns: effects, scope and resources are mandatory and bounded, rollback
// is supported, paths stay under /sandbox/, a descriptor runs once, and no
// field beyond the schema's is accepted anywhere.
func ParseDescriptor(data []byte) (*Descriptor, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	if err := walkDescriptor(obj, checkDescriptorVersion); err != nil {
		return nil, err
	}
	if err := walkDescriptor(obj, checkRefused); err != nil {
		return nil, err
	}
	if err := schemas.ActionDescriptor().Validate(obj); err != nil {
		return nil, fromSchema(err)
	}
	// Re-encode the accepted value, so numbers such as 1e3 or 5.0 that the
	// schema counts as integers reach the int fields as plain integers.
	norm, err := json.Marshal(obj)
	if err != nil {
		return nil, &Error{Code: ErrValidation, Message: "The descriptor could not be read.", Rule: "schema", Err: err}
	}
	d := new(Descriptor)
	if err := json.Unmarshal(norm, d, json.RejectUnknownMembers(true)); err != nil {
		var sem *json.SemanticError
		field := ""
		if errors.As(err, &sem) {
			field = string(sem.JSONPointer)
		}
		e := validation(field, "format", "Field "+field+" must be a real RFC 3339 instant.")
		e.Err = err
		return nil, e
	}
	budget := maxWildcardChars
	if err := d.checkLimits("", &budget); err != nil {
		return nil, err
	}
	if err := d.check(""); err != nil {
		return nil, err
	}
	return d, nil
}

// walkDescriptor applies f to the top-level descriptor, then to each of
// its children (one level: deeper nesting is the schema's to refuse).
func walkDescriptor(obj map[string]any, f func(map[string]any, string) *Error) *Error {
	if err := f(obj, ""); err != nil {
		return err
	}
	children, _ := obj["children"].([]any)
	for i, c := range children {
		if m, ok := c.(map[string]any); ok {
			if err := f(m, "/children/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDescriptorVersion(obj map[string]any, at string) *Error {
	return checkVersion(obj, at, "descriptor_version", descriptorVersionForm, SupportedDescriptorVersions, msgDescriptorVersion)
}

func checkRefused(obj map[string]any, at string) *Error {
	if t, ok := obj["action_type"].(string); ok {
		if msg, refused := refusedTypes[asciiFold(t)]; refused {
			return notAllowed(at+"/action_type", msg)
		}
	}
	if op, ok := obj["operation"].(map[string]any); ok {
		if a, ok := op["action"].(string); ok && isCommand(a) {
			return notAllowed(at+"/operation/action", msgCommand)
		}
	}
	if t, ok := lookup(obj, []string{"sandbox", "sandbox_type"}).(string); ok && slices.Contains(sandboxTypes, t) && !slices.Contains(hostSandboxTypes, t) {
		e := notAllowed(at+"/sandbox/sandbox_type", fmt.Sprintf(
			"The sandbox type %s is not available on this host; it isolates actions with %s only.", t, strings.Join(hostSandboxTypes, ", ")))
		e.Available = slices.Clone(hostSandboxTypes)
		return e
	}
	for _, f := range []struct {
		ptr []string
		msg string
	}{
		{[]string{"scope", "network", "required"}, msgNetwork},
		{[]string{"scope", "ui", "required"}, msgUI},
		{[]string{"effects", "network"}, msgNetwork},
		{[]string{"effects", "system_state_change"}, msgHost},
		{[]string{"sandbox", "allow_network"}, msgNetwork},
	} {
		if lookup(obj, f.ptr) == true {
			return notAllowed(at+pointer(f.ptr), f.msg)
		}
	}
	return nil
}

func lookup(v any, tokens []string) any {
	for _, t := range tokens {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[t]
	}
	return v
}

// change is one path an operation changes and the effect lists that may
// declare it.
type change struct {
	path  string
	kinds []string
}

func opChanges(op *Operation) []change {
	a := op.Args
	switch op.Action {
	case KindWriteFile:
		return []change{{a.Path, []string{"create", "modify"}}}
	case KindCreateDirectory:
		return []change{{a.Path, []string{"create"}}}
	case KindDeleteFile:
		return []change{{a.Path, []string{"delete"}}}
	case KindRenameFile:
		return []change{{a.Source, []string{"delete"}}, {a.Destination, []string{"create", "modify"}}}
	}
	return nil
}

func (fx *FilesystemEffects) list(kind string) []string {
	switch kind {
	case "create":
		return fx.Create
	case "modify":
		return fx.Modify
	}
	return fx.Delete
}

var effectKinds = []string{"create", "modify", "delete"}

// matches reports whether the pattern (a path, possibly with wildcards)
// names p. Patterns were checked with checkGlobs first.
func matches(pattern, p string) bool {
	ok, _ := path.Match(pattern, p)
	return ok
}

// depth counts the names in a sandbox path: 0 for /sandbox/, 1 for
// /sandbox/a. A wildcard never matches a slash, so a pattern can only name
// paths of its own depth.
func depth(p string) int {
	if p == sandboxRoot {
		return 0
	}
	return strings.Count(p, "/") - 1
}

// ancestorAt returns p, or the directory above it, that has n names; ""
// if p has fewer.
func ancestorAt(p string, n int) string {
	if n == 0 {
		return sandboxRoot
	}
	if p == sandboxRoot {
		return ""
	}
	slashes := 0
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			slashes++
			if slashes == n+2 {
				return p[:i]
			}
		}
	}
	if slashes == n+1 {
		return p
	}
	return ""
}

// covered reports whether the scope covers p: a scope path names it or,
// when recursive, names one of its directories. Each scope path is tried
// once, against the one ancestor of p of its depth.
func (s *FilesystemScope) covered(p string) bool {
	for _, sp := range s.Paths {
		q := p
		if s.Recursive {
			q = ancestorAt(p, depth(sp))
		}
		if q != "" && matches(sp, q) {
			return true
		}
	}
	return false
}

// check enforces the forbidden patterns the schema cannot express; at is the
// JSON pointer of d within the document.
func (d *Descriptor) check(at string) *Error {
	if err := d.checkGlobs(at); err != nil {
		return err
	}
	fx := &d.Effects.Filesystem
	var changes []change
	var touched []string
	if d.ActionType == TypeMultiStepComposite {
		union := map[string]map[string]bool{}
		for _, k := range effectKinds {
			union[k] = map[string]bool{}
		}
		for i, ch := range d.Children {
			if err := ch.check(at + "/children/" + strconv.Itoa(i)); err != nil {
				return err
			}
			if !d.RiskLevel.AtLeast(ch.RiskLevel) {
				return validation(at+"/risk_level", "riskFloor", fmt.Sprintf(
					"Field %s/risk_level must be at least %s, the risk of child %d.", at, ch.RiskLevel, i))
			}
			for _, k := range effectKinds {
				for _, p := range ch.Effects.Filesystem.list(k) {
					union[k][p] = true
					changes = append(changes, change{p, []string{k}})
				}
			}
			touched = append(touched, opPaths(ch.Operation.Action, ch.Operation.Args)...)
		}
		// A composite's effects are exactly its children's, entry for entry.
		for _, k := range effectKinds {
			own := map[string]bool{}
			for i, e := range fx.list(k) {
				own[e] = true
				if !union[k][e] {
					return validation(fmt.Sprintf("%s/effects/filesystem/%s/%d", at, k, i), "effectOutsideOperation", fmt.Sprintf(
						"The declared effect %s %s is no child's.", k, e))
				}
			}
			for _, c := range changes {
				if c.kinds[0] == k && !own[c.path] {
					return validation(at+"/effects/filesystem/"+k, "undeclaredEffect", fmt.Sprintf(
						"A child declares %s %s, which the composite's effects do not list.", k, c.path))
				}
			}
		}
	} else {
		changes = opChanges(d.Operation)
		touched = opPaths(d.Operation.Action, d.Operation.Args)
		for _, c := range changes {
			declared := slices.ContainsFunc(c.kinds, func(k string) bool {
				return slices.ContainsFunc(fx.list(k), func(e string) bool { return matches(e, c.path) })
			})
			if !declared {
				return validation(at+"/effects/filesystem/"+c.kinds[0], "undeclaredEffect", fmt.Sprintf(
					"The operation changes %s, which the declared effects do not list under %s.", c.path, joinOr(c.kinds)))
			}
		}
		for _, k := range effectKinds {
			for i, e := range fx.list(k) {
				done := slices.ContainsFunc(changes, func(c change) bool {
					return slices.Contains(c.kinds, k) && matches(e, c.path)
				}) || (k == "create" && d.Operation.Action == KindWriteFile &&
					slices.ContainsFunc(Ancestors(d.Operation.Args.Path), func(p string) bool { return matches(e, p) }))
				if !done {
					return validation(fmt.Sprintf("%s/effects/filesystem/%s/%d", at, k, i), "effectOutsideOperation", fmt.Sprintf(
						"The declared effect %s %s is not something the operation does.", k, e))
				}
			}
		}
	}
	scope := &d.Scope.Filesystem
	for _, c := range changes {
		if !scope.covered(c.path) {
			return validation(at+"/scope/filesystem/paths", "persistenceOutsideScope", fmt.Sprintf(
				"The operation changes %s, outside the declared scope.", c.path))
		}
	}
	for _, p := range touched {
		if !scope.covered(p) {
			return validation(at+"/scope/filesystem/paths", "implicitScope", fmt.Sprintf(
				"The operation reads %s, outside the declared scope.", p))
		}
	}
	for i, e := range d.Preconditions.PathsExist {
		n := depth(e)
		ok := scope.covered(e) || slices.ContainsFunc(touched, func(p string) bool {
			q := ancestorAt(p, n)
			return q != "" && matches(e, q)
		})
		if !ok {
			return validation(fmt.Sprintf("%s/preconditions/paths_exist/%d", at, i), "implicitScope", fmt.Sprintf(
				"The precondition path %s is outside the declared scope.", e))
		}
	}
	return nil
}

// maxWildcardChars bounds the wildcard patterns of one descriptor, so that
// the checks stay cheap whatever a peer sends: matching a pattern costs up
// to its length times a name's (names have at most 255 characters).
const maxWildcardChars = 64 << 10

// checkLimits charges the wildcard patterns of d and its children to
// budget.
func (d *Descriptor) checkLimits(at string, budget *int) *Error {
	for _, l := range d.pathLists() {
		for i, p := range l.paths {
			if strings.ContainsAny(p, "*?[") {
				if *budget -= len(p); *budget < 0 {
					field := at + l.ptr + "/" + strconv.Itoa(i)
					return validation(field, "wildcardBudget", fmt.Sprintf(
						"Field %s goes beyond %d bytes of wildcard patterns in one descriptor.", field, maxWildcardChars))
				}
			}
		}
	}
	for i, ch := range d.Children {
		if err := ch.checkLimits(at+"/children/"+strconv.Itoa(i), budget); err != nil {
			return err
		}
	}
	return nil
}

type pathList struct {
	ptr   string
	paths []string
}

func (d *Descriptor) pathLists() []pathList {
	return []pathList{
		{"/scope/filesystem/paths", d.Scope.Filesystem.Paths},
		{"/preconditions/paths_exist", d.Preconditions.PathsExist},
		{"/effects/filesystem/create", d.Effects.Filesystem.Create},
		{"/effects/filesystem/modify", d.Effects.Filesystem.Modify},
		{"/effects/filesystem/delete", d.Effects.Filesystem.Delete},
	}
}

// checkGlobs refuses malformed wildcards (an unclosed [, a bad range) in
// every path list of d.
func (d *Descriptor) checkGlobs(at string) *Error {
	for _, l := range d.pathLists() {
		for i, p := range l.paths {
			if _, err := path.Match(p, ""); err != nil {
				e := validation(fmt.Sprintf("%s%s/%d", at, l.ptr, i), "globSyntax", "The wildcard pattern "+p+" is malformed.")
				e.Err = err
				return e
			}
		}
	}
	return nil
}

func joinOr(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return fmt.Sprintf("%s or %s", s[0], joinOr(s[1:]))
}
