// Command turnprobe makes one TURN allocation through a real TURN server with the pion/turn
// client that upstream STUNner's own turncat uses, sends a few datagrams through the relay to
// a UDP peer (an echo server) and prints one JSON verdict on stdout:
//
//	{"ok":true,"stage":"done","relay":"127.0.0.1:40123","sent":5,"received":5}
//	{"ok":false,"stage":"allocate","error":"Allocate error response (error 400: )","sent":0,"received":0}
//
// stage says how far it got: "connect" (TCP/TLS dial or client set-up failed), "allocate"
// (the Allocate request failed: bad credentials, or no listener), "permission" (the
// CreatePermission for the peer was refused: the peer is not in any cluster the listener
// routes to), "relay" (allocated and permitted, but nothing came back from the peer),
// "done" (at least one datagram came back). After --timeout the verdict is a failure at the
// stage reached, with error "timed out after ...". Exit status 0 when ok, 1 otherwise, 2 on
// usage errors.
//
// Credentials: --user/--password (static auth) or --secret (ephemeral auth: a TURN REST
// username "<expiry-unix-time>:<userid>" and its HMAC-SHA1 password, computed with
// upstream's pkg/authentication exactly like stunner's auth service and turncat do).
//
// --hold keeps the allocation for as long as the caller wants: turnprobe prints
// {"relay":"<address>"} once allocated and {"echoed":true} at the first echo, sends a datagram every --interval until its stdin
// reaches EOF, then closes the allocation (a Refresh with lifetime 0, so the server frees it at
// once) and prints the verdict with max_gap_ms, the longest time without an echo from the first
// echo to the end. A TURN client that holds a call open through a server's graceful shutdown.
//
// The server may be IPv4 or IPv6 ([::1]:3478, with --local [::1]:0 for udp). pion's client
// asks for a relay of its socket's family (REQUESTED-ADDRESS-FAMILY IPv6 over an IPv6 socket,
// RFC 6156), and the server refuses a peer of the other family.
//
// `turnprobe selfsigned` instead prints {"cert":"<PEM>","key":"<PEM>"}: a fresh self-signed
// ECDSA certificate for 127.0.0.1/localhost, for TLS listeners in tests.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"strings"
	"time"

	"interop/internal/outcome"

	"github.com/pion/logging"
	"github.com/pion/turn/v5"

	a12n "github.com/l7mp/stunner/pkg/authentication"
)

type verdict struct {
	OK       bool   `json:"ok"`
	Stage    string `json:"stage"`
	Error    string `json:"error,omitempty"`
	Username string `json:"username,omitempty"`
	Relay    string `json:"relay,omitempty"`
	Sent     int    `json:"sent"`
	Received int    `json:"received"`
	// --hold: the longest time without an echo, from the first echo to the end.
	MaxGapMs int64 `json:"max_gap_ms,omitempty"`
}

func setStage(v *verdict, s string) {
	v.Stage = s
	outcome.SetStage(s)
}

func report(v verdict) { outcome.Report(v, v.OK) }

func main() {
	if len(os.Args) > 1 && os.Args[1] == "selfsigned" {
		selfSigned()
		return
	}

	server := flag.String("server", "", "TURN server host:port (required)")
	transport := flag.String("transport", "udp", "udp, tcp or tls")
	insecure := flag.Bool("insecure", false, "TLS: accept any server certificate")
	caFile := flag.String("ca", "", "TLS: PEM file with the CA (or self-signed) certificate to verify the server with")
	sni := flag.String("sni", "", "TLS: server name to verify (default: the --server host)")
	user := flag.String("user", "", "static auth: username")
	password := flag.String("password", "", "static auth: password")
	secret := flag.String("secret", "", "ephemeral auth: the shared secret")
	userid := flag.String("userid", "turnprobe", "ephemeral auth: the user id part of the username")
	ttl := flag.Duration("ttl", time.Hour, "ephemeral auth: validity of the username from now (negative: already expired)")
	realm := flag.String("realm", "stunner.l7mp.io", "TURN realm")
	peer := flag.String("peer", "", "UDP peer host:port to relay to (required)")
	local := flag.String("local", "127.0.0.1:0", "udp: local address to send from (a TURN server off loopback needs one of its network; [::1]:0 for one at [::1])")
	count := flag.Int("count", 5, "datagrams to send to the peer")
	wait := flag.Duration("wait", 3*time.Second, "how long to wait for echoes after the last datagram")
	timeout := flag.Duration("timeout", 20*time.Second, "overall deadline")
	verbose := flag.Bool("v", false, "pion debug log on stderr")
	hold := flag.Bool("hold", false, "print {\"relay\":...} once allocated, relay a datagram every --interval until stdin reaches EOF, then close the allocation and report (with max_gap_ms); --count is ignored")
	interval := flag.Duration("interval", 50*time.Millisecond, "between two datagrams")
	flag.Parse()

	if *server == "" || *peer == "" || flag.NArg() != 0 || *count < 1 {
		fmt.Fprintln(os.Stderr, "usage: turnprobe --server HOST:PORT --peer HOST:PORT [--transport udp|tcp|tls] (--user U --password P | --secret S) [flags]\n       turnprobe selfsigned")
		flag.PrintDefaults()
		os.Exit(2)
	}

	v := verdict{Stage: "connect"}
	username, pass := *user, *password
	if *secret != "" {
		username = a12n.GenerateTimeWindowedUsername(time.Now(), *ttl, *userid)
		p, err := a12n.GetLongTermCredential(username, *secret)
		if err != nil {
			v.Error = err.Error()
			report(v)
		}
		pass = p
		v.Username = username
	}

	outcome.SetStage(v.Stage)
	outcome.Watchdog(*timeout, func(stage string) any {
		return verdict{Stage: stage, Error: fmt.Sprintf("timed out after %s", *timeout)}
	})

	serverAddr, err := net.ResolveUDPAddr("udp", *server)
	if err != nil {
		v.Error = err.Error()
		report(v)
	}
	peerAddr, err := net.ResolveUDPAddr("udp", *peer)
	if err != nil {
		v.Error = err.Error()
		report(v)
	}

	var conn net.PacketConn
	switch strings.ToLower(*transport) {
	case "udp":
		conn, err = net.ListenPacket("udp", *local)
	case "tcp":
		var c net.Conn
		if c, err = net.DialTimeout("tcp", *server, 5*time.Second); err == nil {
			conn = turn.NewSTUNConn(c)
		}
	case "tls":
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: *insecure, ServerName: *sni}
		if cfg.ServerName == "" {
			cfg.ServerName = serverAddr.IP.String()
		}
		if *caFile != "" {
			pemBytes, rerr := os.ReadFile(*caFile)
			if rerr != nil {
				v.Error = rerr.Error()
				report(v)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pemBytes) {
				v.Error = "no certificate in " + *caFile
				report(v)
			}
		}
		var c net.Conn
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		if c, err = tls.DialWithDialer(dialer, "tcp", *server, cfg); err == nil {
			conn = turn.NewSTUNConn(c)
		}
	default:
		fmt.Fprintf(os.Stderr, "turnprobe: unknown transport %q\n", *transport)
		os.Exit(2)
	}
	if err != nil {
		v.Error = err.Error()
		report(v)
	}

	level := logging.LogLevelError
	if *verbose {
		level = logging.LogLevelDebug
	}
	lf := logging.NewDefaultLoggerFactory()
	lf.DefaultLogLevel = level

	client, err := turn.NewClient(&turn.ClientConfig{
		STUNServerAddr: serverAddr.String(),
		TURNServerAddr: serverAddr.String(),
		Conn:           conn,
		Username:       username,
		Password:       pass,
		Realm:          *realm,
		LoggerFactory:  lf,
	})
	if err != nil {
		v.Error = err.Error()
		report(v)
	}
	if err = client.Listen(); err != nil {
		v.Error = err.Error()
		report(v)
	}

	setStage(&v, "allocate")
	relay, err := client.Allocate()
	if err != nil {
		v.Error = err.Error()
		report(v)
	}
	v.Relay = relay.LocalAddr().String()

	// Echoes are counted by payload so duplicates or strays do not count twice.
	got := make(chan string, *count*2)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, rerr := relay.ReadFrom(buf)
			if rerr != nil {
				return
			}
			if from.String() == peerAddr.String() {
				got <- string(buf[:n])
			}
		}
	}()

	if *hold {
		holdAllocation(relay, peerAddr, *interval, &v, got)
		client.Close()
		report(v)
	}

	setStage(&v, "permission")
	want := map[string]bool{}
	for i := 0; i < *count; i++ {
		msg := fmt.Sprintf("turnprobe-%d-%d", os.Getpid(), i)
		if _, err = relay.WriteTo([]byte(msg), peerAddr); err != nil {
			v.Error = err.Error()
			report(v)
		}
		want[msg] = true
		v.Sent++
		time.Sleep(*interval)
	}

	setStage(&v, "relay")
	deadline := time.After(*wait)
collect:
	for v.Received < *count {
		select {
		case m := <-got:
			if want[m] {
				delete(want, m)
				v.Received++
			}
		case <-deadline:
			break collect
		}
	}
	if v.Received > 0 {
		v.Stage, v.OK = "done", true
	} else {
		v.Error = fmt.Sprintf("no echo from %s within %s", peerAddr, *wait)
	}
	// A Refresh with lifetime 0: the probe leaves no allocation behind, so a server draining
	// for a graceful shutdown is not held until the allocation's lifetime ends.
	_ = relay.Close()
	client.Close()
	report(v)
}

// holdAllocation is --hold: it says where the relay is, relays one datagram every interval
// until stdin reaches EOF, counting the echoes and the longest gap between them (and from the
// last one to the end), and closes the allocation.
func holdAllocation(relay net.PacketConn, peer net.Addr, interval time.Duration, v *verdict, got <-chan string) {
	line, _ := json.Marshal(map[string]string{"relay": v.Relay})
	fmt.Println(string(line))
	setStage(v, "permission")
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	prefix := fmt.Sprintf("turnprobe-%d-", os.Getpid())
	var last time.Time
	var maxGap time.Duration
	echoed := func(at time.Time) {
		if !last.IsZero() && at.Sub(last) > maxGap {
			maxGap = at.Sub(last)
		}
		last = at
	}
	for {
		select {
		case <-eof:
			if !last.IsZero() {
				echoed(time.Now())
			}
			v.MaxGapMs = maxGap.Milliseconds()
			if v.Received > 0 {
				v.Stage, v.OK = "done", true
			} else {
				v.Error = fmt.Sprintf("no echo from %s", peer)
			}
			// A Refresh with lifetime 0: the server frees the allocation now.
			if err := relay.Close(); err != nil && v.Error == "" {
				v.Error = "closing the allocation: " + err.Error()
			}
			return
		case <-ticker.C:
			msg := fmt.Sprintf("%s%d", prefix, v.Sent)
			if _, err := relay.WriteTo([]byte(msg), peer); err != nil {
				v.Error = err.Error()
				report(*v)
			}
			v.Sent++
		case m := <-got:
			if strings.HasPrefix(m, prefix) {
				if v.Received == 0 {
					fmt.Println(`{"echoed":true}`)
				}
				v.Received++
				setStage(v, "relay")
				echoed(time.Now())
			}
		}
	}
}

func selfSigned() {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnprobe:", err)
		os.Exit(1)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "turnprobe test certificate"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnprobe:", err)
		os.Exit(1)
	}
	keyDer, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnprobe:", err)
		os.Exit(1)
	}
	out := map[string]string{
		"cert": string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		"key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDer})),
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
}
