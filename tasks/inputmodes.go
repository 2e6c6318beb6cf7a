package tasks

// InputModes returns the media types a node reads in a message's parts,
// the card's defaultInputModes: text of these types reaches the agent's
// model as text, whether a text part, a raw part (base64 of UTF-8) or a
// data part (JSON). A part of another type is refused with 1005 (see
// snap.CheckReadable and ServiceOptions.InputModes).
func InputModes() []string {
	return []string{"text/plain", "text/markdown", "text/csv", "text/x-diff", "application/json"}
}
