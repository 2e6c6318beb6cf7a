// Package jsonenc encodes JSON the way snapnode publishes and signs it:
// without HTML escaping, so that the bytes sent, measured and hashed are
// the characters of the value ("<", ">" and "&" stay as they are).
package jsonenc
