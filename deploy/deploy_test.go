package deploy_test

import (
	"bufio"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
)

// load reads the settings as `snapnode run` would with args and the
// environment env.
func load(t *testing.T, args []string, env map[string]string) config.Config {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	cfg := config.Default()
	config.Flags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := config.Load(&cfg, fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// unit returns the [Service] directives of snapnode.service: each key's
// values in order.
func unit(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("snapnode.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	service := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("snapnode.service: %q is not Key=Value", line)
			}
			service[k] = append(service[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return service
}

// The unit holds the hardening listed in testdata/systemd-required.txt.
func TestUnitHardening(t *testing.T) {
	service := unit(t)
	b, err := os.ReadFile(filepath.Join("testdata", "systemd-required.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		t.Run(k, func(t *testing.T) {
			if !slices.Contains(service[k], v) {
				t.Errorf("[Service] %s=%q missing; the unit has %q", k, v, service[k])
			}
		})
	}
}

// The unit's configuration file loads, and puts the data folder in the
// unit's state directory, the one folder it may write.
func TestUnitConfiguration(t *testing.T) {
	service := unit(t)
	args := strings.Fields(service["ExecStart"][0])[2:] // after "snapnode run"
	i := slices.Index(args, "--config")
	if i < 0 || i+1 >= len(args) || args[i+1] != "/etc/snapnode/snapnode.toml" {
		t.Fatalf("ExecStart %q: want --config /etc/snapnode/snapnode.toml", service["ExecStart"][0])
	}
	args[i+1] = "snapnode.toml" // the file installed there
	cfg := load(t, args, nil)
	if want := "/var/lib/" + service["StateDirectory"][0]; cfg.DataDir != want || !slices.Contains(service["ReadWritePaths"], want) {
		t.Errorf("data_dir %q; the unit's state directory is %s, ReadWritePaths %q", cfg.DataDir, want, service["ReadWritePaths"])
	}
	for _, addr := range []string{cfg.RelayListen, cfg.HTTPListen} {
		if host, _, _ := net.SplitHostPort(addr); !net.ParseIP(host).IsLoopback() {
			t.Errorf("listen address %q: want loopback (a reverse proxy serves it to others)", addr)
		}
	}
}

// systemd-analyze verify finds nothing to say about the unit, when it is
// installed.
func TestUnitVerifies(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	b, err := os.ReadFile("snapnode.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's program exists: any will do.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snapnode.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/snapnode", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "snapnode.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}

// instructions returns the Containerfile's instructions, continuation
// lines joined, each as [KEYWORD, rest].
func instructions(t *testing.T) [][2]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur += more + " "
			continue
		}
		cur += trimmed
		kw, rest, _ := strings.Cut(cur, " ")
		out = append(out, [2]string{strings.ToUpper(kw), strings.TrimSpace(rest)})
		cur = ""
	}
	return out
}

// The image's settings load, listen on every interface inside the
// container on the ports it exposes, keep the data on the volume, and the
// node runs as a user other than root, from a static binary.
func TestContainerfile(t *testing.T) {
	env := map[string]string{}
	var exposed, volumes []string
	var user, healthcheck, build string
	final := false
	for _, in := range instructions(t) {
		switch in[0] {
		case "FROM":
			final = !strings.Contains(in[1], " AS ")
		case "RUN":
			if strings.Contains(in[1], "go build") {
				build = in[1]
			}
		case "ENV":
			for _, kv := range strings.Fields(in[1]) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in[1])...)
		case "VOLUME":
			volumes = append(volumes, strings.Trim(in[1], `[]" `))
		case "USER":
			if final {
				user = in[1]
			}
		case "HEALTHCHECK":
			healthcheck = in[1]
		}
	}
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("the binary is not built static: %q", build)
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("USER %q: want a user other than root", user)
	}
	cfg := load(t, nil, env)
	if !slices.Contains(volumes, cfg.DataDir) {
		t.Errorf("data_dir %q is not a volume (%q)", cfg.DataDir, volumes)
	}
	for _, addr := range []string{cfg.RelayListen, cfg.HTTPListen} {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || host != "0.0.0.0" || !slices.Contains(exposed, port) {
			t.Errorf("listen address %q: want 0.0.0.0 and an exposed port (EXPOSE %q)", addr, exposed)
		}
	}
	// Through a published port every client comes from the container's
	// gateway: a rate or a share of the store per address would be one
	// for all peers.
	if cfg.RelayEventRate != 0 {
		t.Errorf("relay_event_rate %v in the image: want 0, its clients share the gateway's address", cfg.RelayEventRate)
	}
	if cfg.RelayStorePeerShare != 0 {
		t.Errorf("relay_store_peer_share %v in the image: want 0, its clients share the gateway's address", cfg.RelayStorePeerShare)
	}
	if _, port, _ := net.SplitHostPort(cfg.HTTPListen); !strings.Contains(healthcheck, "127.0.0.1:"+port) {
		t.Errorf("HEALTHCHECK %q does not ask the HTTP listener", healthcheck)
	}
}
