package sandbox

import (
	"context"
	"errors"
	"io/fs"
)

// Prepared is a Staged whose new file contents are already on disk: each
// written to a temporary file in its target's directory and synced, none
// renamed yet, so nothing in the sandbox has changed. A caller that must
// make something else durable before the sandbox changes (a record of
// the promotion, say) prepares while it does that, then promotes with
// PromotePrepared, which only has the renames and the directory syncs
// left to do: the two waits for the disk overlap instead of following
// each other.
//
// Call Discard once done with it, promoted or not: it removes the
// temporary files no promotion used, and releases them (until then they
// are locked, and Sweep leaves them alone, in any process). A crash in
// between leaves them behind, for Sweep to remove at the next start of
// any process on the folder; they never hold more than
// what the Staged would have written, and no path a caller can name
// reaches them (their names start with ReservedPrefix).
type Prepared struct {
	s     *Sandbox
	st    *Staged
	temps map[string]*tempFile // path → its temporary file
}

// Prepare writes the new content of every file st writes whose directory
// exists now (one that st creates is written at promotion instead) to a
// temporary file beside it, synced. On an error it leaves nothing behind.
// It changes nothing a reader of the sandbox sees and holds no lock of
// the sandbox: it may run while anything else does.
func (s *Sandbox) Prepare(ctx context.Context, st *Staged) (*Prepared, error) {
	if st.core != s.core {
		return nil, ErrForeign
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	p := &Prepared{s: s, st: st, temps: make(map[string]*tempFile)}
	for _, e := range st.entries {
		if e.post.Kind != KindFile || e.pre.same(e.post) {
			continue
		}
		tmp, err := s.prepareOne(ctx, e)
		if errors.Is(err, fs.ErrNotExist) {
			continue // its directory comes with the promotion
		}
		if err != nil {
			p.Discard()
			return nil, opErr("prepare", e.rel, err)
		}
		p.temps[e.rel] = tmp
	}
	return p, nil
}

// prepareOne writes e's new content beside it.
func (s *Sandbox) prepareOne(ctx context.Context, e entry) (*tempFile, error) {
	if err := alive(ctx); err != nil {
		return nil, err
	}
	d, err := s.openDir(ctx, parentOf(e.rel))
	if err != nil {
		return nil, err
	}
	defer d.close()
	return writeTemp(d.r, e.post)
}

// PromotePrepared is Promote of the Staged that p was prepared from: the
// same checks and the same all-or-nothing promotion, with the files
// Prepare wrote renamed into place instead of written again.
func (s *Sandbox) PromotePrepared(ctx context.Context, p *Prepared) (*Snapshot, error) {
	if p.s.core != s.core {
		return nil, ErrForeign
	}
	snap, err := s.promote(ctx, p.st, p.temps)
	if err == nil {
		for _, t := range p.temps {
			t.close()
		}
		clear(p.temps) // all renamed: nothing left for Discard
	}
	return snap, err
}

// Discard removes the temporary files of p that no promotion renamed. It
// is safe to call more than once.
func (p *Prepared) Discard() {
	if len(p.temps) == 0 {
		return
	}
	ctx, cancel := p.s.bound(context.Background())
	defer cancel()
	for rel, tmp := range p.temps {
		if tmp.name != "" { // "": renamed, or removed by a promotion that failed
			if d, err := p.s.openDir(ctx, parentOf(rel)); err == nil {
				d.r.Remove(tmp.name)
				d.close()
			}
		}
		tmp.close()
		delete(p.temps, rel)
	}
}
