//! What the CDS listener knows of a connection and hands to the transports with each request
//! (as request extensions): who is at the other end, and the slot the connection holds.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// The remote address of the connection a request came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// Holds one slot of the server's connection limit for as long as the connection lives,
/// including after it was upgraded to a WebSocket.
#[derive(Clone)]
pub struct ConnectionPermit {
    _slot: Arc<OwnedSemaphorePermit>,
}

impl ConnectionPermit {
    pub fn new(slot: OwnedSemaphorePermit) -> Self {
        ConnectionPermit { _slot: Arc::new(slot) }
    }
}

/// A connection's TCP stream that replays the first bytes the listener read (to tell HTTP/2
/// from HTTP/1.1) before reading on.
pub struct Rewind {
    prefix: Vec<u8>,
    inner: TcpStream,
}

impl Rewind {
    pub fn new(prefix: Vec<u8>, inner: TcpStream) -> Self {
        Rewind { prefix, inner }
    }

    /// The stream, with the bytes read from it but not yet replayed.
    pub fn into_parts(self) -> (Vec<u8>, TcpStream) {
        (self.prefix, self.inner)
    }
}

impl AsyncRead for Rewind {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.drain(..n);
            if self.prefix.is_empty() {
                // A watch session reads through this for as long as it lives: hold nothing.
                self.prefix = Vec::new();
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
