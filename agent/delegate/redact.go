package delegate

import "github.com/snapnode/snapnode/agent"

// redact removes the secrets of the runtime's built-in patterns and the
// operator's (Config.Redact) from s: what a delegate says of a failure,
// which the node logs and audits.
func (d *Delegate) redact(s string) string { return agent.Redact(s, nil, d.cfg.Redact) }
