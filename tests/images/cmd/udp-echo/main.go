// Command udp-echo is the media backend of the cluster tests: a UDP server that sends
// every datagram back to its sender. With -prefix-hostname each reply starts with
// "<hostname>: ", so a test that reaches several backends through STUNner can tell which
// pod answered.
//
// Flags (each with an environment variable, for a pod spec):
//
//	-port N              UDP_ECHO_PORT    listen port (default 9001)
//	-addr A              UDP_ECHO_ADDR    listen address (default all addresses)
//	-prefix-hostname     UDP_ECHO_PREFIX_HOSTNAME=true
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
)

// maxDatagram bounds the read buffer: the largest UDP payload over IPv4.
const maxDatagram = 65507

func envOr(key, fallback string) string {
	if v, ok := os.LookupEnv(key); ok {
		return v
	}
	return fallback
}

func main() {
	defaultPort, err := strconv.Atoi(envOr("UDP_ECHO_PORT", "9001"))
	if err != nil {
		log.Fatalf("udp-echo: UDP_ECHO_PORT: %v", err)
	}
	defaultPrefix, err := strconv.ParseBool(envOr("UDP_ECHO_PREFIX_HOSTNAME", "false"))
	if err != nil {
		log.Fatalf("udp-echo: UDP_ECHO_PREFIX_HOSTNAME: %v", err)
	}
	port := flag.Int("port", defaultPort, "UDP listen port (env UDP_ECHO_PORT)")
	addr := flag.String("addr", envOr("UDP_ECHO_ADDR", ""), "listen address (env UDP_ECHO_ADDR)")
	prefixHostname := flag.Bool("prefix-hostname", defaultPrefix,
		"prefix each reply with \"<hostname>: \" (env UDP_ECHO_PREFIX_HOSTNAME)")
	flag.Parse()

	var prefix []byte
	if *prefixHostname {
		host, err := os.Hostname()
		if err != nil {
			log.Fatalf("udp-echo: hostname: %v", err)
		}
		prefix = []byte(host + ": ")
	}

	conn, err := net.ListenPacket("udp", net.JoinHostPort(*addr, strconv.Itoa(*port)))
	if err != nil {
		log.Fatalf("udp-echo: %v", err)
	}
	log.Printf("udp-echo: listening on %s", conn.LocalAddr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		conn.Close()
	}()

	if err := serve(conn, prefix); err != nil && ctx.Err() == nil {
		log.Fatalf("udp-echo: %v", err)
	}
	fmt.Fprintln(os.Stderr, "udp-echo: stopped")
}

// serve echoes datagrams until the connection is closed.
func serve(conn net.PacketConn, prefix []byte) error {
	buf := make([]byte, maxDatagram)
	reply := make([]byte, 0, len(prefix)+maxDatagram)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		reply = append(append(reply[:0], prefix...), buf[:n]...)
		if _, err := conn.WriteTo(reply, from); err != nil {
			log.Printf("udp-echo: reply to %s: %v", from, err)
		}
	}
}
