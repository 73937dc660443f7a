package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestServeEchoesWithPrefix sends datagrams over loopback and expects each one back, prefixed.
func TestServeEchoesWithPrefix(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(conn, []byte("pod-a: ")) }()

	client, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	buf := make([]byte, 1024)
	for _, msg := range []string{"one", "a longer second datagram", "3"} {
		if _, err := client.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		// a deadline only so that a lost datagram fails the test instead of hanging it
		if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := client.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(buf[:n]), "pod-a: "+msg; got != want {
			t.Fatalf("reply %q, want %q", got, want)
		}
	}

	conn.Close()
	if err := <-done; err != nil {
		t.Fatalf("serve after close: %v", err)
	}
}

// TestGetPrintsTheBodyOfA200Only asks a loopback server for a body and for a 404.
func TestGetPrintsTheBodyOfA200Only(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ice" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"iceServers":[]}`))
	}))
	defer srv.Close()

	var out bytes.Buffer
	if err := get(&out, srv.URL+"/ice?service=turn"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != `{"iceServers":[]}` {
		t.Fatalf("body %q", got)
	}
	out.Reset()
	err := get(&out, srv.URL+"/other")
	if err == nil || !strings.Contains(err.Error(), "404") || out.Len() != 0 {
		t.Fatalf("a 404: error %v, printed %q", err, out.String())
	}
}
