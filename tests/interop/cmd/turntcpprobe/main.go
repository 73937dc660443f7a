// Command turntcpprobe makes one RFC 6062 TCP allocation through a TURN server's TCP listener
// with the pion/turn client (Allocate with REQUESTED-TRANSPORT TCP, CreatePermission, Connect,
// then ConnectionBind on a second TCP connection), exchanges a few messages with a TCP peer
// (an echo server) over the bound data connection and prints one JSON verdict on stdout:
//
//	{"ok":true,"stage":"done","relay":"127.0.0.1:40123","sent":5,"received":5,"allocate_ms":1.2,"connect_ms":2.3,"rtt_ms":[0.4,...]}
//	{"ok":false,"stage":"permission","error":"CreatePermission error response (error 403: Forbidden)",...}
//
// stage says how far it got: "connect" (the control connection or client set-up failed),
// "allocate" (the TCP Allocate failed: bad credentials, or no TCP cluster behind the
// listener), "permission" (CreatePermission refused: no cluster of the listener names the
// peer's address), "peer" (the Connect or the ConnectionBind failed: the peer is refused for
// TCP, or it does not accept), "relay" (connected, but the echo did not come back), "done"
// (every message came back). After --timeout the verdict is a failure at the stage reached,
// with error "timed out after ...". Exit status 0 when ok, 1 otherwise, 2 on usage errors.
//
// Figures (milliseconds, wall clock of this process): allocate_ms is the Allocate transaction,
// connect_ms CreatePermission + Connect + ConnectionBind, rtt_ms one write-to-read round trip
// per message through the relay.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"interop/internal/outcome"

	"github.com/pion/logging"
	"github.com/pion/turn/v5"
)

type verdict struct {
	OK         bool      `json:"ok"`
	Stage      string    `json:"stage"`
	Error      string    `json:"error,omitempty"`
	Relay      string    `json:"relay,omitempty"`
	Sent       int       `json:"sent"`
	Received   int       `json:"received"`
	AllocateMs float64   `json:"allocate_ms,omitempty"`
	ConnectMs  float64   `json:"connect_ms,omitempty"`
	RttMs      []float64 `json:"rtt_ms,omitempty"`
}

func setStage(v *verdict, s string) {
	v.Stage = s
	outcome.SetStage(s)
}

func report(v verdict) { outcome.Report(v, v.OK) }

func fail(v verdict, err error) {
	v.Error = err.Error()
	report(v)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func main() {
	server := flag.String("server", "", "TURN server host:port of a TURN-TCP listener (required)")
	transport := flag.String("transport", "tcp", "the client connection to the TURN server: only tcp (RFC 6062 allocations need a TCP or TLS one; TLS is not done here)")
	user := flag.String("user", "", "static auth: username")
	password := flag.String("password", "", "static auth: password")
	realm := flag.String("realm", "stunner.l7mp.io", "TURN realm")
	peer := flag.String("peer", "", "TCP peer host:port to connect to through the relay (required)")
	count := flag.Int("count", 5, "messages to exchange with the peer")
	timeout := flag.Duration("timeout", 20*time.Second, "overall deadline")
	verbose := flag.Bool("v", false, "pion debug log on stderr")
	flag.Parse()

	if *transport != "tcp" {
		fmt.Fprintf(os.Stderr, "turntcpprobe: unsupported transport %q: only tcp\n", *transport)
		os.Exit(2)
	}
	if *server == "" || *peer == "" || flag.NArg() != 0 || *count < 1 {
		fmt.Fprintln(os.Stderr, "usage: turntcpprobe --server HOST:PORT --peer HOST:PORT --user U --password P [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}

	v := verdict{Stage: "connect"}
	outcome.SetStage(v.Stage)
	outcome.Watchdog(*timeout, func(stage string) any {
		return verdict{Stage: stage, Error: fmt.Sprintf("timed out after %s", *timeout)}
	})

	serverAddr, err := net.ResolveTCPAddr("tcp4", *server)
	if err != nil {
		fail(v, err)
	}
	peerAddr, err := net.ResolveTCPAddr("tcp4", *peer)
	if err != nil {
		fail(v, err)
	}
	control, err := net.DialTimeout("tcp4", serverAddr.String(), 5*time.Second)
	if err != nil {
		fail(v, err)
	}

	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = logging.LogLevelError
	if *verbose {
		lf.DefaultLogLevel = logging.LogLevelDebug
	}
	client, err := turn.NewClient(&turn.ClientConfig{
		STUNServerAddr: serverAddr.String(),
		TURNServerAddr: serverAddr.String(),
		Conn:           turn.NewSTUNConn(control),
		Username:       *user,
		Password:       *password,
		Realm:          *realm,
		LoggerFactory:  lf,
	})
	if err != nil {
		fail(v, err)
	}
	if err = client.Listen(); err != nil {
		fail(v, err)
	}

	setStage(&v, "allocate")
	t0 := time.Now()
	alloc, err := client.AllocateTCP()
	if err != nil {
		fail(v, err)
	}
	v.AllocateMs = ms(time.Since(t0))
	v.Relay = alloc.Addr().String()

	setStage(&v, "permission")
	t0 = time.Now()
	if err = client.CreatePermission(peerAddr); err != nil {
		fail(v, err)
	}
	setStage(&v, "peer")
	data, err := alloc.DialTCP("tcp4", nil, peerAddr)
	if err != nil {
		fail(v, err)
	}
	v.ConnectMs = ms(time.Since(t0))

	setStage(&v, "relay")
	buf := make([]byte, 256)
	for i := 0; i < *count; i++ {
		msg := []byte(fmt.Sprintf("turntcpprobe-%d-%d", os.Getpid(), i))
		t0 = time.Now()
		if _, err = data.Write(msg); err != nil {
			fail(v, err)
		}
		v.Sent++
		_ = data.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err = io.ReadFull(data, buf[:len(msg)]); err != nil {
			fail(v, fmt.Errorf("no echo from %s: %w", peerAddr, err))
		}
		if !bytes.Equal(buf[:len(msg)], msg) {
			fail(v, fmt.Errorf("echo from %s differs: %q, sent %q", peerAddr, buf[:len(msg)], msg))
		}
		v.RttMs = append(v.RttMs, ms(time.Since(t0)))
		v.Received++
	}
	v.Stage, v.OK = "done", true
	report(v)
}
