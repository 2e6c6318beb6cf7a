// Package wshandshake bounds what a WebSocket client reads while its
// opening handshake lasts. gorilla/websocket reads the server's answer to
// the upgrade with net/http's ReadResponse, which does not bound its
// headers: a hostile server (an agent asked over ws://, a relay) could
// send headers without end, all of them held until the dial's time-out.
//
//	d, hs := wshandshake.Bounded(&websocket.Dialer{HandshakeTimeout: 10 * time.Second})
//	conn, resp, err := d.DialContext(ctx, url, nil)
//	hs.Done() // the connection reads without a bound from here
//	if errors.Is(err, wshandshake.ErrTooLarge) { … }
package wshandshake
