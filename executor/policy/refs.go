package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
	"golang.org/x/text/unicode/norm"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/identity"
)

// checkRefs finds the entities policy p names that no request to a node
// of network can ever have: an unknown entity type, action or role, an
// agent that is not an address of network, or a path that is not absolute, not in NFC, outside /sandbox/
// (other than "/"), or not clean under it. Cedar itself accepts them, and
// the policy then silently never matches: a typo in `Action::"WRTE_FILE"`
// would turn a permit into deny by default without a word, and one in a
// forbid's agent or path would guard nothing. The policy's JSON form (cedar-go's) lists
// every entity literal, in the scope and in the conditions alike.
func checkRefs(p *cedar.Policy, network identity.Network) error {
	b, err := p.MarshalJSON()
	if err != nil {
		return fmt.Errorf("policy: cannot inspect the policy: %w", err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return fmt.Errorf("policy: cannot inspect the policy: %w", err)
	}
	var first error
	walkEntities(tree, func(typ, id string) {
		if first == nil {
			first = checkRef(typ, id, network)
		}
	})
	if first == nil {
		first = checkAttrs(tree)
	}
	return first
}

// otherNetworkError is checkRef's refusal of an Agent of another network
// than the node's: errors.Is(err, ErrOtherNetwork).
type otherNetworkError string

func (e otherNetworkError) Error() string        { return string(e) }
func (e otherNetworkError) Is(target error) bool { return target == ErrOtherNetwork }

// contextAttrs are the attributes of a request's context (Engine.evaluate).
var contextAttrs = []string{"risk", "riskLevel", "size", "rollbackSupported", "recentlyRolledBack"}

// checkAttrs finds, in the JSON tree v of a policy, what Cedar accepts but
// no request can ever have, and which would make a condition silently
// false: an `is` of an unknown entity type, an attribute of a variable
// (`context.x`, `context has x`, `resource has x`) that its value never
// carries (of the variables, only context has attributes), a Path
// without its trailing slash after `in`, which is no folder (pathParents)
// and so holds nothing but itself, and a Path with one after `==`, which
// no request's path equals (but /sandbox/).
func checkAttrs(v any) error {
	switch v := v.(type) {
	case map[string]any:
		if typ, ok := v["entity_type"].(string); ok {
			switch cedar.EntityType(typ) {
			case typeAgent, typeRole, typeAction, typePath:
			default:
				return fmt.Errorf("unknown entity type %s in is (known: Agent, Role, Action, Path)", typ)
			}
		}
		var in []any // what an `in` names: the scope's entity, a condition's right side
		if v["op"] == "in" {
			in = append(in, v["entity"])
		}
		if x, ok := v["in"].(map[string]any); ok {
			in = append(in, x["entity"], x["right"])
			if _, is := v["entity_type"]; is {
				// A condition's `is … in E`: x is E itself.
				in = append(in, x)
			}
		}
		var bad error
		walkEntities(in, func(typ, id string) {
			if bad == nil && cedar.EntityType(typ) == typePath && !strings.HasSuffix(id, "/") {
				bad = fmt.Errorf("Path::%q after in matches that path alone, nothing below it: write Path::%q for the folder and everything in it, or resource == Path::%q for the one path", id, id+"/", id)
			}
		})
		if bad != nil {
			return bad
		}
		var eq []any // what an `==` compares: the scope's entity, a condition's sides
		if v["op"] == "==" {
			eq = append(eq, v["entity"])
		}
		if x, ok := v["=="].(map[string]any); ok {
			eq = append(eq, x["left"], x["right"])
		}
		walkEntities(eq, func(typ, id string) {
			if bad == nil && cedar.EntityType(typ) == typePath && strings.HasSuffix(id, "/") && id != SandboxRoot {
				bad = fmt.Errorf("resource == Path::%q never holds: a request's path never ends in a slash (but %s itself); write resource in Path::%q for the folder and everything in it", id, SandboxRoot, id)
				if id != "/" {
					bad = fmt.Errorf("%w, or resource == Path::%q for the folder alone", bad, strings.TrimSuffix(id, "/"))
				}
			}
		})
		if bad != nil {
			return bad
		}
		for _, op := range []string{".", "has"} {
			x, _ := v[op].(map[string]any)
			left, _ := x["left"].(map[string]any)
			name, _ := left["Var"].(string)
			attr, ok := x["attr"].(string)
			switch {
			case !ok || name == "":
			case name != "context":
				return fmt.Errorf("%s has no attributes (%s %q)", name, op, attr)
			case !slices.Contains(contextAttrs, attr):
				return fmt.Errorf("unknown context attribute %q (known: %s)", attr, strings.Join(contextAttrs, ", "))
			}
		}
		for _, c := range v {
			if err := checkAttrs(c); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range v {
			if err := checkAttrs(c); err != nil {
				return err
			}
		}
	}
	return nil
}

// walkEntities calls f with the type and id of every entity reference in
// the JSON tree v: objects with exactly a string "type" and "id".
func walkEntities(v any, f func(typ, id string)) {
	switch v := v.(type) {
	case map[string]any:
		typ, okT := v["type"].(string)
		id, okI := v["id"].(string)
		if okT && okI && len(v) == 2 {
			f(typ, id)
			return
		}
		for _, c := range v {
			walkEntities(c, f)
		}
	case []any:
		for _, c := range v {
			walkEntities(c, f)
		}
	}
}

// knownActions are the actions and action groups a request can name.
var knownActions = []string{ActionThink, ActionFinish, ActionReadFile, ActionListFiles, ActionWriteFile,
	ActionCreateDirectory, ActionDeleteFile, ActionRenameFile, ActionComposite,
	groupRead, groupWrite, groupDestructive}

func checkRef(typ, id string, network identity.Network) error {
	switch cedar.EntityType(typ) {
	case typeAction:
		if !slices.Contains(knownActions, id) {
			return fmt.Errorf("unknown action Action::%q (known: %s)", id, strings.Join(knownActions, ", "))
		}
	case typeRole:
		if id != string(roleOperator.ID) {
			return fmt.Errorf("unknown role Role::%q (the one role is %q)", id, string(roleOperator.ID))
		}
	case typePath:
		switch {
		case !strings.HasPrefix(id, "/"):
			return fmt.Errorf("path Path::%q is not absolute: paths are written /sandbox/…", id)
		case id != "/" && !strings.HasPrefix(id, SandboxRoot):
			// The host denies every other path before the policy is
			// asked: a forbid on one, "/Sandbox/secrets/" say (paths
			// are case-sensitive), would guard nothing.
			return fmt.Errorf("path Path::%q is outside the workspace: a request's paths all start with %s (in this letter case), and only Path::\"/\" holds them too", id, SandboxRoot)
		case !norm.NFC.IsNormalString(id):
			// The sandbox takes NFC paths only: another form of the same
			// name is never a request's, and a forbid on it guards nothing.
			return fmt.Errorf("path Path::%+q is not in Unicode Normalization Form C, as every path a request carries is: write it as %+q", id, norm.NFC.String(id))
		case strings.HasPrefix(id, SandboxRoot) && !inSandbox(id):
			return fmt.Errorf("path Path::%+q never names a path of the workspace (an empty, \".\" or \"..\" segment, or a control character): requests carry clean paths only", id)
		case strings.HasPrefix(id, SandboxRoot):
			// What the sandbox refuses (an invisible or bidi character, a
			// look-alike of '.' or '/', a reserved name…) no request
			// carries: a forbid on it, its odd character unseen in an
			// editor, would guard nothing.
			var pe *sandbox.PathError
			if _, err := sandbox.Normalize(strings.TrimSuffix(id, "/") + "/x"); errors.As(err, &pe) && pe.Rule != sandbox.RuleTooLong && pe.Rule != sandbox.RuleTooDeep {
				msg := fmt.Sprintf("path Path::%+q never names a path of the workspace: the sandbox refuses it (%s", id, pe.Rule)
				if pe.Detail != "" {
					msg += ": " + pe.Detail
				}
				return errors.New(msg + ")")
			}
		}
	case typeAgent:
		// A request's principal is an address as identity.ParseAddress
		// takes it: lowercase, its checksum right. Another spelling
		// (an uppercase address, valid bech32 as it is, or one
		// mistyped) is nobody's, and a forbid on it guards nothing.
		a, err := identity.ParseAddress(id)
		if err != nil {
			why := err
			if ae, ok := errors.AsType[*identity.AddressError](err); ok {
				why = ae.Rule
				if ae.Detail != "" {
					why = fmt.Errorf("%w (%s)", ae.Rule, ae.Detail)
				}
			}
			return fmt.Errorf("Agent::%q is not an address a request carries: %v; write the agent's P2TR address in lowercase, bc1p… or tb1p…", id, why)
		}
		if a.Network != network {
			// Every request's principal is an address of the node's
			// network: one of the other never matches.
			return otherNetworkError(fmt.Sprintf("Agent::%q is a %s address, and this node runs on %s: no request it judges comes from it (the same key's %s address is Agent::%q)",
				id, a.Network, network, network, identity.EncodeAddress(network, a.Key)))
		}
	default:
		return fmt.Errorf("unknown entity type %s::%q (known: Agent, Role, Action, Path)", typ, id)
	}
	return nil
}
