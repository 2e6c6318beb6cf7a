package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/origins"
)

// live reports whether Reload puts the setting name (its TOML name) in
// force while the node runs; every other one needs a restart. log_level
// is live only on a node started WithLogLevel.
func (n *Node) live(name string) bool {
	switch name {
	case "operators", "service_callers", "policy",
		"http_rate", "http_burst", "identity_rate", "identity_burst", "nostr_key_rate", "nostr_key_burst",
		"relay_event_rate", "relay_event_burst", "card", "http_allowed_hosts",
		"http_allowed_origins", "relay_allowed_origins":
		return true
	case "log_level":
		return n.level != nil
	}
	return false
}

// ErrNotReloaded is the error Reload returns when it changed nothing (the
// settings do not validate, the policy does not load, the card is
// invalid); the reason is wrapped with it.
var ErrNotReloaded = errors.New("settings not reloaded; those in force stay")

// Reload puts in force the settings of cfg that can change while the node
// runs (operators, service_callers, policy, the rate limits http_*,
// identity_*, nostr_key_* and relay_event_*, card, http_allowed_hosts
// (with the card's endpoints, the names the HTTP transport answers to),
// http_allowed_origins and relay_allowed_origins (each logged with the
// origins added and removed), and log_level when the node was started
// WithLogLevel), for every request after it. It checks everything
// first — cfg validates, the policy loads, the card is valid — and on an
// error changes nothing: the settings in force stay. It returns the
// settings of cfg that differ from those in force but need a restart,
// which it leaves as they are. A changed card is put in force with the
// rest — the HTTP transport serves it at once — and published to the
// relays in the background, with retries until a relay takes it, a newer
// card replaces it or the node stops (see publishCards): Reload does not
// wait for the relays.
func (n *Node) Reload(ctx context.Context, cfg config.Config) (restart []string, err error) {
	refused := func(err error) ([]string, error) {
		return nil, fmt.Errorf("node: %w: %w", ErrNotReloaded, err)
	}
	if err := cfg.Validate(); err != nil {
		return refused(err)
	}
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return refused(fmt.Errorf("log_level: %w", err))
	}
	next := n.cfg // what is in force, with cfg's live settings
	for _, name := range config.Changed(n.cfg, cfg) {
		if !n.live(name) {
			restart = append(restart, name)
		}
	}
	next.Operators, next.ServiceCallers, next.Policy = cfg.Operators, cfg.ServiceCallers, cfg.Policy
	next.HTTPRate, next.HTTPBurst = cfg.HTTPRate, cfg.HTTPBurst
	next.IdentityRate, next.IdentityBurst = cfg.IdentityRate, cfg.IdentityBurst
	next.NostrKeyRate, next.NostrKeyBurst = cfg.NostrKeyRate, cfg.NostrKeyBurst
	next.RelayEventRate, next.RelayEventBurst = cfg.RelayEventRate, cfg.RelayEventBurst
	next.Card = cfg.Card
	next.HTTPAllowedHosts = cfg.HTTPAllowedHosts
	next.HTTPAllowedOrigins, next.RelayAllowedOrigins = cfg.HTTPAllowedOrigins, cfg.RelayAllowedOrigins
	if n.level != nil {
		next.LogLevel = cfg.LogLevel
	}
	var engine *policy.Engine
	if n.exec != nil {
		if engine, err = PolicyEngine(next.Policy, n.network); err != nil {
			return refused(err)
		}
	}
	card, err := buildCard(next, n.Address(), n.urls)
	if err != nil {
		return refused(err)
	}
	if _, err := origins.ParseHosts(httpHosts(next)); err != nil {
		return refused(fmt.Errorf("the host names the HTTP transport answers to: %w", err))
	}
	if n.services != nil {
		// The addresses validated: this does not fail.
		if err := n.services.SetAllow(next.ServiceCallers); err != nil {
			return refused(err)
		}
	}

	// Checked: from here on, everything is put in force.
	changed := config.Changed(n.cfg, next)
	if n.exec == nil {
		// With an executor the task service asks the policy holder's
		// operators, set below with the policy in one step.
		n.Tasks.SetOperators(next.Operators)
	}
	if modes, err := inputModes(next); err == nil { // buildCard checked them
		n.Tasks.SetInputModes(modes)
	}
	n.identityLimits.SetRate(next.IdentityRate, next.IdentityBurst)
	n.nostrKeyShare.set(next.NostrKeyRate, next.NostrKeyBurst)
	if n.http != nil {
		n.http.srv.SetRate(perSecond(next.HTTPRate), next.HTTPBurst)
		// Validated: this does not fail.
		if err := n.http.srv.SetAllowedHosts(httpHosts(next)); err != nil {
			n.logger.Error("http: the host names answered to not changed", "err", err)
		}
		// Validated (cfg.Validate): this does not fail.
		n.setOrigins("http_allowed_origins", n.http.srv.SetAllowedOrigins, next.HTTPAllowedOrigins)
	}
	if n.metrics != nil {
		// Validated: this does not fail.
		if err := n.metrics.srv.SetAllowedHosts(metricsHosts(next)); err != nil {
			n.logger.Error("metrics: the host names answered to not changed", "err", err)
		}
	}
	if n.relay != nil {
		// Validated: this does not fail.
		if err := n.relay.SetEventRate(next.RelayEventRate, next.RelayEventBurst); err != nil {
			n.logger.Error("embedded relay: event rate not changed", "err", err)
		}
		n.setOrigins("relay_allowed_origins", n.relay.SetAllowedOrigins, next.RelayAllowedOrigins)
	}
	if n.level != nil {
		n.level.Set(level)
	}
	if engine != nil {
		// The policy and the operators it judges with, in one step: no
		// action is judged by the new operators under the old policy,
		// nor by the old ones under the new. The task service (reads,
		// cancels, the first check of a decision) and the agent's queue
		// ask these operators too: one answer for every check.
		old := n.exec.policy.Set(policy.InForce{Engine: engine, Operator: policy.Operators(next.Operators)}).Engine
		n.logger.Info("policy in force", "policy", engine.Name(), "policy_version", engine.Version(), "previous_version", old.Version())
		if engine.Version() != old.Version() && !slices.Contains(changed, "policy") {
			// The same file, another text: the setting is the file's
			// name, and what it names changed.
			changed = append(changed, "policy")
		}
	}
	// The card with them: served over HTTP from now on, and published
	// to the relays in the background (publishCards logs how that goes).
	newCard := n.setCard(card)
	n.cfg = next
	if len(restart) > 0 {
		n.logger.Warn("settings changed that need a restart: the node keeps running with the old values", "settings", restart)
	}
	n.logger.Info("settings reloaded", "changed", changed)
	if newCard {
		n.logger.Info("card changed: served over HTTP now, publishing it to the relays", "relays", n.urls)
	}
	return restart, nil
}

// setOrigins puts list in force as the allowed origins of the setting
// name with set, and logs what changed: the origins added and removed,
// or why the list in force stays.
func (n *Node) setOrigins(name string, set func([]string) (added, removed []string, err error), list []string) {
	added, removed, err := set(list)
	switch {
	case err != nil:
		n.logger.Error(name+" not changed; the list in force stays", "err", err)
	case len(added) > 0 || len(removed) > 0:
		n.logger.Info(name+" changed", "added", added, "removed", removed)
	}
}
