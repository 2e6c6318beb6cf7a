package executor

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/proposal"
)

// AuditLevels is the host's audit level of the actions of each risk
// level: what the audit entries of an action hold.
//
//   - SUMMARY: who, the step, the decision and its reason, the action and
//     its risk, and the paths; no content hashes, no policy detail, no
//     error document.
//   - DETAILED: everything but what may hold personal data: the content
//     hashes, sizes and modes of every path before and after, the policy's
//     reasons and rules, the structured errors. Not the proposer's
//     reasoning, nor any file content.
//   - FORENSIC: DETAILED, plus the proposer's reasoning and the diff of
//     the change (text files' lines; cut to fit an entry, and then marked
//     so).
//
// A proposer never chooses: a descriptor's audit.log_level is recorded in
// the "validated" entry as requested_log_level, and the host's level
// applies. Entries written before the action's risk is known (what was
// received, a refusal of invalid data) take the highest level of the map.
// A risk the map does not name takes DefaultAuditLevels'.
type AuditLevels map[proposal.Risk]string

// DefaultAuditLevels keeps the most about what can do the most harm:
// SUMMARY for LOW (reads, listings, thinking), DETAILED for MEDIUM
// (writes, new directories), FORENSIC for HIGH (deletes, renames) and
// CRITICAL (refused by the host, and worth a full record).
func DefaultAuditLevels() AuditLevels {
	return AuditLevels{
		proposal.RiskLow:      proposal.AuditSummary,
		proposal.RiskMedium:   proposal.AuditDetailed,
		proposal.RiskHigh:     proposal.AuditForensic,
		proposal.RiskCritical: proposal.AuditForensic,
	}
}

var levelRank = map[string]int{proposal.AuditSummary: 1, proposal.AuditDetailed: 2, proposal.AuditForensic: 3}

// filled returns a copy of l with every risk level named, or an error
// naming the first unknown risk or level.
func (l AuditLevels) filled() (AuditLevels, error) {
	out := DefaultAuditLevels()
	for r, lv := range l {
		if _, ok := out[r]; !ok {
			return nil, fmt.Errorf("executor: AuditLevels: %q is not a risk level", r)
		}
		if levelRank[lv] == 0 {
			return nil, fmt.Errorf("executor: AuditLevels[%s]: %q: want SUMMARY, DETAILED or FORENSIC", r, lv)
		}
		out[r] = lv
	}
	return out, nil
}

// of returns the level of risk r.
func (l AuditLevels) of(r proposal.Risk) string {
	if lv, ok := l[r]; ok {
		return lv
	}
	return l.highest()
}

// highest is the level of entries whose risk is not known.
func (l AuditLevels) highest() string {
	best := proposal.AuditSummary
	for _, lv := range l {
		if levelRank[lv] > levelRank[best] {
			best = lv
		}
	}
	return best
}

// Members of an entry's detail that only FORENSIC keeps, and the only
// ones SUMMARY keeps.
var (
	forensicOnly   = []string{"diff", "diff_cut", "reasoning"}
	summaryMembers = []string{"action", "risk", "paths", "paths_cut", "audit_level", "requested_log_level", "requested_retain_days"}
)

// atLevel returns en as the level keeps it. The executor writes every
// entry in full (FORENSIC); the other levels leave out members of the
// detail, and SUMMARY the content hashes, keeping of each path only its
// name.
func atLevel(en audit.Entry, level string) audit.Entry {
	switch level {
	case proposal.AuditForensic:
		return en
	case proposal.AuditDetailed:
		en.Detail = filterDetail(en.Detail, func(name string) bool { return !slices.Contains(forensicOnly, name) }, false)
	default:
		en.PreHash, en.PostHash = "", ""
		en.Detail = filterDetail(en.Detail, func(name string) bool { return slices.Contains(summaryMembers, name) }, true)
	}
	return en
}

// filterDetail keeps the members of the JSON object d that keep accepts,
// in their order; with pathsOnly, a "paths" array of objects becomes the
// array of their "path" members. Nothing left, or d not an object, is
// nil: a detail the executor did not write in its own form is not kept
// below FORENSIC.
func filterDetail(d []byte, keep func(name string) bool, pathsOnly bool) []byte {
	if len(d) == 0 {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(d))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	if enc.WriteToken(jsontext.BeginObject) != nil {
		return nil
	}
	n := 0
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil
		}
		name := tok.String() // before the next read voids tok
		v, err := dec.ReadValue()
		if err != nil {
			return nil
		}
		if !keep(name) {
			continue
		}
		if pathsOnly && name == "paths" {
			v = pathNames(v)
		}
		if enc.WriteToken(jsontext.String(name)) != nil || enc.WriteValue(v) != nil {
			return nil
		}
		n++
	}
	if n == 0 || enc.WriteToken(jsontext.EndObject) != nil {
		return nil
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// pathNames turns [{"path":"/sandbox/a",…},…] into ["/sandbox/a",…];
// an array of anything else is returned as it is.
func pathNames(v jsontext.Value) jsontext.Value {
	var objs []struct {
		Path *string `json:"path"`
	}
	if err := json.Unmarshal(v, &objs); err != nil {
		return v
	}
	names := make([]string, 0, len(objs))
	for _, o := range objs {
		if o.Path == nil {
			return v
		}
		names = append(names, *o.Path)
	}
	return jsontext.Value(mustJSON(names))
}

// recordJournal is the journal of a stored action, at the level of its
// risk (the highest level, should its data no longer parse).
func (e *Executor) recordJournal(r *record) *journal {
	j := e.journal(r.Task, r.ActionID)
	if it, err := e.parse(r.Data, r.ActionID); err == nil {
		j.setRisk(e.levels, it.risk)
	}
	return j
}
