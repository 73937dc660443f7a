package main

import (
	"net"
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
