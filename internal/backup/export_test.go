package backup

// WithAfterStep sets the hook Restore calls after each step of the
// replacement; an error stops it there, as a kill would.
func WithAfterStep(o RestoreOptions, f func(step string) error) RestoreOptions {
	o.afterStep = f
	return o
}
