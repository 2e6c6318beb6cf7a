package defaults

// Positive sets *v to d when *v is zero or negative: such a limit, size
// or time-out means "the default" in every Config that uses it.
func Positive[T ~int | ~int64 | ~float64](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}
