package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
)

// Exit codes of policy check beside exitOK (promoted) and exitUsage.
const (
	exitPolicyConfirm = 3 // the action would wait for an operator
	exitPolicyDeny    = 4 // refused: invalid, or denied by a rule or the policy
)

// policyCommand is `snapnode policy check --from ADDR FILE`.
func (c *cli) policyCommand(args []string) int {
	return c.dispatch("policy", args, []subcommand{{"check", (*cli).policyCheck}},
		"usage: snapnode policy check --from ADDRESS [--as-operator] [node settings] FILE|-")
}

// policyCheck is `snapnode policy check`.
func (c *cli) policyCheck(args []string) int {
	fs, cfg := c.nodeFlagSet("policy check")
	from := fs.String("from", "", "the proposer's P2TR `ADDRESS` (required)")
	asOperator := fs.Bool("as-operator", false, "judge the proposer as an operator (default: whether --from is one of the node's --operator identities)")
	pos, code, done := c.parse(fs, args, 1)
	if done {
		return code
	}
	if *from == "" {
		return c.usageError(fs, "give --from ADDRESS, the identity proposing")
	}
	if _, err := identity.ParseAddress(*from); err != nil {
		return c.usageError(fs, fmt.Sprintf("--from: %v", err))
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the proposal FILE, or - for standard input")
	}
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return c.configError(fs, err)
	}
	data, err := c.readInput(pos)
	if err != nil {
		return c.ioError("policy check", err)
	}
	pol, err := node.PolicyEngine(cfg.Policy, node.Network(*cfg))
	if err != nil {
		return c.fail("policy check", err)
	}
	operator := *asOperator || slices.Contains(cfg.Operators, *from)
	v, err := executor.Check(pol, proposal.NewDefaults(), *from, operator, data)
	if err != nil {
		return c.fail("policy check", err)
	}
	fmt.Fprint(c.stdout, v.Explain(pol))
	switch {
	case v.Refusal != nil || v.Decision.Effect == policy.Deny:
		return exitPolicyDeny
	case v.Decision.Effect == policy.Confirm:
		return exitPolicyConfirm
	}
	return exitOK
}
