package jsondec

import (
	"bytes"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Decoder is a jsontext.Decoder lent by Get, valid until Put. As with
// jsontext.NewDecoder(bytes.NewBuffer(b)), the values it reads are
// slices of b itself, not of a buffer of the decoder's: they stay valid
// after Put for as long as b does.
type Decoder struct {
	jsontext.Decoder
	// in is the input: a bytes.Buffer, which jsontext reads in place
	// rather than copying into a buffer of its own.
	in bytes.Buffer
}

// decoders holds the decoders given back. What a decoder keeps is bounded
// by jsontext's Reset, which drops any stack or list of names past a
// fixed size (1,024 entries, 1 KiB of names) rather than keep it.
var decoders = sync.Pool{New: func() any { return new(Decoder) }}

// Get returns a decoder reading b with opts, as
// jsontext.NewDecoder(bytes.NewBuffer(b), opts...) would. Give it back
// with Put once done with it and everything it returned.
func Get(b []byte, opts ...jsontext.Options) *Decoder {
	d := decoders.Get().(*Decoder)
	d.in = *bytes.NewBuffer(b)
	d.Reset(&d.in, opts...)
	return d
}

// Put gives d back for another Get. It first lets go of d's input, so that
// a decoder waiting in the pool does not keep a message alive.
func Put(d *Decoder) {
	d.in = bytes.Buffer{}
	d.Reset(&d.in)
	decoders.Put(d)
}
