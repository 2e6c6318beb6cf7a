// Package libsecp256k1 is a small cgo binding to the C library
// libsecp256k1 (Bitcoin Core's secp256k1, with its extrakeys, schnorrsig and
// ecdh modules): BIP-340 signing and verification, x-only keys, the x-only
// tweak BIP-341 needs and ECDH. It exists because no maintained Go binding
// to libsecp256k1 with BIP-340 Schnorr signatures is among the modules the
// project may use; it binds only what package secp needs.
//
// The package is compiled only with the build tag libsecp256k1 (and cgo),
// and needs the library and its headers (Debian: apt-get install
// libsecp256k1-dev, version 0.2.0 or later), found through pkg-config.
// Without the tag it is empty.
//
// The C library is only ever given fixed-size Go arrays, whose sizes the
// Go types fix, and opaque structures the library itself filled; it keeps
// no pointer to Go memory after a call returns.
package libsecp256k1
