package identity_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snapnode/snapnode/identity"
)

func ExampleKey_Address() {
	k, _ := identity.FromHex(strings.Repeat("0a", 32))
	fmt.Println(k.Address(identity.Mainnet))
	fmt.Println(k.NostrPublicKey())
	// Output:
	// bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397
	// f76a39d05686e34a4420897e359371836145dd3973e3982568b60f8433adde6e
}

func ExampleParseAddress() {
	_, err := identity.ParseAddress("bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse39q")
	fmt.Println(errors.Is(err, identity.ErrChecksum))
	// Output: true
}
