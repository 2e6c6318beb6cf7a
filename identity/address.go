package identity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"github.com/snapnode/snapnode/internal/secp"
)

// Network is the Bitcoin network an address is encoded for. It only chooses
// the human-readable prefix; keys are the same on both.
type Network uint8

const (
	Mainnet Network = iota // addresses start with bc1p
	Testnet                // addresses start with tb1p
)

// HRP returns the bech32 human-readable part of the network ("bc" or "tb").
func (n Network) HRP() string {
	if n == Testnet {
		return "tb"
	}
	return "bc"
}

func (n Network) String() string {
	if n == Testnet {
		return "testnet"
	}
	return "mainnet"
}

// AddressLength is the length of every valid P2TR address: 3 characters of
// prefix and separator, 1 witness version, 52 data and 6 checksum characters.
const AddressLength = 62

// Sentinel errors of ParseAddress, one per rule, in the order it checks
// them (CheckAddressSyntax checks the first five), then
// Address.PublicKey's. Each is the Rule of an *AddressError: test them
// with errors.Is; the error text adds detail.
var (
	// ErrCase is returned for an address with an uppercase letter, all
	// uppercase or mixed: SNAP takes lowercase addresses only.
	ErrCase = errors.New("address must be lowercase")
	// ErrPrefix is returned for an address that starts with neither bc1
	// (mainnet) nor tb1 (testnet).
	ErrPrefix = errors.New("address must start with bc1 or tb1")
	// ErrLength is returned for an address that is not AddressLength
	// characters long.
	ErrLength = errors.New("address must be 62 characters")
	// ErrCharacter is returned for a character after the prefix that is
	// not in the bech32 alphabet (which leaves out 1, b, i and o).
	ErrCharacter = errors.New("address has a character outside the bech32 alphabet")
	// ErrWitnessVersion is returned when the first character after the
	// prefix is not p: the address is not of witness version 1 (P2TR).
	ErrWitnessVersion = errors.New("address is not witness version 1 (P2TR)")
	// ErrChecksum is returned by ParseAddress for an address whose
	// bech32m checksum fails, or that carries a bech32 checksum where
	// witness version 1 requires bech32m.
	ErrChecksum = errors.New("address fails its bech32m checksum")
	// ErrPadding is returned by ParseAddress when the bits that pad the
	// 32-byte program are not zero.
	ErrPadding = errors.New("address has non-zero padding bits")
	// ErrNotOnCurve is returned by Address.PublicKey when the program is
	// not the x coordinate of a point on secp256k1, which no key could
	// have produced; ParseAddress does not check it.
	ErrNotOnCurve = errors.New("address program is not an x coordinate on secp256k1")
)

// AddressError reports why a string is not a P2TR address. Rule is one of the
// sentinel errors above; Unwrap returns it.
type AddressError struct {
	Address string
	Rule    error
	Detail  string
}

func (e *AddressError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("invalid P2TR address %q: %v (%s)", e.Address, e.Rule, e.Detail)
	}
	return fmt.Sprintf("invalid P2TR address %q: %v", e.Address, e.Rule)
}

func (e *AddressError) Unwrap() error { return e.Rule }

// Address is a decoded P2TR address: the network and the 32-byte x-only
// output key Q it commits to.
type Address struct {
	Network Network
	Key     [32]byte
}

// String returns the bech32m encoding of a.
func (a Address) String() string {
	return EncodeAddress(a.Network, a.Key)
}

// PublicKey lifts the address's program to a curve point (BIP-340 lift_x).
// It fails with ErrNotOnCurve when the 32 bytes are not the x coordinate of
// a point, which no key could have produced. The key verifies BIP-340
// signatures made by the address's tweaked secret.
func (a Address) PublicKey() (*secp.PublicKey, error) {
	pk, err := secp.ParsePublicKey(a.Key)
	if err != nil {
		return nil, &AddressError{Address: a.String(), Rule: ErrNotOnCurve}
	}
	return pk, nil
}

// EncodeAddress returns the P2TR address of the x-only output key q.
func EncodeAddress(n Network, q [32]byte) string {
	words, err := bech32.ConvertBits(q[:], 8, 5, true)
	if err != nil {
		panic("identity: 8-to-5 bit conversion cannot fail: " + err.Error())
	}
	data := make([]byte, 0, 1+len(words))
	data = append(data, 1) // witness version 1
	data = append(data, words...)
	s, err := bech32.EncodeM(n.HRP(), data)
	if err != nil {
		panic("identity: bech32m encoding of valid words cannot fail: " + err.Error())
	}
	return s
}

// ParseAddress decodes a P2TR address. The rules are checked in this order
// and the first broken one is reported: lowercase only, prefix bc1/tb1,
// exactly 62 characters, bech32 alphabet, witness version 1, bech32m
// checksum (a bech32 v0 checksum is rejected), zero padding bits. It does
// not check that the program is on the curve; Address.PublicKey does.
func ParseAddress(s string) (Address, error) {
	fail := func(rule error, detail string) (Address, error) {
		return Address{}, &AddressError{Address: s, Rule: rule, Detail: detail}
	}
	if err := CheckAddressSyntax(s); err != nil {
		return Address{}, err
	}
	n := Mainnet
	if s[0] == 't' {
		n = Testnet
	}
	_, data, version, err := bech32.DecodeGeneric(s)
	if err != nil {
		return fail(ErrChecksum, "")
	}
	if version != bech32.VersionM {
		return fail(ErrChecksum, "bech32 checksum where witness version 1 requires bech32m")
	}
	// CheckAddressSyntax fixed the length: 52 words after the version,
	// 260 bits, so 32 bytes and 4 padding bits that must be zero.
	prog, err := bech32.ConvertBits(data[1:], 5, 8, false)
	if err != nil {
		return fail(ErrPadding, "")
	}
	a := Address{Network: n}
	copy(a.Key[:], prog)
	return a, nil
}

// CheckAddressSyntax applies the rules of ParseAddress that need no
// decoding: lowercase only, prefix bc1 or tb1, 62 characters, bech32
// alphabet, witness version character p. It is what the spec's pattern
// ^(bc1p|tb1p)[a-z0-9]{58}$ checks; ParseAddress does the rest.
func CheckAddressSyntax(s string) error {
	fail := func(rule error, detail string) error {
		return &AddressError{Address: s, Rule: rule, Detail: detail}
	}
	hasUpper, hasLower := false, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'A' <= c && c <= 'Z':
			hasUpper = true
		case 'a' <= c && c <= 'z':
			hasLower = true
		}
	}
	switch {
	case hasUpper && hasLower:
		return fail(ErrCase, "mixed case")
	case hasUpper:
		return fail(ErrCase, "uppercase")
	}
	if !strings.HasPrefix(s, "bc1") && !strings.HasPrefix(s, "tb1") {
		return fail(ErrPrefix, "")
	}
	if len(s) != AddressLength {
		return fail(ErrLength, fmt.Sprintf("got %d", len(s)))
	}
	for i := 3; i < len(s); i++ {
		if !isBech32Char(s[i]) {
			return fail(ErrCharacter, fmt.Sprintf("%q at position %d", s[i], i))
		}
	}
	// The first data character is the witness version: p is 1.
	if s[3] != 'p' {
		return fail(ErrWitnessVersion, fmt.Sprintf("version %d", strings.IndexByte(bech32Alphabet, s[3])))
	}
	return nil
}

const bech32Alphabet = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

// isBech32Char reports whether c is in the lowercase bech32 alphabet
// "qpzry9x8gf2tvdw0s3jn54khce6mua7l".
func isBech32Char(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z':
		return c != 'b' && c != 'i' && c != 'o'
	case c >= '0' && c <= '9':
		return c != '1'
	}
	return false
}
