package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrEventTooLarge is returned when one server-sent event carries more data
// than the reader allows.
var ErrEventTooLarge = errors.New("client: server-sent event too large")

// sseReader reads a text/event-stream body as the WHATWG event-stream
// format says, keeping only what SNAP uses: the data of each event. A data
// field's value loses one leading space; several data lines join with LF;
// a blank line ends the event; comments (":…") and other fields (event,
// id, retry) are ignored, as is an event without data. Lines end with LF
// or CRLF. An event cut short by the end of the body is dropped.
type sseReader struct {
	r   *bufio.Reader
	max int
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10), max: max}
}

// next returns the data of the next event, or io.EOF at the end of the
// body.
func (s *sseReader) next() ([]byte, error) {
	var (
		data    []byte
		hasData bool
	)
	for {
		line, err := s.line()
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			if hasData {
				return data, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte{':'})
		if string(field) != "data" {
			continue
		}
		value = bytes.TrimPrefix(value, []byte{' '})
		if hasData {
			data = append(data, '\n')
		}
		if len(data)+len(value) > s.max {
			return nil, fmt.Errorf("%w: over %d bytes", ErrEventTooLarge, s.max)
		}
		data = append(data, value...)
		hasData = true
	}
}

// line reads one line without its LF or CRLF. A line longer than the
// event limit is an error; a last line without LF is dropped (io.EOF).
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		switch {
		case err == nil:
			if long != nil {
				chunk = append(long, chunk...)
			}
			chunk = chunk[:len(chunk)-1]
			return bytes.TrimSuffix(chunk, []byte{'\r'}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(long)+len(chunk) > s.max+len("data: \r") {
				return nil, fmt.Errorf("%w: a line over %d bytes", ErrEventTooLarge, s.max)
			}
			long = append(long, chunk...)
		case errors.Is(err, io.EOF):
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}
