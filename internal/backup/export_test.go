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
// ("chain") are checked, and once the copies it is verified on are made
// ("copied").
func WithCheckStep(o RestoreOptions, f func(step string)) RestoreOptions {
	o.checkStep = f
	return o
}

// CheckWithStep is Check, calling step after each of its steps ("sum
// NAME", "key NAME", "copied", "chain").
func CheckWithStep(ctx context.Context, cfg config.Config, dir string, step func(string)) (*Manifest, error) {
	return check(ctx, cfg, dir, step)
}

// WithRunStep sets the hook Run calls once the output folder is ready
// ("out"), before anything is copied into it.
func WithRunStep(o Options, f func(step string)) Options {
	o.step = f
	return o
}
