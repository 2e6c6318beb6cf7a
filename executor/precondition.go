package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
)

// Facts are what the operator says of the host, for the preconditions a
// peer's descriptor may declare beside paths_exist. The host does not
// probe them: a daemon has no reliable view of a person at the keyboard,
// and "the network is up" is the operator's call. A precondition asking
// for a fact the host does not report fails the action.
type Facts struct {
	// UserIdle: nobody uses the machine interactively (a headless
	// server, or an operator who lets actions run unattended). It
	// satisfies preconditions.user_idle.
	UserIdle bool
	// NetworkAvailable: the host's network is up. It satisfies
	// preconditions.network_available; the action itself still gets no
	// network access.
	NetworkAvailable bool
}

// The preconditions a descriptor may declare.
const (
	precondPathsExist       = "paths_exist"
	precondUserIdle         = "user_idle"
	precondNetworkAvailable = "network_available"
)

// precondition is one check a peer's descriptor declares.
type precondition struct {
	name  string // paths_exist, user_idle or network_available
	field string // its JSON pointer in the descriptor
	path  string // paths_exist's path, wildcards allowed
	step  int    // the step it precedes (0 for a leaf or a composite's own)
}

// declared lists what d declares must hold before step runs; at is d's
// pointer in the document. A false user_idle or network_available asks
// nothing.
func declared(d *proposal.Descriptor, at string, step int) []precondition {
	var out []precondition
	pc := d.Preconditions
	for i, p := range pc.PathsExist {
		out = append(out, precondition{name: precondPathsExist, path: p, step: step,
			field: at + "/preconditions/paths_exist/" + strconv.Itoa(i)})
	}
	if pc.UserIdle {
		out = append(out, precondition{name: precondUserIdle, field: at + "/preconditions/user_idle", step: step})
	}
	if pc.NetworkAvailable {
		out = append(out, precondition{name: precondNetworkAvailable, field: at + "/preconditions/network_available", step: step})
	}
	return out
}

// maxPatternLists bounds the directories the wildcards of one action's
// paths_exist may list, so that patterns such as /sandbox/*/*/*/x.txt
// stay cheap however many a descriptor holds.
const maxPatternLists = 256

// checkPreconditions evaluates what the item's descriptor declares must
// hold, before anything of the action runs: the host's facts, then each
// path of paths_exist in the workspace. A composite's step may rely on
// what an earlier step creates (a directory made, then written into);
// what an earlier step deletes no longer exists. The first precondition
// that does not hold is the Failure (PRECONDITION_FAILED, naming it and
// its field). The whole check is bounded by the action's max_duration_ms
// (LIMIT_EXCEEDED past it) and its wildcards by maxPatternLists listings;
// the error is for ctx.
//
// The host's own descriptor of an action lists the paths its operation
// needs; those are the sandbox's to check as it runs (a missing file is
// EXECUTION_FAILED, not_found), so only what a peer declared is checked
// here.
func (e *Executor) checkPreconditions(parent context.Context, it *item, requester string) (*Failure, error) {
	if len(it.pre) == 0 {
		return nil, nil
	}
	in := e.policy.InForce()
	pol, operator := in.Engine, in.IsOperator(requester)
	// may reports whether the requester may list the folder rel, below
	// the one a pattern is judged in (lookedInto): a folder it may not is
	// one its wildcards do not see into. Only a plain permit will do: no
	// operator is asked about what a precondition looks at.
	may := func(ctx context.Context, rel string) bool {
		d := pol.Decide(ctx, policy.Request{Principal: requester, Operator: operator, Action: policy.ActionListFiles,
			Paths: []string{sandbox.Virtual(rel)}, Risk: policy.RiskLow, RollbackSupported: true})
		return d.Effect == policy.Permit
	}
	sb := e.narrow(it)
	lim := sb.Limits().MaxDuration
	ctx, cancel := context.WithTimeoutCause(parent, lim, &sandbox.LimitError{
		Limit: sandbox.LimitDuration, Max: lim.Milliseconds(), Err: context.DeadlineExceeded})
	defer cancel()
	stopped := func() (*Failure, error) {
		if err := parent.Err(); err != nil {
			return nil, err
		}
		return sandboxFailure(context.Cause(ctx)), nil
	}
	budget := maxPatternLists
	for _, pc := range it.pre {
		if ctx.Err() != nil {
			return stopped()
		}
		fail := func(why string) *Failure {
			f := &Failure{Code: CodePreconditionFailed, Precondition: pc.name, Field: pc.field,
				Message: "The precondition " + pc.name + " does not hold: " + why}
			if pc.path != "" {
				f.Paths = []string{pc.path}
			}
			return f
		}
		switch pc.name {
		case precondUserIdle:
			if !e.facts.UserIdle {
				return fail("the host does not report its user idle."), nil
			}
		case precondNetworkAvailable:
			if !e.facts.NetworkAvailable {
				return fail("the host does not report its network available."), nil
			}
		case precondPathsExist:
			if settled, why := earlierStep(it, pc); settled {
				if why != "" {
					return fail(why), nil
				}
				continue
			}
			ok, err := exists(ctx, sb, pc.path, &budget, may)
			if ctx.Err() != nil {
				return stopped()
			}
			if err != nil {
				e.noWorkspace(err)
				return fail(fmt.Sprintf("%s could not be checked (%s).", pc.path, uncheckable(err))), nil
			}
			if !ok {
				return fail(pc.path + " does not exist."), nil
			}
		}
	}
	return nil, nil
}

// uncheckable says why a path of paths_exist could not be checked, in
// words for the requester: the sandbox's own, which name virtual paths
// only, but for a missing workspace folder, whose error names the folder
// on the host (the operator's log has it; see noWorkspace).
func uncheckable(err error) string {
	if errors.Is(err, sandbox.ErrNoWorkspace) {
		return "the workspace folder is missing on the host"
	}
	return strings.TrimPrefix(err.Error(), "sandbox: ")
}

// earlierStep looks at what the steps before pc's do to its path, latest
// first. settled is false when none touches it (the workspace decides);
// otherwise the path will exist when why is "" (a step creates or writes
// it), and why says which step deletes it when it will not.
func earlierStep(it *item, pc precondition) (settled bool, why string) {
	for j := pc.step - 1; j >= 0; j-- {
		fx := it.steps[j].desc.Effects.Filesystem
		for _, l := range [][]string{fx.Create, fx.Modify} {
			for _, p := range l {
				if ok, _ := path.Match(pc.path, p); ok {
					return true, ""
				}
			}
		}
		for _, p := range fx.Delete {
			if p == pc.path {
				return true, fmt.Sprintf("%s is deleted by step %d, before step %d runs.", p, j+1, pc.step+1)
			}
		}
	}
	return false, ""
}

// errPatternBudget: the wildcards of paths_exist need more listings than
// maxPatternLists.
var errPatternBudget = fmt.Errorf("the wildcards of paths_exist reach more than %d directories", maxPatternLists)

// exists reports whether the workspace holds a file or directory named by
// pattern (a /sandbox/ path whose names may hold shell wildcards). A
// wildcard name is matched against the listing of its directory, each
// listing charged to budget; the search stops at the first match. Names
// no proposal can use (sandbox.Entry.Invalid) are passed over. The folder
// the policy judged the pattern in (lookedInto) is looked into freely;
// one its wildcards reach below it only when may says so: one it may not
// holds nothing for the pattern.
func exists(ctx context.Context, sb *sandbox.Sandbox, pattern string, budget *int, may func(context.Context, string) bool) (bool, error) {
	if pattern == sandbox.Prefix {
		return true, nil
	}
	if !strings.ContainsAny(pattern, "*?[") {
		k, err := sb.Stat(ctx, pattern)
		return k == sandbox.KindFile || k == sandbox.KindDir, err
	}
	m := matcher{sb: sb, budget: budget, may: may}
	return m.match(ctx, "", strings.Split(strings.TrimPrefix(pattern, sandbox.Prefix), "/"), false)
}

// matcher is the search of one wildcard pattern.
type matcher struct {
	sb     *sandbox.Sandbox
	budget *int
	may    func(ctx context.Context, rel string) bool
}

// match looks for the names segs below the directory rel ("" is the
// root). deep is set once a wildcard led there: rel is below the folder
// the policy judged, and is looked into only if m.may says so.
func (m matcher) match(ctx context.Context, rel string, segs []string, deep bool) (bool, error) {
	sb, budget := m.sb, m.budget
	seg, rest := segs[0], segs[1:]
	if !strings.ContainsAny(seg, "*?[") {
		next := joinRel(rel, seg)
		if len(rest) == 0 {
			if deep && !m.may(ctx, rel) {
				return false, nil
			}
			k, err := sb.Stat(ctx, sandbox.Virtual(next))
			return k == sandbox.KindFile || k == sandbox.KindDir, err
		}
		return m.match(ctx, next, rest, deep)
	}
	if deep && !m.may(ctx, rel) {
		return false, nil
	}
	if *budget--; *budget < 0 {
		return false, errPatternBudget
	}
	entries, err := sb.List(ctx, sandbox.Virtual(rel))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, sandbox.ErrNotDir) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, en := range markWildcards(entries) {
		// A name no proposal can use (put there by another process; one
		// that is not UTF-8 is shown changed; one with a wildcard
		// character, as LIST_FILES marks it) is not one a descriptor
		// means: it neither matches nor is listed, which would refuse
		// the whole check.
		if en.Invalid != "" {
			continue
		}
		if ok, _ := path.Match(seg, en.Name); !ok {
			continue
		}
		switch {
		case len(rest) == 0 && (en.Kind == "file" || en.Kind == "dir"):
			return true, nil
		case len(rest) > 0 && en.Kind == "dir":
			if ok, err := m.match(ctx, joinRel(rel, en.Name), rest, true); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
