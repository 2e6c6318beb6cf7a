package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/shellword"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
)

// Prefix is the path under which the console is served. A session's
// pages are under its own prefix, Prefix + "/s/<segment>/", the only
// path its cookie is sent to (see session.home).
const Prefix = "/console"

// Defaults of Config's bounds.
const (
	DefaultSessionTTL  = 12 * time.Hour
	DefaultMaxSessions = 16
	DefaultTokenTTL    = 5 * time.Minute
	DefaultMaxTokens   = 8
	// MaxTasks bounds the task list, MaxAuditEntries the audit page,
	// MaxSteps the agent's steps and MaxMessages the messages a task page
	// shows (the newest), MaxHeld its held actions (the oldest, which are
	// decided first), MaxPartText the text of one message's or
	// artifact's parts together and the descriptor of a held action,
	// MaxDiffText the diff of a held action (the rest is counted;
	// `snapnode held --diff` prints it whole) and MaxStepText each text
	// of the agent's steps, its diff included (`snapnode job history`
	// prints them whole): up to MaxSteps steps of five texts each. A
	// text whose invisible characters (⟨U+0001⟩) or look-alike letters
	// (⟨U+0430 Cyrillic⟩) are spelled out is bounded as shown, the
	// markers counted; the node's words (a task's status message, an
	// audit entry's reason) are shown up to MaxStepText bytes so spelled
	// out, and the paths a held action changes up to MaxPartText bytes
	// in all.
	MaxTasks        = 500
	MaxAuditEntries = 200
	MaxSteps        = 200
	MaxMessages     = 100
	MaxHeld         = 20
	MaxPartText     = 16 << 10
	MaxDiffText     = 64 << 10
	MaxStepText     = 4 << 10
)

// Source is what the console shows: each method reads the node's state as
// it is at the call.
type Source interface {
	// Tasks returns the tasks f selects, oldest first.
	Tasks(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error)
	// Task returns one task; an error wrapping tasks.ErrNotFound when
	// there is none.
	Task(ctx context.Context, id string) (*tasks.Task, error)
	// HeldPage returns the page of held actions q selects, oldest first,
	// with how many the task holds in all (proposals.Proposals.HeldPage).
	HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error)
	// HeldAction returns the action actionID that taskID holds, as it
	// is now; nil when taskID holds no such action.
	HeldAction(ctx context.Context, taskID, actionID string) (*executor.Pending, error)
	// Job returns the agent's job on taskID and its newest limit
	// interactions, step by step, reading no others (agent.Store.Recent:
	// their requests' messages may be left out); a nil job when the
	// agent has none (or the node runs no agent). Sequences count the
	// steps from 0: the first's is how many came before.
	Job(ctx context.Context, taskID string, limit int) (*agent.Job, []agent.Interaction, error)
	// Proposer returns the step of the agent's job on taskID that
	// proposed actionID (agent.Store.Proposer), among those Job did not
	// return; nil when there is none.
	Proposer(ctx context.Context, taskID, actionID string) (*agent.Interaction, error)
	// Audit returns the audit entries f selects, in seq order
	// (audit.Log.Query: with f.Newest, the last f.Limit of them).
	Audit(ctx context.Context, f audit.Filter) ([]audit.Entry, error)
	// AuditCount returns how many audit entries f selects, f.Limit and
	// f.Newest aside (audit.Log.Count).
	AuditCount(ctx context.Context, f audit.Filter) (int64, error)
	// VerifyAudit checks the audit log's hash chain (an error wrapping
	// audit.ErrTampered names the first bad entry), against the node's
	// record of its last seal too (audit.Log.VerifyWithRecord, as
	// `snapnode audit verify`: the Report's SealRecord; a record that
	// cannot be read is an *audit.RecordError, audit.ErrSealRecord, the
	// chain verified without it).
	VerifyAudit(ctx context.Context) (audit.Report, error)
}

// Decider carries out an operator's decision on the action d.TaskID
// holds (d.ActionID), for d.Approver, the identity the decision is
// recorded under (*proposals.Proposals: the node's one decision path,
// the one the admin socket and signed operator messages take). It
// returns the task as the decision left it, or an error the operator
// reads (the task has ended, the action is no longer held…).
type Decider interface {
	Decide(ctx context.Context, d proposals.Decision) (*tasks.Task, error)
}

// Config configures a Console. Source and Decider are required.
type Config struct {
	Source  Source
	Decider Decider
	// Metrics, when set, feeds the metrics page.
	Metrics prometheus.Gatherer
	// AllowRemote serves clients on other machines; by default they get
	// 403, and only clients on this machine are served: on loopback, or
	// connecting from the listener's own address to it (a reverse proxy
	// on the same machine is one of these).
	AllowRemote bool
	// SessionTTL is a session's lifetime from login; MaxSessions bounds
	// the sessions at once (a login beyond it ends the oldest).
	SessionTTL  time.Duration
	MaxSessions int
	// TokenTTL is how long a login URL stays valid; MaxTokens bounds the
	// unused ones (issuing beyond it voids the oldest).
	TokenTTL  time.Duration
	MaxTokens int
	// PeerUser, when set, returns the local user (uid) whose program
	// opened r's connection, or an error when it cannot tell (a client on
	// another machine): a login link issued for a user (LoginURL) is then
	// spent only by a connection of that user. Nil: any connection that
	// brings a link spends it.
	PeerUser func(r *http.Request) (uid int, err error)
	// NodeFlags are the flags that name this node to the snapnode
	// commands its pages tell an operator to run (`snapnode held`,
	// `snapnode job history`, `snapnode audit export`, `snapnode
	// console-url`), as shell words: "--data-dir '/srv/my node'". Each
	// hint is the command as this node is named, NodeFlags after the
	// command's name; "" names a node run with the default settings,
	// found by the bare command in the folder it runs in.
	NodeFlags string
	// LoginCommand is the command that prints a login link to this
	// console, as its pages tell it; "": snapnode console-url with
	// NodeFlags.
	LoginCommand string
	// Now is the clock of sessions and tokens; nil: time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultLoginCommand prints a login link to the console of a node run
// with its default settings, in the folder the command runs in.
const DefaultLoginCommand = "snapnode console-url"

// command is the snapnode command name (`held`, `job history`) as the
// node of flags (Config.NodeFlags) is named: flags after the command's
// name, then args, each one shell word. What a page tells an operator to
// run is this, so that it finds this node as printed, wherever it runs.
func command(flags, name string, args ...string) string {
	words := []string{"snapnode", name}
	if flags != "" {
		words = append(words, flags)
	}
	for _, a := range args {
		words = append(words, shellword.Quote(a))
	}
	return strings.Join(words, " ")
}

// Console serves the operator's pages. It is an http.Handler for the paths
// under Prefix.
type Console struct {
	cfg   Config
	auth  *auth
	pages map[string]*template.Template
	mux   *http.ServeMux
	// cop refuses a POST a browser sent from another origin (its
	// Sec-Fetch-Site, else its Origin against the Host), before the CSRF
	// token is looked at: a second lock that does not rest on the token.
	cop *http.CrossOriginProtection
	// remoteLog and badLinkLog bound the lines of clients refused for
	// being on another machine and of login links unknown: anyone who
	// reaches the port may send as many as they like.
	remoteLog, badLinkLog logcap.Limiter
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns a Console for cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Source == nil || cfg.Decider == nil {
		return nil, errors.New("console: Config.Source and Config.Decider are required")
	}
	defaults.Positive(&cfg.SessionTTL, DefaultSessionTTL)
	defaults.Positive(&cfg.MaxSessions, DefaultMaxSessions)
	defaults.Positive(&cfg.TokenTTL, DefaultTokenTTL)
	defaults.Positive(&cfg.MaxTokens, DefaultMaxTokens)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LoginCommand == "" {
		cfg.LoginCommand = command(cfg.NodeFlags, "console-url")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{cfg: cfg, auth: newAuth(cfg), pages: map[string]*template.Template{}, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection()}
	for _, name := range []string{"tasks", "task", "audit", "metrics", "message"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		c.pages[name] = t
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	c.mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET "+Prefix+"/login", c.login)
	// A session's pages are under its prefix, where alone its cookie
	// goes: Prefix/s/{seg}/, seg its own (session.home).
	sp := Prefix + "/s/{seg}/"
	c.mux.HandleFunc("POST "+sp+"logout", c.session(c.logout))
	c.mux.HandleFunc("GET "+sp+"{$}", c.session(c.taskList))
	c.mux.HandleFunc("GET "+sp+"tasks/{id}", c.session(c.task))
	c.mux.HandleFunc("POST "+sp+"tasks/{id}/decide", c.session(c.decide))
	c.mux.HandleFunc("GET "+sp+"tasks/{id}/held/{action}/diff", c.session(c.diffFile))
	c.mux.HandleFunc("GET "+sp+"audit", c.session(c.auditPage))
	c.mux.HandleFunc("GET "+sp+"metrics", c.session(c.metricsPage))
	c.mux.HandleFunc(sp, c.session(func(w http.ResponseWriter, r *http.Request, s *session) {
		c.message(w, r, http.StatusNotFound, "Not found", "There is no console page at "+r.URL.Path+".")
	}))
	// Outside a session's prefix (the pages' paths before sessions had
	// one, a bookmark of them) nobody is logged in.
	c.mux.HandleFunc(Prefix+"/", c.loginNeeded)
	return c, nil
}

// ServeHTTP implements http.Handler: it refuses clients on other
// machines unless AllowRemote, sets the headers every page carries, and serves the
// page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !c.cfg.AllowRemote && !loopback(r.RemoteAddr) && !sameHost(r) {
		c.remoteLog.Log(r.Context(), c.cfg.Logger, c.cfg.Now(), slog.LevelWarn, "console: refused a client on another machine (console_remote is off)", "remote", r.RemoteAddr)
		http.Error(w, "the operator console serves clients on the node's machine only (see console_remote)", http.StatusForbidden)
		return
	}
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// loopback reports whether the remote address addr is on loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameHost reports whether r came from this machine to an address of it
// that is not loopback: its client's address is the one it connected to.
// A node listening on one of the machine's addresses (http_listen
// 192.168.1.5:7448) is reached there by a browser on the same machine,
// whose connection starts from that address. No other machine can open a
// TCP connection from one of this machine's addresses: the handshake's
// answer would come back here.
func sameHost(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	remote, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	self, err := netip.ParseAddrPort(local.String())
	return err == nil && self.Addr().Unmap() == remote.Unmap()
}

// LoginURL issues a one-time login token for operator and returns the URL
// that spends it: base (the node's HTTP URL, such as
// http://127.0.0.1:7448) + Prefix + "/login?token=…". The token is valid
// for TokenTTL and for one login, by a connection of the local user user
// (a uid) where Config.PeerUser tells the user of a connection, by any
// with AnyUser. A second use is refused and ends the session of the
// first.
func (c *Console) LoginURL(base, operator string, user int) (string, time.Time, error) {
	if operator == "" {
		return "", time.Time{}, errors.New("console: a login needs an operator identity")
	}
	if user < AnyUser {
		return "", time.Time{}, fmt.Errorf("console: a login's user is a uid or AnyUser, not %d", user)
	}
	tok, exp, err := c.auth.issue(operator, user)
	if err != nil {
		return "", time.Time{}, err
	}
	return strings.TrimSuffix(base, "/") + Prefix + "/login?token=" + url.QueryEscape(tok), exp, nil
}
