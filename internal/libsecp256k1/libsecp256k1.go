//go:build libsecp256k1 && cgo

package libsecp256k1

/*
#cgo pkg-config: libsecp256k1
#include <string.h>
#include <secp256k1.h>
#include <secp256k1_ecdh.h>
#include <secp256k1_extrakeys.h>
#include <secp256k1_schnorrsig.h>

// ecdh_x copies the x coordinate of the shared point: what NIP-44 takes as
// its shared secret (the library's default hashes the compressed point).
static int ecdh_x(unsigned char *output, const unsigned char *x32, const unsigned char *y32, void *data) {
	(void)y32;
	(void)data;
	memcpy(output, x32, 32);
	return 1;
}

static int snap_ecdh_x(const secp256k1_context *ctx, unsigned char *out32, const secp256k1_pubkey *pub, const unsigned char *seckey32) {
	return secp256k1_ecdh(ctx, out32, pub, seckey32, ecdh_x, NULL);
}
*/
import "C"

import (
	"errors"
	"unsafe"
)

// Errors the library reports. Test them with errors.Is.
var (
	// ErrSecretKey: a secret key is zero or not below the curve order.
	ErrSecretKey = errors.New("libsecp256k1: secret key is not in 1…n−1")
	// ErrPublicKey: 32 bytes are not the x coordinate of a curve point.
	ErrPublicKey = errors.New("libsecp256k1: not the x coordinate of a point on secp256k1")
	// ErrTweak: a tweak is not below the curve order, or the tweaked key
	// is the point at infinity (or zero).
	ErrTweak = errors.New("libsecp256k1: invalid tweak")
	// ErrSign: the library refused to sign (it never does for a valid
	// key pair).
	ErrSign = errors.New("libsecp256k1: signing failed")
)

// Context is a libsecp256k1 context. It is created once and only read
// afterwards, which the library allows from any number of goroutines at
// once: a Context is safe for concurrent use. It is never freed; a
// process needs one.
type Context struct {
	ctx *C.secp256k1_context
}

// NewContext creates a context and randomizes it with seed (32 bytes from
// a cryptographic random source), which blinds the library's secret-key
// operations against side channels.
func NewContext(seed [32]byte) (*Context, error) {
	ctx := C.secp256k1_context_create(C.SECP256K1_CONTEXT_NONE)
	if ctx == nil {
		return nil, errors.New("libsecp256k1: context_create failed")
	}
	if C.secp256k1_context_randomize(ctx, u8(&seed[0])) != 1 {
		C.secp256k1_context_destroy(ctx)
		return nil, errors.New("libsecp256k1: context_randomize failed")
	}
	return &Context{ctx: ctx}, nil
}

// Keypair is a secret key with its public key, as the library keeps them
// for signing (its layout is the library's).
type Keypair struct {
	kp C.secp256k1_keypair
}

// XOnlyPublicKey is a parsed x-only public key: the point with even y
// whose x coordinate was given.
type XOnlyPublicKey struct {
	pk C.secp256k1_xonly_pubkey
}

func u8(p *byte) *C.uchar { return (*C.uchar)(unsafe.Pointer(p)) }

// Keypair computes the key pair of the 32-byte big-endian secret.
func (c *Context) Keypair(secret [32]byte) (*Keypair, error) {
	kp := new(Keypair)
	if C.secp256k1_keypair_create(c.ctx, &kp.kp, u8(&secret[0])) != 1 {
		return nil, ErrSecretKey
	}
	return kp, nil
}

// XOnly returns the x-only public key of kp.
func (c *Context) XOnly(kp *Keypair) [32]byte {
	var pk C.secp256k1_xonly_pubkey
	var out [32]byte
	// Neither call can fail on a key pair the library made.
	C.secp256k1_keypair_xonly_pub(c.ctx, &pk, nil, &kp.kp)
	C.secp256k1_xonly_pubkey_serialize(c.ctx, u8(&out[0]), &pk)
	return out
}

// Secret returns the secret key of kp.
func (c *Context) Secret(kp *Keypair) [32]byte {
	var out [32]byte
	C.secp256k1_keypair_sec(c.ctx, u8(&out[0]), &kp.kp)
	return out
}

// TweakKeypair returns the key pair whose secret is d+t, where d is kp's
// secret negated if its public key has an odd y: the BIP-341 tweak of a
// secret key by t.
func (c *Context) TweakKeypair(kp *Keypair, t [32]byte) (*Keypair, error) {
	out := &Keypair{kp: kp.kp}
	if C.secp256k1_keypair_xonly_tweak_add(c.ctx, &out.kp, u8(&t[0])) != 1 {
		return nil, ErrTweak
	}
	return out, nil
}

// ParseXOnly lifts x to the point with even y (BIP-340 lift_x).
func (c *Context) ParseXOnly(x [32]byte) (*XOnlyPublicKey, error) {
	pk := new(XOnlyPublicKey)
	if C.secp256k1_xonly_pubkey_parse(c.ctx, &pk.pk, u8(&x[0])) != 1 {
		return nil, ErrPublicKey
	}
	return pk, nil
}

// TweakXOnly returns the x coordinate of P + t·G, P being pk: the BIP-341
// output key when t is P's TapTweak hash.
func (c *Context) TweakXOnly(pk *XOnlyPublicKey, t [32]byte) ([32]byte, error) {
	var full C.secp256k1_pubkey
	var q C.secp256k1_xonly_pubkey
	var out [32]byte
	if C.secp256k1_xonly_pubkey_tweak_add(c.ctx, &full, &pk.pk, u8(&t[0])) != 1 {
		return out, ErrTweak
	}
	if C.secp256k1_xonly_pubkey_from_pubkey(c.ctx, &q, nil, &full) != 1 {
		return out, ErrTweak
	}
	C.secp256k1_xonly_pubkey_serialize(c.ctx, u8(&out[0]), &q)
	return out, nil
}

// Sign makes the BIP-340 signature of the 32-byte msg with kp and the
// 32 bytes of auxiliary randomness aux.
func (c *Context) Sign(kp *Keypair, msg, aux [32]byte) ([64]byte, error) {
	var sig [64]byte
	if C.secp256k1_schnorrsig_sign32(c.ctx, u8(&sig[0]), u8(&msg[0]), &kp.kp, u8(&aux[0])) != 1 {
		return sig, ErrSign
	}
	return sig, nil
}

// Verify reports whether sig is a valid BIP-340 signature of the 32-byte
// msg by pk.
func (c *Context) Verify(pk *XOnlyPublicKey, msg [32]byte, sig [64]byte) bool {
	return C.secp256k1_schnorrsig_verify(c.ctx, u8(&sig[0]), u8(&msg[0]), 32, &pk.pk) == 1
}

// ECDHX returns the x coordinate of d·P, where d is secret and P the point
// with even y and x coordinate peer.
func (c *Context) ECDHX(secret, peer [32]byte) ([32]byte, error) {
	var out [32]byte
	var compressed [33]byte
	compressed[0] = 0x02
	copy(compressed[1:], peer[:])
	var pub C.secp256k1_pubkey
	if C.secp256k1_ec_pubkey_parse(c.ctx, &pub, u8(&compressed[0]), C.size_t(len(compressed))) != 1 {
		return out, ErrPublicKey
	}
	if C.snap_ecdh_x(c.ctx, u8(&out[0]), &pub, u8(&secret[0])) != 1 {
		return out, ErrSecretKey
	}
	return out, nil
}
