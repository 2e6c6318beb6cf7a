package backup

// WithAfterStep sets the hook Restore calls after each step of the
// replacement; an error stops it there, as a kill would.
func WithAfterStep(o RestoreOptions, f func(step string) error) RestoreOptions {
	o.afterStep = f
	return o
}

// WithCheckStep sets the hook Restore's checks call after each file's sum
// ("sum NAME") and after the audit chain ("chain") are checked.
func WithCheckStep(o RestoreOptions, f func(step string)) RestoreOptions {
	o.checkStep = f
	return o
}
