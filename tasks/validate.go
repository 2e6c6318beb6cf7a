package tasks

import (
	"fmt"
	"unicode/utf8"

	"github.com/snapnode/snapnode/snap"
)

// Limits of SNAP v0.1 on tasks and their content (the SNAP specification's
// field constraints and its JSON schemas). Sizes are bytes; 1 MB is 2^20
// bytes, as in snap.
const (
	MaxIDLength        = snap.MaxIDLength        // task, context, message and artifact ids, idempotency keys
	MaxParts           = snap.MaxParts           // parts per message and per artifact
	MaxArtifacts       = 100                     // artifacts per task
	MaxTextSize        = snap.MaxTextSize        // text part, bytes of UTF-8
	MaxRawSize         = snap.MaxRawSize         // raw part, decoded bytes
	MaxRawLength       = snap.MaxRawLength       // raw part, base64 characters (schema maxLength)
	MaxDataSize        = snap.MaxDataSize        // data part, bytes of compact JSON
	MaxURLLength       = snap.MaxURLLength       // url part
	MaxMediaTypeLength = snap.MaxMediaTypeLength // mediaType
	MaxArtifactName    = 256                     // artifact name, characters
	MaxStatusMessage   = 1024                    // status message, characters
	MaxHistoryLength   = snap.MaxHistoryLength   // historyLength of tasks/get
)

// Validate checks a against the SNAP Artifact schema and the field
// constraints of the SNAP specification. A failure is a *snap.Error 1004
// whose field is a path under "artifact".
func (a *Artifact) Validate() error {
	if e := validateArtifact(a, "artifact"); e != nil {
		return e
	}
	return nil
}

// Validate checks t against the Task schema: ids, status (state, timestamp,
// note), at most 100 artifacts, and every message and artifact. A failure
// is a *snap.Error 1004 whose field is a path under "task".
func (t *Task) Validate() error {
	if e := validateTask(t, "task"); e != nil {
		return e
	}
	return nil
}

func validateTask(t *Task, path string) *snap.Error {
	if e := snap.CheckID(path+".id", t.ID); e != nil {
		return e
	}
	if t.ContextID != "" {
		if e := snap.CheckID(path+".contextId", t.ContextID); e != nil {
			return e
		}
	}
	if !t.Status.State.Valid() {
		return snap.FieldError(path+".status.state", "enum", stateNames(), string(t.Status.State))
	}
	if t.Status.Timestamp.IsZero() {
		return snap.FieldError(path+".status.timestamp", "required", "present", nil)
	}
	if y := t.Status.Timestamp.UTC().Year(); y < 0 || y > 9999 {
		return snap.FieldError(path+".status.timestamp", "format", "an RFC 3339 time between years 0000 and 9999", y)
	}
	if n := utf8.RuneCountInString(t.Status.Message); n > MaxStatusMessage {
		return snap.FieldError(path+".status.message", "maxLength", MaxStatusMessage, n)
	}
	for i := range t.History {
		if e := snap.CheckInnerMessage(fmt.Sprintf("%s.history[%d]", path, i), &t.History[i]); e != nil {
			return e
		}
	}
	if n := len(t.Artifacts); n > MaxArtifacts {
		return snap.FieldError(path+".artifacts", "maxItems", MaxArtifacts, n)
	}
	for i := range t.Artifacts {
		if e := validateArtifact(&t.Artifacts[i], fmt.Sprintf("%s.artifacts[%d]", path, i)); e != nil {
			return e
		}
	}
	return nil
}

func stateNames() []string {
	out := make([]string, 0, 6)
	for _, s := range States() {
		out = append(out, string(s))
	}
	return out
}

func validateArtifact(a *Artifact, path string) *snap.Error {
	if e := snap.CheckID(path+".artifactId", a.ArtifactID); e != nil {
		return e
	}
	if a.Name != "" {
		if !utf8.ValidString(a.Name) {
			return snap.FieldError(path+".name", "format", "UTF-8", a.Name)
		}
		if n := utf8.RuneCountInString(a.Name); n > MaxArtifactName {
			return snap.FieldError(path+".name", "maxLength", MaxArtifactName, a.Name)
		}
	}
	return snap.CheckParts(path+".parts", a.Parts)
}
