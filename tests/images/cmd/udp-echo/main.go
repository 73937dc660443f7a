// Command udp-echo is the media backend of the cluster tests: a UDP server that sends
// every datagram back to its sender. With -prefix-hostname each reply starts with
// "<hostname>: ", so a test that reaches several backends through STUNner can tell which
// pod answered.
//
// With -http-get URL it is instead the application server of a test: one HTTP GET from
// inside a pod (its resolver, so names go through the cluster DNS), the body printed to
// stdout, exit status 0 only for a 200 answer. A test reads the body from the pod's log.
//
// Flags (each with an environment variable, for a pod spec):
//
//	-port N              UDP_ECHO_PORT    listen port (default 9001)
//	-addr A              UDP_ECHO_ADDR    listen address (default all addresses)
//	-prefix-hostname     UDP_ECHO_PREFIX_HOSTNAME=true
//	-http-get URL        (no variable)    GET URL, print the body, exit (no echo server)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// maxDatagram bounds the read buffer: the largest UDP payload over IPv4.
const maxDatagram = 65507

// maxBody bounds what -http-get reads, and httpTimeout how long it waits for all of it.
const (
	maxBody     = 1 << 20
	httpTimeout = 10 * time.Second
)

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
	httpGet := flag.String("http-get", "", "GET this URL, print the body to stdout and exit (no echo server)")
	flag.Parse()

	if *httpGet != "" {
		if err := get(os.Stdout, *httpGet); err != nil {
			log.Fatalf("udp-echo: %v", err)
		}
		return
	}

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

// get writes the body of a GET of url to w; an error unless the answer is a 200.
func get(w io.Writer, url string) error {
	client := &http.Client{Timeout: httpTimeout}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	_, err = w.Write(body)
	return err
}
