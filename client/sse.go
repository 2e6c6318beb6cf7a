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
// id, retry) are ignored, as is an event without data. Lines end with LF,
// CRLF or CR. One byte order mark at the start of the body is ignored. An
// event cut short by the end of the body is dropped.
type sseReader struct {
	r       *bufio.Reader
	max     int
	afterCR bool // the last line ended with a CR
	started bool // the start of the body, and a byte order mark there, was read
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 16<<10), max: max}
}

// bom is UTF-8's byte order mark, U+FEFF.
const bom = "\xef\xbb\xbf"

// next returns the data of the next event, or io.EOF at the end of the
// body.
func (s *sseReader) next() ([]byte, error) {
	if !s.started {
		s.started = true
		if b, _ := s.r.Peek(len(bom)); string(b) == bom {
			s.r.Discard(len(bom))
		}
	}
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

// line reads one line without its end: LF, CRLF or a CR alone, as the
// event-stream format has it. A LF right after a CR ends nothing more (the
// CR ended the line), which is told when the next line is read, so that a
// line ended by CR is returned without waiting for the byte after it. A
// line longer than the event limit is an error; a last line without its
// end is dropped (io.EOF).
func (s *sseReader) line() ([]byte, error) {
	var long []byte
	for {
		if _, err := s.r.Peek(1); err != nil {
			return nil, err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if s.afterCR {
			s.afterCR = false
			if buf[0] == '\n' {
				s.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			i = len(buf)
		}
		if len(long)+i > s.max+len("data: ") {
			return nil, fmt.Errorf("%w: a line over %d bytes", ErrEventTooLarge, s.max)
		}
		if i == len(buf) {
			long = append(long, buf...)
			s.r.Discard(len(buf))
			continue
		}
		// buf stays valid until the next read: the line is kept only
		// when it spans reads.
		line := buf[:i:i]
		if long != nil {
			line = append(long, line...)
		}
		s.afterCR = buf[i] == '\r'
		s.r.Discard(i + 1)
		return line, nil
	}
}
