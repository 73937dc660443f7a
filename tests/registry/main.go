// Command registry is an OCI distribution registry (github.com/google/go-containerregistry's
// pkg/registry, blobs in memory) on a loopback port, for the tests of the release packaging
// (tests/deploy.rs, server/tests/e2e_install.rs): `helm push` and `helm install oci://` against
// a real registry, plain HTTP, nothing leaving the machine.
//
//	registry [--addr 127.0.0.1:0]
//
// Prints "LISTEN <host:port>" once it accepts connections; serves until stdin closes (the
// test's handle dropped) or it is killed.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "the loopback address to listen on")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("registry: --addr %q: a loopback host:port only", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("registry: %v", err)
	}
	server := &http.Server{
		Handler:           registry.New(registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))),
		ReadHeaderTimeout: 10 * time.Second,
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	go func() {
		// The test holds stdin open while it needs the registry.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	log.Fatal(server.Serve(ln))
}
