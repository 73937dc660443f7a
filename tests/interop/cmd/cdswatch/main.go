// Command cdswatch drives the real upstream STUNner CDS client
// (github.com/l7mp/stunner/pkg/config/client) against a CDS server and prints
// every config the client delivers as one JSON line on stdout:
//
//	{"deleted":<client.IsConfigDeleted(c)>,"config":<c>}
//
// Logs (the upstream client's and our own) go to stderr. A watch exits when
// stdin reaches EOF or on SIGTERM/SIGINT; --once (which ignores stdin) and
// --no-retry exit when the operation finishes.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	stnrv1 "github.com/l7mp/stunner/pkg/apis/v1"
	cdsclient "github.com/l7mp/stunner/pkg/config/client"
	"github.com/l7mp/stunner/pkg/logger"
)

type line struct {
	Deleted bool                  `json:"deleted"`
	Config  *stnrv1.StunnerConfig `json:"config"`
}

func emit(c *stnrv1.StunnerConfig) error {
	b, err := json.Marshal(line{Deleted: cdsclient.IsConfigDeleted(c), Config: c})
	if err != nil {
		return fmt.Errorf("cannot encode config: %w", err)
	}
	// One write per line (stdout is unbuffered in Go, so this is also the flush).
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}

func usage() {
	fmt.Fprintf(os.Stderr, `Usage: cdswatch --server URL (--id NS/NAME [--node NODE] | --namespace NS | --all) [options]

Watches (default) or loads (--once) STUNner configs from a CDS server using the
upstream Go CDS client and prints one JSON line per delivered config to stdout:
  {"deleted":<bool>,"config":<StunnerConfig>}
A watch exits when stdin is closed (unless --ignore-stdin) or on SIGTERM/SIGINT;
--once (stdin not watched) and --no-retry exit when the operation ends (1 on error).

Options:
`)
	flag.PrintDefaults()
}

func main() {
	os.Exit(run())
}

func run() int {
	server := flag.String("server", "", "CDS server origin, e.g. http://127.0.0.1:13478 (anything upstream accepts: host:port, http://, ws://)")
	id := flag.String("id", "", "watch/load a single config: <namespace>/<name> (route /api/v1/configs/NS/NAME)")
	node := flag.String("node", "", "node name sent as ?node= (only with --id)")
	namespace := flag.String("namespace", "", "watch/load all configs in a namespace (route /api/v1/configs/NS)")
	all := flag.Bool("all", false, "watch/load all configs (route /api/v1/configs)")
	suppressDelete := flag.Bool("suppress-delete", false, "let the client drop delete (zero-)configs, as stunnerd -w does (watch modes only)")
	once := flag.Bool("once", false, "one-shot HTTP GET instead of a watch (--id: client Load(), which validates; lists: CdsApi.Get() then Validate() per item)")
	noValidate := flag.Bool("no-validate", false, "with --once: print what CdsApi.Get() returned without calling Validate() (stunnerctl behaviour)")
	noRetry := flag.Bool("no-retry", false, "watch through a single upstream Poll() (no reconnect); exit when it ends: 0 if cancelled, 1 on error")
	ignoreStdin := flag.Bool("ignore-stdin", false, "do not exit on stdin EOF")
	logLevel := flag.String("log", "all:INFO", "upstream log level spec, e.g. all:DEBUG or all:WARN,cds-client:TRACE (logs go to stderr)")
	exitGrace := flag.Duration("exit-grace", 300*time.Millisecond, "after cancelling a watch, wait this long so the client can send its Close frame")
	flag.Usage = usage
	flag.Parse()

	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "cdswatch: "+format+"\n", a...)
		return 1
	}

	if flag.NArg() != 0 {
		return fail("unexpected arguments: %s", strings.Join(flag.Args(), " "))
	}
	if *server == "" {
		return fail("--server is required")
	}
	modes := 0
	for _, set := range []bool{*id != "", *namespace != "", *all} {
		if set {
			modes++
		}
	}
	if modes != 1 {
		return fail("exactly one of --id, --namespace, --all is required")
	}
	if *node != "" && *id == "" {
		return fail("--node is only valid with --id")
	}
	if *once && (*suppressDelete || *noRetry) {
		return fail("--suppress-delete and --no-retry apply to watch mode only, not --once")
	}
	if *noValidate && !*once {
		return fail("--no-validate applies to --once only")
	}

	lf := logger.NewLoggerFactory(*logLevel)
	lf.SetWriter(os.Stderr)
	cdslog := lf.NewLogger("cds-client")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Termination: SIGTERM/SIGINT or stdin EOF.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "cdswatch: received %s, exiting\n", s)
			cancel()
		case <-ctx.Done():
		}
	}()
	// One-shot mode ends on its own; only watches are tied to stdin.
	if !*ignoreStdin && !*once {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "cdswatch: stdin closed, exiting")
			cancel()
		}()
	}

	// Build the upstream API object. The single-id case goes through client.New
	// exactly like stunnerd (stunner.LoadConfig / stunner.WatchConfig).
	var api cdsclient.CdsApi
	var single cdsclient.Client
	var err error
	switch {
	case *id != "":
		single, err = cdsclient.New(*server, *id, *node, lf)
		if err == nil {
			cds, ok := single.(*cdsclient.CDSClient)
			if !ok {
				return fail("origin %q did not yield a CDS client (got %T)", *server, single)
			}
			api = cds
		}
	case *namespace != "":
		api, err = cdsclient.NewConfigsNamespaceAPI(*server, *namespace, cdslog)
	default:
		api, err = cdsclient.NewAllConfigsAPI(*server, cdslog)
	}
	if err != nil {
		return fail("cannot create CDS client: %s", err)
	}

	if *once {
		return runOnce(ctx, api, single, *noValidate, fail)
	}

	ch := make(chan *stnrv1.StunnerConfig, 64)
	pollDone := make(chan error, 1)
	if *noRetry {
		go func() { pollDone <- api.Poll(ctx, ch, *suppressDelete) }()
	} else if single != nil {
		if err := single.Watch(ctx, ch, *suppressDelete); err != nil {
			return fail("cannot start watcher: %s", err)
		}
	} else if err := api.Watch(ctx, ch, *suppressDelete); err != nil {
		return fail("cannot start watcher: %s", err)
	}

	for {
		select {
		case c := <-ch:
			if err := emit(c); err != nil {
				cancel()
				return fail("cannot write stdout: %s", err)
			}
		case err := <-pollDone:
			// drain configs that were delivered before Poll returned
		drain:
			for {
				select {
				case c := <-ch:
					if err := emit(c); err != nil {
						return fail("cannot write stdout: %s", err)
					}
				default:
					break drain
				}
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return fail("poll ended: %s", err)
			}
			return 0
		case <-ctx.Done():
			if !*noRetry {
				// upstream sends the empty Close frame from its own goroutine
				time.Sleep(*exitGrace)
				return 0
			}
			select {
			case <-pollDone:
			case <-time.After(*exitGrace):
			}
			return 0
		}
	}
}

func runOnce(ctx context.Context, api cdsclient.CdsApi, single cdsclient.Client, noValidate bool,
	fail func(string, ...any) int) int {
	if single != nil && !noValidate {
		c, err := single.Load()
		if err != nil {
			return fail("load failed: %s", err)
		}
		if err := emit(c); err != nil {
			return fail("cannot write stdout: %s", err)
		}
		return 0
	}

	cs, err := api.Get(ctx)
	if err != nil {
		return fail("get failed: %s", err)
	}
	rc := 0
	for _, c := range cs {
		if !noValidate {
			if err := c.Validate(); err != nil {
				fmt.Fprintf(os.Stderr, "cdswatch: invalid config %q: %s\n", c.Admin.Name, err)
				rc = 1
				continue
			}
		}
		if err := emit(c); err != nil {
			return fail("cannot write stdout: %s", err)
		}
	}
	return rc
}
