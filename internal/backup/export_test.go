package backup

import (
	"context"

	"github.com/snapnode/snapnode/internal/config"
)

// WithAfterStep sets the hook Restore calls after each step of the
// replacement; an error stops it there, as a kill would.
func WithAfterStep(o RestoreOptions, f func(step string) error) RestoreOptions {
	o.afterStep = f
	return o
}

// WithCheckStep sets the hook Restore's checks call after each file's sum
// ("sum NAME"), the key file's address ("key NAME") and the audit chain
// ("chain") are checked.
func WithCheckStep(o RestoreOptions, f func(step string)) RestoreOptions {
	o.checkStep = f
	return o
}

// CheckWithStep is Check, calling step after each of its steps ("sum
// NAME", "key NAME", "chain").
func CheckWithStep(ctx context.Context, cfg config.Config, dir string, step func(string)) (*Manifest, error) {
	return check(ctx, cfg, dir, step)
}
