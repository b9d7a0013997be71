//! The client listeners: the plain and TLS ports, the accept loop, maxclients and protected
//! mode.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::clients::ClientInfo;
use super::stream::ClientStream;
use super::{session, Shared};

/// How long a TLS client may take to finish its handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Redis 7's reply to a client from another host while protected mode is on.
pub const PROTECTED_MODE_DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n";

/// The client listeners: the plain port and the TLS port, either of which may be off.
pub(super) struct Listeners {
    /// The plain port (None: off).
    pub(super) plain: Option<TcpListener>,
    /// The TLS port and its configuration (None: off).
    pub(super) tls: Option<(TcpListener, Arc<crate::tls::Tls>)>,
}

/// Binds a client port (None for port 0, which Redis reads as "do not listen").
pub(super) async fn bind_client_port(bind: &str, port: u16) -> anyhow::Result<Option<TcpListener>> {
    if port == 0 {
        return Ok(None);
    }
    let l = TcpListener::bind((bind, port))
        .await
        .with_context(|| format!("binding {bind}:{port}"))?;
    Ok(Some(l))
}

impl Listeners {
    /// The plain address, or the TLS one when only TLS is served.
    pub(super) fn addr(&self) -> anyhow::Result<SocketAddr> {
        match (&self.plain, &self.tls) {
            (Some(l), _) | (None, Some((l, _))) => Ok(l.local_addr()?),
            (None, None) => anyhow::bail!("no client port to listen on"),
        }
    }

    /// The TLS port's address, if it listens.
    pub(super) fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls.as_ref().and_then(|(l, _)| l.local_addr().ok())
    }

    /// The next connection on either port, with the TLS handshake still to do for the TLS
    /// port's.
    async fn accept(&self) -> std::io::Result<(TcpStream, SocketAddr, Option<TlsAcceptor>)> {
        let plain = async {
            match &self.plain {
                Some(l) => l.accept().await,
                None => std::future::pending().await,
            }
        };
        let tls = async {
            match &self.tls {
                Some((l, tls)) => l
                    .accept()
                    .await
                    .map(|(s, a)| (s, a, TlsAcceptor::from(tls.clients()))),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            a = plain => a.map(|(s, a)| (s, a, None)),
            a = tls => a.map(|(s, a, t)| (s, a, Some(t))),
        }
    }
}

/// Accepts clients on both ports until `stop`, then gives the sessions 3 s to end.
pub(super) async fn accept_loop(
    shared: Arc<Shared>,
    listeners: Listeners,
    mut stop: watch::Receiver<bool>,
) {
    let mut sessions = JoinSet::new();
    let mut next_id: u64 = 0;
    loop {
        let accepted = tokio::select! {
            a = listeners.accept() => a,
            _ = stop.changed() => break,
            Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
        };
        let (stream, peer, tls) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if shared.clients.len() >= shared.maxclients() {
            shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Some(mut stream) = open_stream(stream, tls).await {
                    use tokio::io::AsyncWriteExt;
                    let _ = stream
                        .write_all(b"-ERR max number of clients reached\r\n")
                        .await;
                    let _ = stream.flush().await;
                }
            });
            continue;
        }
        let _ = stream.set_nodelay(true);
        next_id += 1;
        let id = next_id;
        shared.stats.connections.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let laddr = stream.local_addr().unwrap_or(shared.addr);
        shared.clients.add(ClientInfo {
            id,
            addr: peer,
            laddr,
            name: String::new(),
            lib_name: String::new(),
            lib_ver: String::new(),
            resp: 2,
            since: now,
            last: now,
            cmd: "NULL".into(),
            blocked: false,
            user: crate::state::acl::DEFAULT_USER.into(),
            killed: Default::default(),
        });
        let (sh, rx) = (shared.clone(), stop.clone());
        sessions.spawn(async move {
            if let Some(stream) = open_stream(stream, tls).await {
                if sh.protected_mode_refuses(peer.ip()) {
                    deny(&sh, stream, peer).await;
                } else {
                    session::serve(sh.clone(), stream, id, rx).await;
                }
            }
            sh.clients.remove(id);
        });
    }
    drop(listeners);
    let drain = async { while sessions.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(3), drain)
        .await
        .is_err()
    {
        sessions.abort_all();
    }
}

/// The client's stream: the socket itself, or the socket after a TLS handshake (None if
/// the handshake failed or took too long, which is logged).
async fn open_stream(stream: TcpStream, tls: Option<TlsAcceptor>) -> Option<ClientStream> {
    let Some(acceptor) = tls else {
        return Some(ClientStream::Plain(stream));
    };
    let peer = stream.peer_addr().ok();
    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(ClientStream::Tls(Box::new(s))),
        Ok(Err(e)) => {
            tracing::info!(peer = ?peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::info!(peer = ?peer, "TLS handshake timed out");
            None
        }
    }
}

/// Protected mode's refusal: Redis's text, then the connection closes. Counted as a
/// rejected connection, as Redis counts it.
async fn deny(shared: &Shared, mut stream: ClientStream, peer: SocketAddr) {
    use tokio::io::AsyncWriteExt;
    shared.stats.rejected.fetch_add(1, Ordering::Relaxed);
    tracing::info!(peer = %peer, "protected mode: refused a client from another host");
    let _ = stream.write_all(PROTECTED_MODE_DENIED.as_bytes()).await;
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
    // Closing with the client's request still unread would send a reset, which can reach
    // the client before the text does; take what it sent (a little, briefly) first.
    let drain = async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        for _ in 0..16 {
            if !matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), drain).await;
}
