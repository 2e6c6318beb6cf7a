// Package jsondec lends jsontext decoders reading a byte slice, so that
// the hot paths decoding one small JSON text after another (a relay
// message, a SNAP envelope) reuse a decoder's state instead of making it
// afresh each time. A fresh decoder grows, for each object it enters, the
// list of names it checks for duplicates (the I-JSON rule) from nothing; a
// reused one keeps that room. The checks are the same: only the memory is
// reused.
package jsondec
