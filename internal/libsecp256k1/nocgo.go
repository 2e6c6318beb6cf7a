//go:build libsecp256k1 && !cgo

package libsecp256k1

// The libsecp256k1 build tag binds a C library, which needs cgo: build with
// CGO_ENABLED=1 and a C compiler, or without the tag.
var _ = the_libsecp256k1_build_tag_needs_cgo_and_a_C_compiler
