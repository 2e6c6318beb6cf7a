// Package lowerhex checks the lowercase hexadecimal strings of the
// protocol and of the audit log: signatures, public keys, event ids and
// SHA-256 digests, which are never written in upper case.
package lowerhex
