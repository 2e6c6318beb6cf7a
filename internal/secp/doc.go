// Package secp provides the secp256k1 operations on the node's request
// path: BIP-340 signing and verification with x-only keys, the BIP-341
// key-path tweak that turns an identity's key into its P2TR output key, and
// the x-only ECDH from which NIP-44 derives a conversation key.
//
// The implementation is chosen when the node is built. By default it is
// btcec (pure Go). Built with the tag libsecp256k1 (go build -tags
// libsecp256k1, which needs cgo and the C library libsecp256k1 0.2.0 or
// later with its headers), it is Bitcoin Core's C library through package
// libsecp256k1: a signature costs about 2.5 times less CPU, a verification
// 3.5 times less. Both give the same bytes wherever BIP-340 is
// deterministic (public keys, tweaks, ECDH, verification, and signatures
// for the same auxiliary randomness); the package's tests run against
// whichever the build selects. Implementation names it.
//
// A key that verifies many signatures can be given a table of its
// multiples (PublicKey.Precomputed), which makes the btcec build's
// verification about twice as fast; Tables decides which keys earn one
// and bounds how many are kept.
//
// Every value of this package is safe for concurrent use.
package secp
