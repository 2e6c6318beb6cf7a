package main

import (
	"errors"
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

// networkHint tells the user of policy check which network it judged
// for, network, and how to choose the other.
func networkHint(network identity.Network) string {
	if network == identity.Testnet {
		return "the check judges for a testnet node, as the settings say (testnet in the settings file, SNAPNODE_TESTNET or --testnet): to judge for a mainnet node, leave them out"
	}
	return "the check judges for a mainnet node, as the settings say (no testnet in the settings file, SNAPNODE_TESTNET or --testnet): to judge for a testnet or signet node, give --testnet"
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
	proposer, err := identity.ParseAddress(*from)
	if err != nil {
		return c.usageError(fs, fmt.Sprintf("--from: %v", err))
	}
	if len(pos) != 1 {
		return c.usageError(fs, "give the proposal FILE, or - for standard input")
	}
	if err := config.Load(cfg, fs, os.Getenv); err != nil {
		return c.configError(fs, err)
	}
	network := node.Network(*cfg)
	if proposer.Network != network {
		// Without the node's settings (on another machine, say) the
		// check judges for a mainnet node: a testnet proposer says
		// which network was meant, and no node of the other hears it.
		return c.usageError(fs, fmt.Sprintf("--from %s is a %s address, and a %s node never judges a request from it; %s",
			*from, proposer.Network, network, networkHint(network)))
	}
	data, err := c.readInput(pos)
	if err != nil {
		return c.ioError("policy check", err)
	}
	pol, err := node.PolicyEngine(cfg.Policy, network)
	if err != nil {
		if errors.Is(err, policy.ErrOtherNetwork) {
			err = fmt.Errorf("%w; %s", err, networkHint(network))
		}
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
