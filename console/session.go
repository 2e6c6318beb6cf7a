package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CookieName is the session cookie's name.
const CookieName = "snapnode_console"

// Errors of a login.
var (
	// ErrBadToken: the login token is unknown or expired.
	ErrBadToken = errors.New("console: the login link is unknown, used or expired")
	// ErrReused: the login token was spent already. The session its
	// first use started is ended: a link used twice has leaked, and which
	// of the two uses was the operator's is not known (a link bound to a
	// user and brought again by another user's connection is
	// ErrOtherUser instead, and ends nothing).
	ErrReused = errors.New("console: the login link was already used")
	// ErrOtherUser: the connection that brought the login token belongs
	// to another local user than the one the link was issued for, or its
	// user could not be told (Config.PeerUser). The link stays valid.
	ErrOtherUser = errors.New("console: the login link is not for this user")
)

// AnyUser, as LoginURL's user, issues a link any connection may spend:
// one through a reverse proxy, or from a client on another machine.
const AnyUser = -1

// session is one operator's login.
type session struct {
	id string // the cookie's value
	// seg names the session's prefix, the path of its pages and of its
	// cookie (home): a value of its own, not id, as it is in every URL
	// of the session (the history, a proxy's log).
	seg      string
	operator string // the identity decisions are recorded under
	csrf     string // the token every POST must carry
	created  time.Time
	expires  time.Time
}

// home is the path of the session's task list and the prefix of all its
// pages, Prefix/s/<seg>/, and its cookie's path: a browser sends a
// host's cookies to every port of it, so a cookie of path Prefix would
// go to a server of another user on another port of the node's host at
// its /console/… as well; this path only the session's pages name.
func (s *session) home() string { return Prefix + "/s/" + s.seg + "/" }

// grant is an unused login token.
type grant struct {
	operator string
	// user is the uid of the local user whose connection may spend the
	// token, or AnyUser.
	user    int
	issued  time.Time
	expires time.Time
}

// spent is a login token used once, kept until it would have expired,
// so that a second use is told from a mistyped link and ends the
// session of the first.
type spent struct {
	session string // the id of the session it started
	user    int    // the grant's
	used    time.Time
	expires time.Time
}

// auth holds the login tokens and the sessions, both bounded in number and
// lifetime, in memory: a restart of the node ends every session.
type auth struct {
	cfg      Config
	mu       sync.Mutex
	tokens   map[string]grant
	spent    map[string]spent
	sessions map[string]*session
}

func newAuth(cfg Config) *auth {
	return &auth{cfg: cfg, tokens: map[string]grant{}, spent: map[string]spent{}, sessions: map[string]*session{}}
}

// secret returns 32 random bytes, base64url.
func secret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// issue makes a login token for operator, to be spent by a connection of
// the local user user (a uid, or AnyUser), voiding the oldest unused one
// when MaxTokens are out.
func (a *auth) issue(operator string, user int) (string, time.Time, error) {
	tok, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	dropExpired(a.tokens, now, func(g grant) time.Time { return g.expires })
	makeRoom(a.tokens, a.cfg.MaxTokens, func(g grant) time.Time { return g.issued })
	g := grant{operator: operator, user: user, issued: now, expires: now.Add(a.cfg.TokenTTL)}
	a.tokens[tok] = g
	return tok, g.expires, nil
}

// peer is the local user of a login's connection, as Config.PeerUser
// told it: err when it could not.
type peer struct {
	uid int
	err error
}

// refuses returns ErrOtherUser, saying why, when a token for user (a
// uid, or AnyUser) may not be spent by a connection of p: p is known (not
// nil) and is not user's.
func (p *peer) refuses(user int) error {
	switch {
	case user == AnyUser || p == nil:
		return nil
	case p.err != nil:
		return fmt.Errorf("%w: the connection's user is not known: %w", ErrOtherUser, p.err)
	case p.uid != user:
		return fmt.Errorf("%w: it is for uid %d, the connection is uid %d's", ErrOtherUser, user, p.uid)
	}
	return nil
}

// redeem spends tok, brought by a connection of the local user p, and
// starts a session, ending the oldest when MaxSessions are open. A token
// bound to a user is spent only by a connection of that user
// (ErrOtherUser, the token kept) when the console can tell (p not nil);
// a token used before is refused (ErrReused) and the session its first
// use started is ended, returned as ended, unless the token is bound to
// a user and p is another's (ErrOtherUser: the first use was the user's).
func (a *auth) redeem(tok string, p *peer) (s *session, ended *spent, err error) {
	id, err := secret()
	if err != nil {
		return nil, nil, err
	}
	csrf, err := secret()
	if err != nil {
		return nil, nil, err
	}
	seg, err := secret()
	if err != nil {
		return nil, nil, err
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	dropExpired(a.spent, now, func(sp spent) time.Time { return sp.expires })
	g, ok := a.tokens[tok]
	if tok == "" || !ok {
		if sp, used := a.spent[tok]; tok != "" && used {
			// Its first use was its user's: another user's connection
			// bringing it again is the leak the binding is for, and
			// ends nothing.
			if err := p.refuses(sp.user); err != nil {
				return nil, nil, err
			}
			delete(a.sessions, sp.session)
			return nil, &sp, ErrReused
		}
		return nil, nil, ErrBadToken
	}
	if !now.Before(g.expires) {
		delete(a.tokens, tok)
		return nil, nil, ErrBadToken
	}
	if err := p.refuses(g.user); err != nil {
		return nil, nil, err
	}
	delete(a.tokens, tok) // one use
	dropExpired(a.sessions, now, func(s *session) time.Time { return s.expires })
	makeRoom(a.sessions, a.cfg.MaxSessions, func(s *session) time.Time { return s.created })
	s = &session{id: id, seg: seg, operator: g.operator, csrf: csrf, created: now, expires: now.Add(a.cfg.SessionTTL)}
	a.sessions[id] = s
	makeRoom(a.spent, a.cfg.MaxTokens, func(sp spent) time.Time { return sp.used })
	a.spent[tok] = spent{session: id, user: g.user, used: now, expires: g.expires}
	return s, nil, nil
}

// makeRoom deletes from m its oldest entries, by the time at gives each,
// until it holds fewer than max: room for one more. The maps it serves
// hold a few dozen entries at most (Config.MaxTokens, MaxSessions), so a
// scan for each is cheaper than keeping them ordered.
func makeRoom[K comparable, V any](m map[K]V, max int, at func(V) time.Time) {
	for len(m) >= max && len(m) > 0 {
		var oldest K
		first := true
		for k, v := range m {
			if first || at(v).Before(at(m[oldest])) {
				oldest, first = k, false
			}
		}
		delete(m, oldest)
	}
}

// dropExpired deletes from m the entries that have expired by now, by the
// expiry expires gives each: the sweep of the tokens, the spent tokens
// and the sessions alike.
func dropExpired[K comparable, V any](m map[K]V, now time.Time, expires func(V) time.Time) {
	maps.DeleteFunc(m, func(_ K, v V) bool { return !now.Before(expires(v)) })
}

// lookup returns the live session id names if its segment is seg, or
// nil.
func (a *auth) lookup(id, seg string) *session {
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok || subtle.ConstantTimeCompare([]byte(s.seg), []byte(seg)) != 1 {
		return nil
	}
	if !now.Before(s.expires) {
		delete(a.sessions, id)
		return nil
	}
	return s
}

// end ends the session id.
func (a *auth) end(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// secure reports whether r reached the node over TLS, directly or through
// a reverse proxy that says so: the cookie is then marked Secure.
// (Trusting the header can only make the cookie stricter.)
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// login is GET /console/login?token=…: it spends the token, sets the
// session cookie for the session's prefix alone and redirects to the
// session's task list there, so that the token is no longer in the
// address bar or the history.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		// A HEAD (a link checker, a chat app looking at a pasted link)
		// does not spend the link: only the GET of a browser logs in.
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return
	}
	var p *peer
	log := c.cfg.Logger.With("remote", r.RemoteAddr)
	if c.cfg.PeerUser != nil {
		uid, err := c.cfg.PeerUser(r)
		p = &peer{uid: uid, err: err}
		if err == nil {
			log = log.With("uid", uid)
		}
	}
	s, ended, err := c.auth.redeem(r.URL.Query().Get("token"), p)
	switch {
	case errors.Is(err, ErrOtherUser):
		log.Warn("console: login refused: the link was brought by another user than the one it was issued for; it may have leaked to them", "err", err)
		c.message(w, r, http.StatusForbidden, "Login refused",
			"This login link was issued for another user of this machine: open it in a browser of the user who asked for it (snapnode console-url --user names another).")
		return
	case errors.Is(err, ErrReused):
		log.Warn("console: login refused: the link was used before, so it has leaked; the session its first use started is ended", "first_use", ended.used)
		c.message(w, r, http.StatusUnauthorized, "Login refused",
			"This login link was already used. A link is used once: the session its first use started has been ended, in case that was not you. Ask the node for a new one: "+c.cfg.LoginCommand)
		return
	case err != nil:
		c.badLinkLog.Log(r.Context(), log, c.cfg.Now(), slog.LevelWarn, "console: login refused", "err", err)
		c.message(w, r, http.StatusUnauthorized, "Login refused",
			"This login link is unknown, was already used, or has expired. Ask the node for a new one: "+c.cfg.LoginCommand)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: s.id, Path: s.home(), HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode, Expires: s.expires, MaxAge: int(c.cfg.SessionTTL / time.Second),
	})
	log.Info("console: operator logged in", "operator", s.operator, "expires", s.expires)
	http.Redirect(w, r, s.home(), http.StatusSeeOther)
}

// logout is POST <home>logout.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s *session) {
	c.auth.end(s.id)
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: s.home(), HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	c.message(w, r, http.StatusOK, "Logged out", "The session is over. Run "+c.cfg.LoginCommand+" for a new login link.")
}

// loginNeeded answers a request without a live session.
func (c *Console) loginNeeded(w http.ResponseWriter, r *http.Request) {
	c.message(w, r, http.StatusUnauthorized, "Login needed",
		"This page needs an operator session, and there is none (or it has expired). On the node's machine, as the node's user, run: "+c.cfg.LoginCommand+" — and open the link it prints.")
}

// session wraps h, for the pages under a session's prefix: a request
// without the cookie of the live session that prefix names gets 401; a
// POST a browser sent from another origin (http.CrossOriginProtection),
// or without the session's CSRF token (form field "csrf"), gets 403.
func (c *Console) session(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var s *session
		// Each cookie of the name the browser sent is tried: one of a
		// wider path (another server of the host may set one) must not
		// hide the session's.
		for _, ck := range r.CookiesNamed(CookieName) {
			if s = c.auth.lookup(ck.Value, r.PathValue("seg")); s != nil {
				break
			}
		}
		if s == nil {
			c.loginNeeded(w, r)
			return
		}
		if r.Method == http.MethodPost {
			if err := c.cop.Check(r); err != nil {
				c.cfg.Logger.Warn("console: POST refused: sent from another origin", "page", strings.TrimPrefix(r.URL.Path, s.home()), "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"))
				c.message(w, r, http.StatusForbidden, "Refused",
					"Your browser says this form was sent from another site: the console takes decisions only from its own pages. Open the console's page and use its buttons.")
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			got := r.PostFormValue("csrf")
			if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				// The page, not the path: the session's segment stays
				// out of the log.
				c.cfg.Logger.Warn("console: POST refused: missing or wrong CSRF token", "page", strings.TrimPrefix(r.URL.Path, s.home()), "remote", r.RemoteAddr)
				c.message(w, r, http.StatusForbidden, "Refused",
					"The form did not carry this session's CSRF token: reload the page and try again.")
				return
			}
		}
		h(w, r, s)
	}
}

// maxForm bounds a posted form.
const maxForm = 16 << 10
