package policy

import (
	"fmt"
	"strings"
)

// Explain judges r as Decide does and says how, in lines meant for a
// person (snapnode policy check): the request, the policy text, each host
// rule with its outcome, the policies that matched on each path, and the
// decision with its reasons. Unlike Decide it evaluates the Cedar policy
// even when a host rule denies (unless the request is malformed), and says
// that the policy was not consulted.
func (e *Engine) Explain(r Request) string {
	if e == nil {
		return "no policy loaded: every request is denied\n"
	}
	t := e.judge(r, true)
	var b strings.Builder
	q := t.req
	role := ""
	if q.Operator {
		role = " (operator)"
	}
	fmt.Fprintf(&b, "request:  Agent::%q%s %s %s\n", q.Principal, role, q.Action, quoteAll(q.Paths))
	fmt.Fprintf(&b, "          risk %s, size %d, rollback %s, %s\n", q.Risk, q.Size,
		choose(q.RollbackSupported, "supported", "NOT supported"),
		choose(q.RecentlyRolledBack, "repeated after a rollback", "not a repeat after a rollback"))
	fmt.Fprintf(&b, "policy:   %s (version %s, %d policies)\n", e.name, e.version, len(e.meta))

	b.WriteString("host rules (checked first; no policy overrides them):\n")
	for _, c := range t.host {
		outcome := "pass"
		switch {
		case c.flag:
			outcome = "flag"
		case c.effect == Deny:
			outcome = "DENY"
		case c.effect == Confirm:
			outcome = "CONFIRM"
		}
		fmt.Fprintf(&b, "  %-8s %-24s %s\n", outcome, c.rule, c.reason)
	}

	switch {
	case t.hostDeny && len(t.paths) == 0:
		b.WriteString("cedar policy: not consulted (the request is malformed)\n")
	case t.hostDeny:
		b.WriteString("cedar policy (not consulted: a host rule denies; shown for reference):\n")
	default:
		b.WriteString("cedar policy:\n")
	}
	for _, p := range t.paths {
		fmt.Fprintf(&b, "  on Path::%q: %s\n", p.resource, p.effect)
		for _, m := range p.forbids {
			fmt.Fprintf(&b, "    forbid   %s at %s%s\n", m.id, m.at, suffix(m.reason))
		}
		for _, m := range p.permits {
			kind := "permit"
			if m.confirm {
				kind = "confirm"
			}
			fmt.Fprintf(&b, "    %-8s %s at %s%s\n", kind, m.id, m.at, suffix(m.reason))
		}
		for _, x := range p.errs {
			what := "ignored: a failing permit grants nothing"
			switch {
			case x.meta.forbid:
				what = "denies: a failing forbid denies"
			case x.meta.confirm:
				what = "grants nothing, but what other permits grant needs confirmation"
			}
			fmt.Fprintf(&b, "    error    %s at %s: %s (%s)\n", x.meta.id, x.meta.at, x.msg, what)
		}
		if len(p.forbids)+len(p.permits)+len(p.errs) == 0 {
			b.WriteString("    no policy matches: deny by default\n")
		}
	}

	d := t.decision
	fmt.Fprintf(&b, "decision: %s", strings.ToUpper(d.Effect.String()))
	if d.Sandbox && d.Effect != Deny {
		b.WriteString(" (in the sandbox)")
	}
	b.WriteString("\n")
	for _, r := range d.Reasons {
		fmt.Fprintf(&b, "  - %s\n", r)
	}
	return b.String()
}

func quoteAll(ps []string) string {
	if len(ps) == 0 {
		return "(no path)"
	}
	q := make([]string, len(ps))
	for i, p := range ps {
		q[i] = fmt.Sprintf("%q", p)
	}
	return strings.Join(q, " ")
}

func choose(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func suffix(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}
