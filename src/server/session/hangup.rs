//! Noticing that a blocked client hung up, even after it sent more bytes.
//!
//! A client blocked in `LOCK ... WAIT` or a blocking pop may pipeline its next commands
//! behind it. Peeking at the socket cannot tell such bytes from a hang-up that follows them,
//! so the watch reads them: they are kept, in order, and parsed once the blocking command has
//! answered (Redis also keeps reading a blocked client's input). A read of 0 bytes, or an
//! error, means the client has gone.

use bytes::BytesMut;
use tokio::io::AsyncReadExt;

use super::super::stream::ClientStream;

/// Watches one blocked client's socket.
pub(super) struct HangupWatch {
    early: BytesMut,
    limit: usize,
}

impl HangupWatch {
    /// A watch that keeps at most `limit` bytes of early input (the query buffer's bound);
    /// past it, the client is alive and the watch stops reading.
    pub(super) fn new(limit: usize) -> HangupWatch {
        HangupWatch {
            early: BytesMut::new(),
            limit: limit.max(1),
        }
    }

    /// Resolves when the client hangs up (or its connection fails); never resolves once
    /// `limit` bytes are kept. Cancel-safe: bytes read before a cancel stay kept.
    pub(super) async fn hung_up(&mut self, stream: &mut ClientStream) {
        while self.early.len() < self.limit {
            self.early.reserve(4096);
            match stream.read_buf(&mut self.early).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        std::future::pending::<()>().await;
    }

    /// The bytes the client sent while it was blocked, for the session to parse next.
    pub(super) fn into_early_input(self) -> BytesMut {
        self.early
    }
}
