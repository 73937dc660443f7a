// Command cdsserver runs the real upstream STUNner CDS server
// (github.com/l7mp/stunner/pkg/config/server, as the Go operator runs it) on
// 127.0.0.1 and publishes configs read from stdin, so benchmarks can drive it
// with the same protocol as our Rust server (server/benches/cds_fanout.rs):
//
//   - on start it prints one line `listening 127.0.0.1:PORT` to stdout;
//   - for every stdin line holding a JSON array of StunnerConfig objects it
//     upserts each config (id = admin.name, "namespace/name") with the upstream
//     per-config upsert and then prints `ok`;
//   - it exits when stdin is closed (0) or on a bad line (1, message on stderr).
//
// Nothing else is ever written to stdout; logs go to stderr.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"syscall"

	"github.com/go-logr/logr"
	stnrv1 "github.com/l7mp/stunner/pkg/apis/v1"
	cdsserver "github.com/l7mp/stunner/pkg/config/server"
)

// Longest accepted stdin line (10,000 configs in one line are tens of MB).
const maxLine = 1 << 30

func main() {
	os.Exit(run())
}

func run() int {
	verbosity := flag.Int("v", -1, "log verbosity (stderr): -1 = errors only, 0 = INFO (the operator's default), n > 0 = also upstream V(1..n) debug messages")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, `Usage: cdsserver [-v N]

Runs the upstream STUNner CDS server on 127.0.0.1 (OS-chosen port), prints
"listening 127.0.0.1:PORT", then for each stdin line holding a JSON array of
StunnerConfig objects upserts each one (id = admin.name) and prints "ok".
Exits when stdin is closed. Logs go to stderr.

Options:
`)
		flag.PrintDefaults()
	}
	flag.Parse()

	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "cdsserver: "+format+"\n", a...)
		return 1
	}
	if flag.NArg() != 0 {
		return fail("unexpected arguments: %v", flag.Args())
	}

	raiseFdLimit()

	// logr on top of slog: V(n) maps to slog level -n. At INFO (-v 0) the upstream's V(1)+
	// debug messages are dropped, like the operator's default zap logger; the default logs
	// errors only so that benchmark output is not interleaved with the two INFO lines the
	// server logs at start and close. Either way the per-message cost is the same: upstream
	// builds its V(n) log arguments (e.g. config.String()) before the level check.
	level := slog.LevelError
	if *verbosity >= 0 {
		level = slog.Level(-*verbosity)
	}
	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).
		WithName("cds-server")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// server.New only takes an address string and Start does not expose the listener,
	// so pick a free port first and hand it over (retry if someone grabs it meanwhile).
	var srv *cdsserver.Server
	var addr string
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		addr, err = freePort()
		if err != nil {
			return fail("cannot pick a port: %s", err)
		}
		// The operator passes its node-address patcher; it only runs for ?node= requests.
		srv = cdsserver.New(addr, nodePatcher, log)
		if err = srv.Start(ctx); err == nil {
			break
		}
		srv = nil
	}
	if srv == nil {
		return fail("cannot start server: %s", err)
	}

	if _, err := fmt.Fprintf(os.Stdout, "listening %s\n", addr); err != nil {
		return fail("cannot write stdout: %s", err)
	}

	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), maxLine)
	for in.Scan() {
		var configs []*stnrv1.StunnerConfig
		if err := json.Unmarshal(in.Bytes(), &configs); err != nil {
			return fail("bad stdin line (want a JSON array of StunnerConfig): %s", err)
		}
		for _, c := range configs {
			if c == nil {
				return fail("null config in stdin line")
			}
			// Per-config upsert; the operator's UpdateConfig(list) would delete every
			// config missing from the list, and our batches are partial.
			srv.UpsertConfig(c.Admin.Name, c)
		}
		// os.Stdout is unbuffered: one write is also the flush.
		if _, err := os.Stdout.Write([]byte("ok\n")); err != nil {
			return fail("cannot write stdout: %s", err)
		}
	}
	if err := in.Err(); err != nil {
		return fail("reading stdin: %s", err)
	}
	return 0
}

// nodePatcher mirrors the operator's node-address patcher when the node is unknown (we have
// no Kubernetes node objects): the node-address placeholder becomes $STUNNER_ADDR.
func nodePatcher(conf *stnrv1.StunnerConfig, _ string) *stnrv1.StunnerConfig {
	if conf == nil {
		return conf
	}
	for i := range conf.Listeners {
		if conf.Listeners[i].Addr == stnrv1.DefaultNodeAddressPlaceholder {
			conf.Listeners[i].Addr = "$" + stnrv1.DefaultEnvVarAddr
		}
	}
	return conf
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// raiseFdLimit sets the RLIMIT_NOFILE soft limit to the hard limit (benchmarks open
// 10,000+ connections). Go >= 1.19 already does this at startup; this makes it explicit.
func raiseFdLimit() {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Fprintf(os.Stderr, "cdsserver: getrlimit: %s\n", err)
		return
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			fmt.Fprintf(os.Stderr, "cdsserver: setrlimit: %s\n", err)
		}
	}
}
