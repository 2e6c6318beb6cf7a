package executor

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/scripts"
)

// The result members of the success output ({"status":"success",
// "action":…,"result":{…}}) for each action. The proposal schema versioning
// strategy defines only READ_FILE's ({"content":…}); the others are this
// package's.

// ReadResult is READ_FILE's result. A file that is not valid UTF-8 cannot
// be a JSON string: its content is then base64 and Encoding is "base64".
type ReadResult struct {
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// ListResult is LIST_FILES's result: the directory's entries, by name.
// More, only in a listing the host asked to cut (Request.ListFirst), is
// how many entries follow those shown.
type ListResult struct {
	Entries []sandbox.Entry `json:"entries"`
	More    int             `json:"more,omitzero"`
}

// RuleWildcardChar marks a listed entry whose name holds a character that
// is a wildcard in descriptors ('*', '?', '[' or ']'). The sandbox accepts
// such a name, but the proposal schema's path pattern refuses it, so no
// proposal can name the entry: the listing says so, as it does for the
// names the sandbox refuses (sandbox.Entry.Invalid).
const RuleWildcardChar sandbox.Rule = "wildcard_char"

// markWildcards marks with RuleWildcardChar the entries the sandbox found
// valid whose names no proposal can use for their wildcard characters.
func markWildcards(entries []sandbox.Entry) []sandbox.Entry {
	for i, e := range entries {
		if e.Invalid == "" && strings.ContainsAny(e.Name, "*?[]") {
			entries[i].Invalid = RuleWildcardChar
		}
	}
	return entries
}

// FinishResult is FINISH's result: the response it ends the task with.
type FinishResult struct {
	Response string `json:"response"`
}

// WriteResult is WRITE_FILE's result: the file written, its size and the
// SHA-256 of its content.
type WriteResult struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// PathResult is the result of CREATE_DIRECTORY and DELETE_FILE.
type PathResult struct {
	Path string `json:"path"`
}

// RenameResult is RENAME_FILE's result.
type RenameResult struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// CompositeResult is a MULTI_STEP_COMPOSITE's result: each step's output,
// in order.
type CompositeResult struct {
	Steps []*proposal.Output `json:"steps"`
}

// Codes of the structured errors of actions that passed validation (the
// validation errors themselves are proposal.Error's).
const (
	// CodeActionNotAllowed: the policy (host rules or the operator's)
	// blocks the action. It is the proposal schema versioning strategy's
	// policy error, with the reasons.
	CodeActionNotAllowed = string(proposal.ErrActionNotAllowed)
	// CodeUndeclaredEffects: the staged changes reach paths or kinds of
	// change the descriptor does not declare; a permanent block.
	CodeUndeclaredEffects = "UNDECLARED_EFFECTS"
	// CodeLimitExceeded: a cap on duration, size, disk, memory or CPU
	// time was reached.
	CodeLimitExceeded = "LIMIT_EXCEEDED"
	// CodeExecutionFailed: the sandbox could not carry the action out (a
	// missing file, an existing target, a link…); Cause says which.
	CodeExecutionFailed = "EXECUTION_FAILED"
	// CodeConfirmationDenied: an operator denied the action.
	CodeConfirmationDenied = "CONFIRMATION_DENIED"
	// CodePreconditionFailed: a precondition the descriptor declares does
	// not hold (a path of paths_exist is missing, a host fact is not
	// reported); Precondition and Field name it. Nothing ran, and the
	// action is not tried again: a new proposal is a new decision.
	CodePreconditionFailed = "PRECONDITION_FAILED"
)

// Failure is the structured error of an action that was valid but did not
// run: error_code and message first, as in proposal.Error, then what
// explains it.
type Failure struct {
	Code    string `json:"error_code"`
	Message string `json:"message"`
	// Reasons and PolicyVersion: the policy's, for ACTION_NOT_ALLOWED.
	Reasons       []string `json:"reasons,omitempty"`
	PolicyVersion string   `json:"policy_version,omitempty"`
	// Paths: the undeclared paths, for UNDECLARED_EFFECTS; the path
	// concerned, for EXECUTION_FAILED and LIMIT_EXCEEDED.
	Paths []string `json:"paths,omitempty"`
	// Cause names what failed, for EXECUTION_FAILED: not_found, exists,
	// not_text, not_regular, not_dir, symlink, hard_link, invalid_path,
	// changed, no_workspace (the workspace folder is missing on the host)
	// or io.
	Cause string `json:"cause,omitempty"`
	// Limit, Max and Got: the cap reached, for LIMIT_EXCEEDED.
	Limit string `json:"limit,omitempty"`
	Max   int64  `json:"max,omitzero"`
	Got   int64  `json:"got,omitzero"`
	// Reason is the operator's, for CONFIRMATION_DENIED.
	Reason string `json:"reason,omitempty"`
	// Precondition names the precondition that does not hold, for
	// PRECONDITION_FAILED: paths_exist, user_idle or network_available.
	Precondition string `json:"precondition,omitempty"`
	// Field is the JSON pointer, in the descriptor, of the precondition
	// that does not hold, or of the declared cap that was reached
	// (/resources/max_memory_mb, /resources/max_cpu_ms); for
	// EXECUTION_FAILED, of the argument the sandbox refused (/args/source,
	// /operation/args/path, /children/1/operation/args/destination), when
	// one argument alone names the path; for LIMIT_EXCEEDED file_size, of
	// the content of the write that is too large.
	Field string `json:"field,omitempty"`
}

func (f *Failure) Error() string { return f.Code + ": " + f.Message }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value marshalled here is one of this package's types or
		// proposal's, of strings and numbers: it cannot fail.
		panic(fmt.Sprintf("executor: marshal %T: %v", v, err))
	}
	return b
}

// policyFailure is the output of a Deny.
func policyFailure(d policy.Decision) *Failure {
	return &Failure{
		Code:          CodeActionNotAllowed,
		Message:       "The policy does not allow this action.",
		Reasons:       d.Reasons,
		PolicyVersion: d.PolicyVersion,
	}
}

// sandboxFailure turns an error of the sandbox into the action's
// structured error.
func sandboxFailure(err error) *Failure {
	var (
		le *sandbox.LimitError
		se *sandbox.ScopeError
		oe *sandbox.OpError
		pe *sandbox.PathError
	)
	f := &Failure{Code: CodeExecutionFailed}
	switch {
	case errors.As(err, &le):
		f.Code, f.Limit, f.Max, f.Got = CodeLimitExceeded, string(le.Limit), le.Max, le.Got
		f.Message = fmt.Sprintf("The action exceeds the %s limit.", strings.ReplaceAll(string(le.Limit), "_", " "))
		if what, ok := quotaWords[le.Limit]; ok {
			f.Message = fmt.Sprintf("The action would take its requester past its quota of %s in the workspace (%d).", what, le.Max)
		}
		if what, ok := workspaceWords[le.Limit]; ok {
			f.Message = fmt.Sprintf("The action would take the workspace past its cap of %d %s, for all requesters together.", le.Max, what)
		}
		if le.Path != "" {
			f.Paths = []string{le.Path}
		}
		return f
	case errors.As(err, &se):
		f.Code, f.Paths = CodeUndeclaredEffects, se.Undeclared
		f.Message = "The action changes more than its descriptor declares; it is blocked."
		return f
	case errors.As(err, &pe):
		f.Cause, f.Paths = "invalid_path", []string{pe.Path}
		f.Message = fmt.Sprintf("The path is not allowed (%s).", pe.Rule)
		return f
	}
	if errors.As(err, &oe) && oe.Path != "" {
		f.Paths = []string{oe.Path}
	}
	for _, c := range []struct {
		err         error
		cause, what string
	}{
		{fs.ErrNotExist, "not_found", "The path does not exist."},
		{sandbox.ErrExists, "exists", "The target already exists."},
		{sandbox.ErrNotText, "not_text", "The target is not a .txt or .md file."},
		{sandbox.ErrNotRegular, "not_regular", "The path is not a regular file."},
		{sandbox.ErrNotDir, "not_dir", "The path is not a directory."},
		{sandbox.ErrSymlink, "symlink", "The path goes through a symbolic link."},
		{sandbox.ErrHardLink, "hard_link", "The file has more than one hard link."},
		{sandbox.ErrInvalidPath, "invalid_path", "The path is not allowed."},
		{sandbox.ErrSpelling, "spelling", "The path names a file or folder stored under another spelling (letter case or Unicode form); name it as a listing shows it."},
		{sandbox.ErrChanged, "changed", "The files changed while the action was staged; propose it again."},
		{sandbox.ErrDiverged, "changed", "The files changed since the action was promoted."},
		{sandbox.ErrNoWorkspace, "no_workspace", "The workspace folder is missing on the host; the operator must restore it."},
	} {
		if errors.Is(err, c.err) {
			f.Cause, f.Message = c.cause, c.what
			return f
		}
	}
	f.Cause, f.Message = "io", "The sandbox could not carry out the action."
	return f
}

// readResult is READ_FILE's result for content.
func readResult(content []byte) ReadResult {
	if utf8.Valid(content) {
		return ReadResult{Content: string(content)}
	}
	return ReadResult{Content: base64.StdEncoding.EncodeToString(content), Encoding: "base64"}
}

// formatDiff writes the diffs of a staging as one text: the unified diff
// of each text file, and one line for each other change (binary files,
// directories).
func formatDiff(diffs []sandbox.Diff) string {
	var b strings.Builder
	for _, d := range diffs {
		if d.Unified != "" {
			b.WriteString(d.Unified)
			if !strings.HasSuffix(d.Unified, "\n") {
				b.WriteByte('\n')
			}
			continue
		}
		what := "changed"
		if d.Binary {
			what = "binary"
		}
		fmt.Fprintf(&b, "%s %s: %s -> %s\n", what, d.Path, imageText(d.Before), imageText(d.After))
	}
	return b.String()
}

// MarkDiffPaths returns diff, the diff of an action (as a held action
// carries it), with every word of its paths that mixes scripts, or is
// wholly of look-alikes of Latin letters (scripts.Has), marked for an
// operator's eyes (scripts.Spelled: "p⟨U+0430 Cyrillic⟩ssword.txt"):
// the file headers of each unified diff ("--- ", "+++ ") and the lines of
// the other changes ("changed …", "binary …"). The lines of a file's text
// are left as they are, a removed line that reads like a header among
// them: a hunk's lines are counted from its "@@" line. It is for showing
// only: the approval names the diff as it is (proposals.DiffSum).
func MarkDiffPaths(diff string) string {
	marked, _ := MarkDiffPathsPrefix(diff, math.MaxInt)
	return marked
}

// MarkDiffPathsPrefix is MarkDiffPaths cut to at most n bytes, as marked
// (a marked letter can take ten times its bytes): never inside a
// character or a mark (scripts.MarkPrefix). used is how many bytes of
// diff it shows, len(diff) when all of it fits.
func MarkDiffPathsPrefix(diff string, n int) (marked string, used int) {
	return showDiffPrefix(diff, n, nil)
}

// VisibleDiffPrefix is MarkDiffPathsPrefix with every invisible character
// of diff shown too, as Visible shows it (⟨U+000D⟩ for a carriage
// return), within the same n bytes: the diff as an operator reads it,
// never cut inside a character or a marker.
func VisibleDiffPrefix(diff string, n int) (shown string, used int) {
	return showDiffPrefix(diff, n, visibleRune)
}

// showDiffPrefix is MarkDiffPathsPrefix with each character r of diff
// that show spells out (show(r) not "", scripts.ShowPrefix) so written.
func showDiffPrefix(diff string, n int, show func(r rune) string) (marked string, used int) {
	if !scripts.Has(diff) {
		return scripts.ShowPrefix(diff, n, nil, show)
	}
	var b strings.Builder
	old, new := 0, 0 // the lines of the current hunk left to come
	for line := range strings.SplitAfterSeq(diff, "\n") {
		header := false
		switch {
		case line == "":
		case old > 0 || new > 0:
			switch line[0] {
			case ' ':
				old, new = old-1, new-1
			case '-':
				old--
			case '+':
				new--
			}
		case strings.HasPrefix(line, "@@ "):
			old, new = hunkLines(line)
		case strings.HasPrefix(line, "--- "), strings.HasPrefix(line, "+++ "),
			strings.HasPrefix(line, "changed "), strings.HasPrefix(line, "binary "):
			header = true
		}
		var mark func(rune) string
		if header {
			mark = scripts.Spelled
		}
		shown, u := scripts.ShowPrefix(line, n-b.Len(), mark, show)
		b.WriteString(shown)
		used += u
		if u < len(line) {
			break
		}
	}
	return b.String(), used
}

// hunkLines reads the counts of old and new lines of a unified diff's
// hunk line, "@@ -1,3 +1,4 @@" (a count left out is 1); 0, 0 when it is
// not one.
func hunkLines(line string) (old, new int) {
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "@@" || f[3] != "@@" || !strings.HasPrefix(f[1], "-") || !strings.HasPrefix(f[2], "+") {
		return 0, 0
	}
	count := func(r string) int {
		_, n, found := strings.Cut(r[1:], ",")
		if !found {
			return 1
		}
		v, err := strconv.Atoi(n)
		if err != nil || v < 0 {
			return 0
		}
		return v
	}
	return count(f[1]), count(f[2])
}

func imageText(im sandbox.Image) string {
	switch im.Kind {
	case sandbox.KindFile:
		return fmt.Sprintf("file (%d bytes, sha256 %s)", im.Size, im.SHA256)
	case sandbox.KindDir:
		return "directory"
	}
	return string(im.Kind)
}

// preImages lists what each touched path held before the staging.
func preImages(diffs []sandbox.Diff) []PreImage {
	out := make([]PreImage, 0, len(diffs))
	for _, d := range diffs {
		out = append(out, PreImage{Path: d.Path, Kind: d.Before.Kind, Size: d.Before.Size, SHA256: d.Before.SHA256})
	}
	return out
}

// fileHashes picks the content hashes an audit entry carries: the one
// file the staging reads its old content from, and the one it leaves
// new content in ("" when there is none, or more than one; Detail then
// lists every path).
func fileHashes(diffs []sandbox.Diff) (pre, post string) {
	var pres, posts []string
	for _, d := range diffs {
		if d.Before.Kind == sandbox.KindFile {
			pres = append(pres, d.Before.SHA256)
		}
		if d.After.Kind == sandbox.KindFile {
			posts = append(posts, d.After.SHA256)
		}
	}
	if len(pres) == 1 {
		pre = pres[0]
	}
	if len(posts) == 1 {
		post = posts[0]
	}
	return pre, post
}
