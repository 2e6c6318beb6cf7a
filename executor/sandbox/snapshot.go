package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/snapnode/snapnode/internal/lowerhex"
)

// SnapshotVersion is the version of the Snapshot format.
const SnapshotVersion = 1

// Snapshot is what Rollback needs to undo a promotion: for every touched
// path its pre-image (with the content of a file) and its post-image
// (without). It is plain data: store it as JSON (encoding/json, or
// ParseSnapshot to read it back checked) wherever the caller keeps
// durable records.
type Snapshot struct {
	Version int             `json:"version"`
	Entries []SnapshotEntry `json:"entries"`
}

// SnapshotEntry is one touched path.
type SnapshotEntry struct {
	Path string `json:"path"` // virtual
	Pre  Image  `json:"pre"`
	Post Image  `json:"post"`
}

// ParseSnapshot decodes a Snapshot from JSON and checks it as Rollback
// would.
func ParseSnapshot(data []byte) (*Snapshot, error) {
	var snap Snapshot
	if err := json.Unmarshal(data, &snap); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	if _, err := snap.entries(); err != nil {
		return nil, err
	}
	return &snap, nil
}

// entries checks the snapshot and returns its paths as rollback steps
// (pre = what to restore, post = what must be there now).
func (snap *Snapshot) entries() ([]entry, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadSnapshot}, args...)...)
	}
	if snap == nil || snap.Version != SnapshotVersion {
		return nil, bad("version is not %d", SnapshotVersion)
	}
	seen := make(map[string]bool, len(snap.Entries))
	out := make([]entry, len(snap.Entries))
	for i, e := range snap.Entries {
		rel, err := Normalize(e.Path)
		if err != nil {
			return nil, bad("entry %d: %w", i, err)
		}
		if rel == "" || seen[rel] {
			return nil, bad("entry %d: path %q is the root or repeated", i, e.Path)
		}
		seen[rel] = true
		if err := checkImage(e.Pre, true); err != nil {
			return nil, bad("entry %d (%s) pre: %v", i, e.Path, err)
		}
		if err := checkImage(e.Post, false); err != nil {
			return nil, bad("entry %d (%s) post: %v", i, e.Path, err)
		}
		out[i] = entry{rel: rel, pre: e.Pre, post: e.Post}
	}
	return out, nil
}

// checkImage checks an image's fields agree; with content, that the
// content is the one its size and hash name.
func checkImage(img Image, withContent bool) error {
	switch img.Kind {
	case KindAbsent, KindDir:
		if img.Size != 0 || img.SHA256 != "" || img.Content != nil {
			return fmt.Errorf("%s with file fields", img.Kind)
		}
		return nil
	case KindFile:
	default:
		return fmt.Errorf("unknown kind %q", img.Kind)
	}
	// Lowercase, as Image.same compares it with a file's own: a post-image
	// in capitals would never match what is there, and no rollback could
	// run.
	if !lowerhex.Valid(img.SHA256, 2*sha256.Size) {
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", img.SHA256)
	}
	if img.Size < 0 {
		return fmt.Errorf("negative size")
	}
	if img.Mode&^0o777 != 0 {
		return fmt.Errorf("mode %o has more than permission bits", uint32(img.Mode))
	}
	if !withContent {
		if img.Content != nil {
			return fmt.Errorf("post-image carries content")
		}
		return nil
	}
	sum := sha256.Sum256(img.Content)
	if int64(len(img.Content)) != img.Size || hex.EncodeToString(sum[:]) != img.SHA256 {
		return fmt.Errorf("content does not match its size and sha256")
	}
	return nil
}
