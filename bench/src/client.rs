//! A minimal async RESP2 client for the benchmark: pipelined commands, replies decoded with
//! redis-protocol.

use bytes::{BufMut, BytesMut};
use redis_protocol::resp2::decode::decode;
use redis_protocol::resp2::types::OwnedFrame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One connection.
pub struct Client {
    stream: TcpStream,
    rbuf: BytesMut,
    wbuf: BytesMut,
}

impl Client {
    /// Connects to `addr`.
    pub async fn connect(addr: &str) -> anyhow::Result<Client> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            rbuf: BytesMut::with_capacity(16 * 1024),
            wbuf: BytesMut::with_capacity(4096),
        })
    }

    /// Queues a command without sending it.
    pub fn queue(&mut self, args: &[&[u8]]) {
        self.wbuf
            .put_slice(format!("*{}\r\n", args.len()).as_bytes());
        for a in args {
            self.wbuf.put_slice(format!("${}\r\n", a.len()).as_bytes());
            self.wbuf.put_slice(a);
            self.wbuf.put_slice(b"\r\n");
        }
    }

    /// Sends everything queued and reads `n` replies.
    pub async fn flush(&mut self, n: usize) -> anyhow::Result<Vec<OwnedFrame>> {
        self.send().await?;
        self.receive(n).await
    }

    /// Sends everything queued, without waiting for replies.
    pub async fn send(&mut self) -> anyhow::Result<()> {
        self.stream.write_all(&self.wbuf).await?;
        self.wbuf.clear();
        Ok(())
    }

    /// Reads `n` replies.
    pub async fn receive(&mut self, n: usize) -> anyhow::Result<Vec<OwnedFrame>> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match decode(&self.rbuf)? {
                Some((frame, used)) => {
                    let _ = self.rbuf.split_to(used);
                    out.push(frame);
                }
                None => {
                    if self.stream.read_buf(&mut self.rbuf).await? == 0 {
                        anyhow::bail!("connection closed");
                    }
                }
            }
        }
        Ok(out)
    }

    /// Sends one command and returns its reply.
    pub async fn call(&mut self, args: &[&[u8]]) -> anyhow::Result<OwnedFrame> {
        self.queue(args);
        let mut replies = self.flush(1).await?;
        replies.pop().ok_or_else(|| anyhow::anyhow!("no reply"))
    }
}

/// The integer in a reply, if it is one.
pub fn int(frame: &OwnedFrame) -> Option<i64> {
    match frame {
        OwnedFrame::Integer(n) => Some(*n),
        _ => None,
    }
}

/// True for an error reply.
pub fn is_error(frame: &OwnedFrame) -> bool {
    matches!(frame, OwnedFrame::Error(_))
}
