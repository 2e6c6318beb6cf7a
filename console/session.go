package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// CookieName is the session cookie's name.
const CookieName = "snapnode_console"

// Errors of a login.
var (
	// ErrBadToken: the login token is unknown, spent or expired.
	ErrBadToken = errors.New("console: the login link is unknown, used or expired")
)

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
	issued   time.Time
	expires  time.Time
}

// auth holds the login tokens and the sessions, both bounded in number and
// lifetime, in memory: a restart of the node ends every session.
type auth struct {
	cfg      Config
	mu       sync.Mutex
	tokens   map[string]grant
	sessions map[string]*session
}

func newAuth(cfg Config) *auth {
	return &auth{cfg: cfg, tokens: map[string]grant{}, sessions: map[string]*session{}}
}

// secret returns 32 random bytes, base64url.
func secret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// issue makes a login token for operator, voiding the oldest unused one
// when MaxTokens are out.
func (a *auth) issue(operator string) (string, time.Time, error) {
	tok, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, g := range a.tokens {
		if !now.Before(g.expires) {
			delete(a.tokens, k)
		}
	}
	for len(a.tokens) >= a.cfg.MaxTokens {
		oldest := ""
		for k, g := range a.tokens {
			if oldest == "" || g.issued.Before(a.tokens[oldest].issued) {
				oldest = k
			}
		}
		delete(a.tokens, oldest)
	}
	g := grant{operator: operator, issued: now, expires: now.Add(a.cfg.TokenTTL)}
	a.tokens[tok] = g
	return tok, g.expires, nil
}

// redeem spends tok and starts a session, ending the oldest when
// MaxSessions are open.
func (a *auth) redeem(tok string) (*session, error) {
	id, err := secret()
	if err != nil {
		return nil, err
	}
	csrf, err := secret()
	if err != nil {
		return nil, err
	}
	seg, err := secret()
	if err != nil {
		return nil, err
	}
	now := a.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	g, ok := a.tokens[tok]
	if tok == "" || !ok {
		return nil, ErrBadToken
	}
	delete(a.tokens, tok) // one use, even an expired one
	if !now.Before(g.expires) {
		return nil, ErrBadToken
	}
	a.prune(now)
	for len(a.sessions) >= a.cfg.MaxSessions {
		var oldest *session
		for _, s := range a.sessions {
			if oldest == nil || s.created.Before(oldest.created) {
				oldest = s
			}
		}
		delete(a.sessions, oldest.id)
	}
	s := &session{id: id, seg: seg, operator: g.operator, csrf: csrf, created: now, expires: now.Add(a.cfg.SessionTTL)}
	a.sessions[id] = s
	return s, nil
}

// prune drops the expired sessions. a.mu is held.
func (a *auth) prune(now time.Time) {
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
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
	s, err := c.auth.redeem(r.URL.Query().Get("token"))
	if err != nil {
		c.cfg.Logger.Warn("console: login refused", "remote", r.RemoteAddr, "err", err)
		c.message(w, r, http.StatusUnauthorized, "Login refused",
			"This login link is unknown, was already used, or has expired. Ask the node for a new one: "+c.cfg.LoginCommand)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: s.id, Path: s.home(), HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode, Expires: s.expires, MaxAge: int(c.cfg.SessionTTL / time.Second),
	})
	c.cfg.Logger.Info("console: operator logged in", "operator", s.operator, "remote", r.RemoteAddr, "expires", s.expires)
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
