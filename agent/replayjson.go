package agent

import (
	"encoding/json"
	"fmt"
	"io"
)

// ReplayJSON replays (Replay) the history read from rd as JSON, as `job
// history` prints it, through r, one interaction at a time: it holds one
// interaction, not the file. It returns the job's id (r tells how many
// interactions it replayed); a *ReplayError is an inconsistency, any
// other error JSON that does not read as a history. As json.Unmarshal,
// it ignores members a History does not have.
func ReplayJSON(rd io.Reader, r *Replayer) (jobID string, err error) {
	var h History
	dec := json.NewDecoder(rd)
	if err := delim(dec, '{'); err != nil {
		return "", err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return h.JobID, err
		}
		key, _ := tok.(string)
		if key != "interactions" {
			// One member at a time into h, as json.Unmarshal would.
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return h.JobID, err
			}
			name, _ := json.Marshal(key)
			member := append(append(append(append([]byte{'{'}, name...), ':'), raw...), '}')
			if err := json.Unmarshal(member, &h); err != nil {
				return h.JobID, err
			}
			continue
		}
		if err := delim(dec, '['); err != nil {
			return h.JobID, err
		}
		for dec.More() {
			it := new(Interaction)
			if err := dec.Decode(it); err != nil {
				return h.JobID, fmt.Errorf("interaction %d: %w", r.n, err)
			}
			if err := r.Add(it); err != nil {
				return h.JobID, err
			}
		}
		if err := delim(dec, ']'); err != nil {
			return h.JobID, err
		}
	}
	if err := delim(dec, '}'); err != nil {
		return h.JobID, err
	}
	return h.JobID, r.End(&h)
}

// delim reads the next token of dec, which must be d.
func delim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("agent: history JSON: %v where %v was expected", tok, d)
	}
	return nil
}
