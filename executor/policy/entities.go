package policy

import (
	"strings"

	cedar "github.com/cedar-policy/cedar-go"
)

// Cedar entity types the engine provides to policies.
const (
	typeAgent  cedar.EntityType = "Agent"
	typeRole   cedar.EntityType = "Role"
	typeAction cedar.EntityType = "Action"
	typePath   cedar.EntityType = "Path"
)

// roleOperator is the parent of every principal with the operator role.
var roleOperator = cedar.NewEntityUID(typeRole, "operator")

// Action groups: each action is a member of at most one, so a policy can
// say `action in Action::"write"`.
const (
	groupRead        = "read"        // READ_FILE, LIST_FILES
	groupWrite       = "write"       // WRITE_FILE, CREATE_DIRECTORY
	groupDestructive = "destructive" // DELETE_FILE, RENAME_FILE
)

// actionGroup returns the group of an action, or "".
func actionGroup(a string) string {
	switch a {
	case ActionReadFile, ActionListFiles:
		return groupRead
	case ActionWriteFile, ActionCreateDirectory:
		return groupWrite
	case ActionDeleteFile, ActionRenameFile:
		return groupDestructive
	}
	return ""
}

// staticEntities are the entities every request shares: the operator role,
// the actions and their groups.
func staticEntities() cedar.EntityMap {
	m := cedar.EntityMap{roleOperator: {UID: roleOperator}}
	for _, g := range []string{groupRead, groupWrite, groupDestructive} {
		uid := cedar.NewEntityUID(typeAction, cedar.String(g))
		m[uid] = cedar.Entity{UID: uid}
	}
	for _, a := range []string{ActionThink, ActionFinish, ActionReadFile, ActionListFiles, ActionWriteFile,
		ActionCreateDirectory, ActionDeleteFile, ActionRenameFile, ActionComposite} {
		uid := cedar.NewEntityUID(typeAction, cedar.String(a))
		e := cedar.Entity{UID: uid}
		if g := actionGroup(a); g != "" {
			e.Parents = cedar.NewEntityUIDSet(cedar.NewEntityUID(typeAction, cedar.String(g)))
		}
		m[uid] = e
	}
	return m
}

// pathParents returns the directories that contain p, each written with a
// trailing slash, outermost first: for "/sandbox/docs/a.md" they are
// "/", "/sandbox/", "/sandbox/docs/" and the path's own directory form
// "/sandbox/docs/a.md/". The last one makes `resource in Path::"D/"` true
// for D itself as well as for everything below it. A path ending in "/"
// is its own directory form and does not repeat itself.
func pathParents(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && i+1 < len(p) {
			out = append(out, p[:i+1])
		}
	}
	if !strings.HasSuffix(p, "/") {
		out = append(out, p+"/")
	}
	return out
}

// parentDir returns the directory directly above p ("/sandbox/docs/" for
// "/sandbox/docs/a.md" and for "/sandbox/docs/x/"), or "" for "/" and for
// text with no slash.
func parentDir(p string) string {
	i := strings.LastIndexByte(strings.TrimSuffix(p, "/"), '/')
	if i < 0 {
		return ""
	}
	return p[:i+1]
}

// resourceEntity is the Cedar entity of the path being judged: all of
// pathParents are its direct parents, so `resource in Path::"D/"` is a
// set look-up.
func resourceEntity(p string) cedar.Entity {
	ps := pathParents(p)
	uids := make([]cedar.EntityUID, len(ps))
	for i, d := range ps {
		uids[i] = cedar.NewEntityUID(typePath, cedar.String(d))
	}
	return cedar.Entity{UID: cedar.NewEntityUID(typePath, cedar.String(p)), Parents: cedar.NewEntityUIDSet(uids...)}
}

// pathEntity is the Cedar entity of any other path: its parents are the
// directory above it and its own directory form, and Cedar walks the
// chain. (Giving every such entity all its ancestors would make a failing
// `in` cost the cube of the path's depth.)
func pathEntity(p string) cedar.Entity {
	e := cedar.Entity{UID: cedar.NewEntityUID(typePath, cedar.String(p))}
	parent := parentDir(p)
	switch {
	case parent == "" && strings.HasSuffix(p, "/"):
	case parent == "":
		e.Parents = cedar.NewEntityUIDSet(cedar.NewEntityUID(typePath, cedar.String(p+"/")))
	case strings.HasSuffix(p, "/"):
		e.Parents = cedar.NewEntityUIDSet(cedar.NewEntityUID(typePath, cedar.String(parent)))
	default:
		e.Parents = cedar.NewEntityUIDSet(cedar.NewEntityUID(typePath, cedar.String(parent)),
			cedar.NewEntityUID(typePath, cedar.String(p+"/")))
	}
	return e
}

// entities answers cedar's entity look-ups for one request: the principal
// (with the operator role as parent when it has it), the shared static
// entities, and any Path entity, built from its text. It is used by one
// goroutine at a time.
type entities struct {
	static    cedar.EntityMap
	principal cedar.Entity
	resource  cedar.Entity
	ancestors []cedar.Entity // pathEntity of each of the resource's parents
	built     bool           // ancestors is up to date
}

// setResource makes p the resource.
func (es *entities) setResource(p string) {
	es.resource = resourceEntity(p)
	es.built = false
}

// ancestor returns the entity of one of the resource's parents. Cedar
// looks them up on every `in` about the resource that does not hold, so
// they are built once per resource, on the first such look-up.
func (es *entities) ancestor(uid cedar.EntityUID) (cedar.Entity, bool) {
	if !es.built {
		es.ancestors = es.ancestors[:0]
		for p := range es.resource.Parents.All() {
			es.ancestors = append(es.ancestors, pathEntity(string(p.ID)))
		}
		es.built = true
	}
	for _, a := range es.ancestors {
		if a.UID == uid {
			return a, true
		}
	}
	return cedar.Entity{}, false
}

var _ cedar.EntityGetter = (*entities)(nil)

// Get returns the entity named by uid.
func (es *entities) Get(uid cedar.EntityUID) (cedar.Entity, bool) {
	switch {
	case uid == es.principal.UID:
		return es.principal, true
	case uid == es.resource.UID:
		return es.resource, true
	case uid.Type == typePath:
		if es.resource.Parents.Contains(uid) {
			return es.ancestor(uid)
		}
		return pathEntity(string(uid.ID)), true
	}
	e, ok := es.static[uid]
	return e, ok
}

// principalEntity is the Agent entity of a request's principal.
func principalEntity(r Request) cedar.Entity {
	e := cedar.Entity{UID: cedar.NewEntityUID(typeAgent, cedar.String(r.Principal))}
	if r.Operator {
		e.Parents = cedar.NewEntityUIDSet(roleOperator)
	}
	return e
}
