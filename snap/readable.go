package snap

import (
	"encoding/base64"
	"fmt"
	"mime"
	"slices"
	"strings"
	"unicode/utf8"
)

// ContentType is the media type a part's content is read as: its
// mediaType without parameters, in lower case; for a part with none,
// text/plain for a text part and application/json for a data part, and
// "" for a url part (the URL is read, not what it points at).
func (p *Part) ContentType() string {
	if p.MediaType != "" {
		mt, _, err := mime.ParseMediaType(p.MediaType)
		if err != nil {
			// Not a media type (Validate refuses it): read as it is.
			return strings.ToLower(p.MediaType)
		}
		return mt // lower case
	}
	switch {
	case p.Text != nil:
		return "text/plain"
	case p.Data != nil:
		return "application/json"
	}
	return ""
}

// RawText returns the content of a raw part decoded from base64, and
// whether it is text: it decodes and is valid UTF-8. Padding is optional,
// as Validate allows.
func (p *Part) RawText() (string, bool) {
	if p.Raw == nil {
		return "", false
	}
	enc := base64.StdEncoding
	if len(*p.Raw)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	b, err := enc.Strict().DecodeString(*p.Raw)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	return string(b), true
}

// CheckReadable refuses the first of parts (named path[i]) whose content a
// reader of the media types in supported cannot read, which
// CheckParts has accepted:
//
//   - one whose ContentType is not in supported (compared without letter
//     case; a JSON-based type, application/…+json, counts as
//     application/json) is refused with 1005 ContentTypeNotSupported, data
//     {"provided": its mediaType, "supported": supported, "field":
//     path[i].mediaType}; a url part with no mediaType is read as its URL
//     and passes;
//   - one whose mediaType names a charset other than UTF-8 likewise;
//   - a raw part of a supported type that is not UTF-8 once decoded from
//     base64 is refused with 1004, field path[i].raw, constraint
//     "format", expected "UTF-8": every type supported is read as text.
func CheckReadable(path string, parts []Part, supported []string) *Error {
	for i := range parts {
		p := &parts[i]
		ct := p.ContentType()
		if ct == "" {
			continue
		}
		ok := false
		for _, s := range supported {
			ok = ok || strings.EqualFold(s, ct) ||
				strings.EqualFold(s, "application/json") && jsonBased(ct)
		}
		if ok && p.MediaType != "" {
			_, params, _ := mime.ParseMediaType(p.MediaType)
			if cs, has := params["charset"]; has && !isUTF8(cs) {
				ok = false
			}
		}
		field := func() string { return fmt.Sprintf("%s[%d]", path, i) }
		if !ok {
			provided := p.MediaType
			if provided == "" {
				provided = ct
			}
			provided = clip(provided)
			return NewError(CodeContentTypeNotSupported,
				fmt.Sprintf("content type %s not supported (%s.mediaType)", provided, field()),
				map[string]any{"provided": provided, "supported": slices.Clone(supported), "field": field() + ".mediaType"})
		}
		if p.Raw != nil {
			if _, text := p.RawText(); !text {
				return FieldError(field()+".raw", "format", "UTF-8", "base64 of bytes that are not UTF-8")
			}
		}
	}
	return nil
}

// jsonBased reports whether ct, a lower-case media type, names a format
// built on JSON by its structured syntax suffix (RFC 6839: application/
// ld+json, application/vnd.api+json), which a reader of JSON reads.
func jsonBased(ct string) bool {
	return strings.HasPrefix(ct, "application/") && strings.HasSuffix(ct, "+json")
}

// isUTF8 reports whether a charset parameter names UTF-8.
func isUTF8(charset string) bool {
	return strings.EqualFold(charset, "utf-8") || strings.EqualFold(charset, "utf8")
}
