package client_test

import (
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

var (
	serverKey = mustKey("1111111111111111111111111111111111111111111111111111111111111111")
	clientKey = mustKey("2222222222222222222222222222222222222222222222222222222222222222")
	otherKey  = mustKey("3333333333333333333333333333333333333333333333333333333333333333")
)

func mustKey(h string) *identity.Key {
	k, err := identity.FromHex(h)
	if err != nil {
		panic(err)
	}
	return k
}

func addr(k *identity.Key) string { return k.Address(identity.Mainnet) }

// request returns a signed request from clientKey to serverKey.
func request(t testing.TB, method, payload string) *snap.Message {
	t.Helper()
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: addr(clientKey), To: addr(serverKey),
		Type: snap.TypeRequest, Method: method, Payload: []byte(payload), Timestamp: time.Now().Unix()}
	if err := m.Sign(clientKey); err != nil {
		t.Fatal(err)
	}
	return m
}

func raw(t testing.TB, m *snap.Message) []byte {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
