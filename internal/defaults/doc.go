// Package defaults fills the unset settings of a component's
// configuration with the component's defaults.
package defaults
