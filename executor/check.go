package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
)

// Verdict is what Check finds about one proposal.
type Verdict struct {
	// Refusal is the structured error of a proposal that does not pass
	// validation (its JSON is the structured error); the other fields are
	// then empty.
	Refusal *proposal.Error
	// ProposalID and Action are the proposal's id and action as spelled
	// (for a peer descriptor, its action_id and type); Risk is the
	// derived descriptor's risk level.
	ProposalID, Action, Risk string
	// Requests are what the policy was asked: one per step, plus one for
	// the whole of a composite, and a LIST_FILES of the folder each path
	// of a peer's paths_exist is looked for in.
	Requests []policy.Request
	// Decision combines the answers as Run would: the strictest wins,
	// and a descriptor asking for confirmation turns a Permit into a
	// Confirm.
	Decision policy.Decision
}

// Check judges the proposal (or peer descriptor) in data as Run would for
// requester, offline: validation, the derived descriptor, the host rules
// and pol. It reads and changes nothing: no sandbox, database or audit
// log, so a repeat within the cooldown after a rollback is not known and
// is judged as a first proposal; a descriptor's preconditions are not
// checked (Run checks them before the sandbox runs); and it has no moment
// of arrival, so a peer descriptor's created_at is not held to the clock
// (Run refuses one made too far from the time it arrives). operator is
// whether requester has the operator role. Errors are for a requester that
// is not a plausible identity; a refused proposal is a Verdict with its
// Refusal.
func Check(pol *policy.Engine, defaults proposal.Defaults, requester string, operator bool, data []byte) (*Verdict, error) {
	if err := checkIdentity("requester", requester, true); err != nil {
		return nil, err
	}
	holder := &policy.Holder{}
	holder.Set(policy.InForce{Engine: pol, Operator: func(string) bool { return operator }})
	e := &Executor{
		policy:   holder,
		defaults: defaults,
		levels:   DefaultAuditLevels(),
		cpu:      threadCPU,
		now:      time.Now,
	}
	it, err := e.parse(data, "00000000-0000-4000-8000-000000000000")
	if err != nil {
		var pe *proposal.Error
		if errors.As(err, &pe) {
			return &Verdict{Refusal: pe}, nil
		}
		return nil, fmt.Errorf("executor: check: %w", err)
	}
	decision, _ := e.judge(context.Background(), it, requester, false)
	return &Verdict{
		ProposalID: it.proposalID, Action: it.action, Risk: string(it.risk),
		Requests: it.requests(requester, operator, false),
		Decision: decision,
	}, nil
}

// Explain is a Verdict in lines for a person (snapnode policy check): a
// refusal, or the policy's explanation of each request (Engine.Explain)
// and, when it is not that of the one request, the overall decision.
func (v *Verdict) Explain(pol *policy.Engine) string {
	var b strings.Builder
	if v.Refusal != nil {
		fmt.Fprintf(&b, "refused before the policy: %s: %s\n", v.Refusal.Code, v.Refusal.Message)
		fmt.Fprintf(&b, "output: %s\n", mustJSON(v.Refusal))
		return b.String()
	}
	fmt.Fprintf(&b, "proposal %s: %s, risk %s\n", v.ProposalID, v.Action, v.Risk)
	for i, r := range v.Requests {
		if len(v.Requests) > 1 {
			fmt.Fprintf(&b, "\n--- request %d of %d ---\n", i+1, len(v.Requests))
		}
		b.WriteString(pol.Explain(r))
	}
	if len(v.Requests) == 1 && pol.Decide(context.Background(), v.Requests[0]).Effect == v.Decision.Effect {
		return b.String() // the policy's explanation ends with this decision
	}
	fmt.Fprintf(&b, "\noverall decision: %s\n", strings.ToUpper(v.Decision.Effect.String()))
	for _, r := range v.Decision.Reasons {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	return b.String()
}
