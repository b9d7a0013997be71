//! Peer authentication: the handshake that opens every peer connection, before any Raft,
//! forward or admin frame is read.
//!
//! With a cluster secret (`--cluster-secret`), both sides prove they hold it without sending
//! it: each sends a fresh random nonce, and each answers with an HMAC-SHA256, under the
//! secret, of both nonces and the connection's identity (protocol, cluster id, both node ids),
//! with a different label for each direction so that one side's proof can never be replayed
//! or reflected as the other's. A side that cannot prove the secret, or that holds a
//! different one, is refused with a reason, and the connection closes before its first frame.
//!
//! ```text
//!   opener                                   acceptor
//!   Hello { proto, cluster, from, target, nonce_o }  ─►
//!                                         ◄─ Challenge { nonce_a, proof_a }
//!   (checks proof_a)
//!   Proof { proof_o }                       ─►
//!                                         ◄─ Welcome | Refused(why)
//! ```
//!
//! Without a secret the same messages flow with no proofs: that is only allowed on a
//! loopback peer port or under mutual TLS (see `Config::peer_bind`). The handshake
//! proves who is at the other end when the connection opens; it does not protect the bytes
//! that follow from a man in the middle. Mutual TLS (`--tls-cluster yes`) does.

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::protocol::{PeerError, PeerFramed, PeerIo, MAX_FRAME, PROTOCOL_VERSION};
use super::NodeId;
use crate::tls::Tls;

/// The largest handshake frame: nothing bigger is buffered for a peer that has not proved
/// itself yet.
pub const MAX_HANDSHAKE_FRAME: usize = 1024;

/// How long an acceptor waits for a peer to finish the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// A random nonce, fresh for each connection and side.
type Nonce = [u8; 32];
/// An HMAC-SHA256 proof.
type Proof = [u8; 32];

/// What this node proves and demands on its peer connections.
#[derive(Clone, Default)]
pub struct PeerAuth {
    secret: Option<Vec<u8>>,
    /// Mutual TLS under the handshake (`--tls-cluster yes`).
    tls: Option<Arc<Tls>>,
}

impl std::fmt::Debug for PeerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret itself.
        f.debug_struct("PeerAuth")
            .field("secret", &self.secret.as_ref().map(|_| "<set>"))
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// The name a node asks for in its TLS handshake with a peer. Peers are addressed by IP
/// and every certificate the cluster CA signs is a member, so the verifier checks the chain
/// and not the name (`crate::tls::cluster_client_config`).
const PEER_SERVER_NAME: &str = "palisade-peer";

/// The first frame on a peer connection, from the side that opened it. Its first field is
/// the protocol version, as in every envelope since version 1, so that a node of an older
/// version can be told apart from garbage.
#[derive(Debug, Serialize, Deserialize)]
pub struct Hello {
    /// The opener's protocol version.
    pub proto: u32,
    /// The opener's cluster id (0 while it has not joined).
    pub cluster_id: u64,
    /// The opener's node id.
    pub from: NodeId,
    /// The node the opener believes it is talking to.
    pub target: NodeId,
    /// The opener's nonce.
    pub nonce: Nonce,
}

/// The later handshake frames.
#[derive(Debug, Serialize, Deserialize)]
pub enum Handshake {
    /// The acceptor's nonce and its proof (none without a secret).
    Challenge {
        /// The acceptor's nonce.
        nonce: Nonce,
        /// HMAC of the transcript under the acceptor's label.
        proof: Option<Proof>,
    },
    /// The opener's proof (none without a secret).
    Proof(Option<Proof>),
    /// The connection is open for peer frames.
    Welcome,
    /// The handshake failed; the connection closes.
    Refused(String),
}

/// Which side a proof speaks for: the labels keep one side's proof from passing as the
/// other's.
#[derive(Clone, Copy)]
enum Side {
    Opener,
    Acceptor,
}

impl PeerAuth {
    /// Authentication with `secret` (None: no secret, for loopback or TLS-only clusters).
    pub fn new(secret: Option<Vec<u8>>) -> PeerAuth {
        PeerAuth { secret, tls: None }
    }

    /// The same, with every peer connection in mutual TLS first (None: plain TCP).
    pub fn with_tls(self, tls: Option<Arc<Tls>>) -> PeerAuth {
        PeerAuth { tls, ..self }
    }

    /// The opener's transport: TLS over `stream` when the cluster uses it.
    pub async fn connect_stream(&self, stream: TcpStream) -> Result<Box<dyn PeerIo>, PeerError> {
        let Some(tls) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let config = tls
            .cluster_client()
            .ok_or_else(|| PeerError::Io("--tls-cluster needs --tls-ca-cert-file".into()))?;
        let name = ServerName::try_from(PEER_SERVER_NAME)
            .map_err(|e| PeerError::Io(format!("server name: {e}")))?;
        let tls_stream = TlsConnector::from(config)
            .connect(name, stream)
            .await
            .map_err(|e| PeerError::Rejected(format!("TLS handshake with the peer failed: {e}")))?;
        Ok(Box::new(tls_stream))
    }

    /// The acceptor's transport: TLS over `stream` when the cluster uses it (the peer must
    /// present a certificate signed by the cluster CA).
    pub async fn accept_stream(&self, stream: TcpStream) -> Result<Box<dyn PeerIo>, String> {
        let Some(tls) = &self.tls else {
            return Ok(Box::new(stream));
        };
        let config = tls
            .cluster_server()
            .ok_or_else(|| "--tls-cluster needs --tls-ca-cert-file".to_string())?;
        let tls_stream = TlsAcceptor::from(config)
            .accept(stream)
            .await
            .map_err(|e| format!("TLS handshake failed: {e}"))?;
        Ok(Box::new(tls_stream))
    }

    /// The MAC of the handshake transcript from `side`'s point of view (None: no secret).
    fn transcript(
        &self,
        side: Side,
        hello: &Hello,
        acceptor_nonce: &Nonce,
    ) -> Option<Hmac<Sha256>> {
        // HMAC takes keys of any length: new_from_slice cannot fail here.
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.as_ref()?).ok()?;
        let label: &[u8] = match side {
            Side::Opener => b"palisade peer handshake v3: opener",
            Side::Acceptor => b"palisade peer handshake v3: acceptor",
        };
        mac.update(label);
        mac.update(&hello.proto.to_be_bytes());
        mac.update(&hello.cluster_id.to_be_bytes());
        mac.update(&hello.from.to_be_bytes());
        mac.update(&hello.target.to_be_bytes());
        mac.update(&hello.nonce);
        mac.update(acceptor_nonce);
        Some(mac)
    }

    fn proof(&self, side: Side, hello: &Hello, acceptor_nonce: &Nonce) -> Option<Proof> {
        self.transcript(side, hello, acceptor_nonce)
            .map(|mac| mac.finalize().into_bytes().into())
    }

    /// Checks the proof that `side` sent, in constant time; `Err` says why it fails.
    fn check(
        &self,
        side: Side,
        hello: &Hello,
        acceptor_nonce: &Nonce,
        got: Option<Proof>,
    ) -> Result<(), &'static str> {
        match (self.transcript(side, hello, acceptor_nonce), got) {
            (None, None) => Ok(()),
            // The other side holds a secret this node lacks: refuse too, so that a
            // misconfigured pair fails loudly on both ends.
            (None, Some(_)) => Err("the peer uses a cluster secret and this node has none"),
            (Some(_), None) => {
                Err("the peer did not prove the cluster secret (it has none configured)")
            }
            // verify_slice compares in constant time.
            (Some(mac), Some(got)) => mac.verify_slice(&got).map_err(|_| {
                "wrong cluster secret: the peer's proof does not match this node's secret"
            }),
        }
    }

    /// The opener's half: runs the handshake on a fresh connection to `target`.
    pub async fn open(
        &self,
        framed: &mut PeerFramed,
        cluster_id: u64,
        from: NodeId,
        target: NodeId,
    ) -> Result<(), PeerError> {
        framed.codec_mut().set_max_frame_length(MAX_HANDSHAKE_FRAME);
        let hello = Hello {
            proto: PROTOCOL_VERSION,
            cluster_id,
            from,
            target,
            nonce: rand::random(),
        };
        send(framed, &hello).await?;
        let (nonce, proof) = match recv(framed).await? {
            Handshake::Challenge { nonce, proof } => (nonce, proof),
            Handshake::Refused(why) => return Err(PeerError::Rejected(why)),
            other => {
                return Err(PeerError::Io(format!(
                    "unexpected handshake frame {other:?}"
                )))
            }
        };
        if let Err(why) = self.check(Side::Acceptor, &hello, &nonce, proof) {
            // Tell the acceptor too, so that both logs say what is wrong.
            let _ = send(framed, &Handshake::Refused(why.into())).await;
            return Err(PeerError::Rejected(format!("node {target}: {why}")));
        }
        send(
            framed,
            &Handshake::Proof(self.proof(Side::Opener, &hello, &nonce)),
        )
        .await?;
        match recv(framed).await? {
            Handshake::Welcome => {}
            Handshake::Refused(why) => return Err(PeerError::Rejected(why)),
            other => {
                return Err(PeerError::Io(format!(
                    "unexpected handshake frame {other:?}"
                )))
            }
        }
        framed.codec_mut().set_max_frame_length(MAX_FRAME);
        Ok(())
    }

    /// The acceptor's half; `me` is this node's id. Returns the opener's hello, or why the
    /// connection is refused (the opener has been told when it can be).
    pub async fn accept(&self, framed: &mut PeerFramed, me: NodeId) -> Result<Hello, String> {
        framed.codec_mut().set_max_frame_length(MAX_HANDSHAKE_FRAME);
        let first = match framed.next().await {
            Some(Ok(frame)) => frame,
            Some(Err(e)) => return Err(format!("handshake: {e}")),
            None => return Err("closed before the handshake".into()),
        };
        // The whole frame must be a hello: an envelope sent without a handshake must not
        // pass for one because its first bytes happen to decode.
        let hello: Hello = match postcard::take_from_bytes(&first) {
            Ok((h, [])) => h,
            _ => {
                // Every peer frame since version 1 starts with the sender's version.
                return Err(match postcard::take_from_bytes::<u32>(&first) {
                    Ok((v, _)) if v != PROTOCOL_VERSION && v < 100 => format!(
                        "peer protocol version {v}, this node speaks {PROTOCOL_VERSION}: nodes of different Palisade versions cannot form one cluster"
                    ),
                    _ => "not a peer handshake".into(),
                });
            }
        };
        let refuse = |why: String| async move { Err::<Hello, String>(why) };
        if hello.proto != PROTOCOL_VERSION {
            let why = format!(
                "peer protocol version {} from node {}, this node speaks {PROTOCOL_VERSION}",
                hello.proto, hello.from
            );
            let _ = send(framed, &Handshake::Refused(why.clone())).await;
            return refuse(why).await;
        }
        if hello.target != me {
            let why = format!("this is node {me}, not node {}", hello.target);
            let _ = send(framed, &Handshake::Refused(why.clone())).await;
            return refuse(why).await;
        }
        let nonce: Nonce = rand::random();
        let challenge = Handshake::Challenge {
            nonce,
            proof: self.proof(Side::Acceptor, &hello, &nonce),
        };
        send(framed, &challenge).await.map_err(|e| e.to_string())?;
        let proof = match recv(framed).await.map_err(|e| e.to_string())? {
            Handshake::Proof(p) => p,
            Handshake::Refused(why) => return Err(format!("the peer refused: {why}")),
            other => return Err(format!("unexpected handshake frame {other:?}")),
        };
        if let Err(why) = self.check(Side::Opener, &hello, &nonce, proof) {
            let _ = send(framed, &Handshake::Refused(why.into())).await;
            return Err(why.into());
        }
        send(framed, &Handshake::Welcome)
            .await
            .map_err(|e| e.to_string())?;
        framed.codec_mut().set_max_frame_length(MAX_FRAME);
        Ok(hello)
    }
}

async fn send<T: Serialize>(framed: &mut PeerFramed, msg: &T) -> Result<(), PeerError> {
    let bytes = postcard::to_allocvec(msg).map_err(|e| PeerError::Io(format!("encode: {e}")))?;
    framed
        .send(bytes::Bytes::from(bytes))
        .await
        .map_err(|e| PeerError::Io(e.to_string()))
}

async fn recv(framed: &mut PeerFramed) -> Result<Handshake, PeerError> {
    match framed.next().await {
        Some(Ok(frame)) => postcard::from_bytes(&frame)
            .map_err(|e| PeerError::Io(format!("undecodable handshake frame: {e}"))),
        Some(Err(e)) => Err(PeerError::Io(e.to_string())),
        None => Err(PeerError::Io(
            "connection closed during the handshake".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use tokio_util::codec::Framed;

    use super::*;
    use crate::raft::protocol::{codec, PeerIo};

    fn pair() -> (PeerFramed, PeerFramed) {
        let (a, b) = tokio::io::duplex(64 << 10);
        let a: Box<dyn PeerIo> = Box::new(a);
        let b: Box<dyn PeerIo> = Box::new(b);
        (Framed::new(a, codec()), Framed::new(b, codec()))
    }

    fn secret(s: &str) -> PeerAuth {
        PeerAuth::new(Some(s.as_bytes().to_vec()))
    }

    /// Runs both halves: node 1 opens to node 2.
    async fn handshake(
        opener: PeerAuth,
        acceptor: PeerAuth,
    ) -> (Result<(), PeerError>, Result<Hello, String>) {
        let (mut a, mut b) = pair();
        tokio::join!(opener.open(&mut a, 7, 1, 2), acceptor.accept(&mut b, 2))
    }

    #[tokio::test]
    async fn the_same_secret_opens_the_connection_both_ways() {
        let (o, a) = handshake(
            secret("s3cret-s3cret-s3cret"),
            secret("s3cret-s3cret-s3cret"),
        )
        .await;
        assert!(o.is_ok(), "{o:?}");
        let hello = a.expect("accepted");
        assert_eq!((hello.from, hello.target, hello.cluster_id), (1, 2, 7));
        let (o, a) = handshake(PeerAuth::default(), PeerAuth::default()).await;
        assert!(o.is_ok() && a.is_ok(), "{o:?} {a:?}");
    }

    #[tokio::test]
    async fn a_wrong_or_missing_secret_is_refused_on_both_sides_with_a_reason() {
        let cases = [
            (
                secret("right-right-right-right"),
                secret("wrong-wrong-wrong-wrong"),
                "wrong cluster secret",
            ),
            (
                PeerAuth::default(),
                secret("right-right-right-right"),
                "uses a cluster secret and this node has none",
            ),
            (
                secret("right-right-right-right"),
                PeerAuth::default(),
                "did not prove the cluster secret",
            ),
        ];
        for (opener, acceptor, why) in cases {
            let (o, a) = handshake(opener, acceptor).await;
            let o = o.expect_err("opener must fail").to_string();
            let a = a.expect_err("acceptor must fail");
            assert!(
                o.contains(why) || a.contains(why),
                "{why}: opener {o}, acceptor {a}"
            );
        }
    }

    #[tokio::test]
    async fn a_frame_of_the_previous_protocol_is_refused_by_version() {
        let (mut a, mut b) = pair();
        // A version 2 node's first frame is an envelope: its first field is the version.
        let old = postcard::to_allocvec(&(2u32, 7u64, 1u64, 2u64, 0u8)).expect("encode");
        a.send(bytes::Bytes::from(old)).await.expect("send");
        let why = secret("right-right-right-right")
            .accept(&mut b, 2)
            .await
            .expect_err("refused");
        let want = format!("peer protocol version 2, this node speaks {PROTOCOL_VERSION}");
        assert!(why.contains(&want), "{why}");
    }

    #[tokio::test]
    async fn nothing_large_is_buffered_before_the_handshake() {
        let (mut a, mut b) = pair();
        a.send(bytes::Bytes::from(vec![0u8; MAX_HANDSHAKE_FRAME + 1]))
            .await
            .expect("send");
        let why = PeerAuth::default()
            .accept(&mut b, 2)
            .await
            .expect_err("refused");
        assert!(why.contains("frame size too big"), "{why}");
    }

    #[tokio::test]
    async fn a_proof_from_one_connection_does_not_open_another() {
        // A man in the middle relays node 1's hello to node 2, but cannot answer node 2's
        // fresh nonce with the proof node 1 computed for another nonce.
        let right = secret("right-right-right-right");
        let hello = Hello {
            proto: PROTOCOL_VERSION,
            cluster_id: 7,
            from: 1,
            target: 2,
            nonce: [1; 32],
        };
        let old_nonce = [2u8; 32];
        let old_proof = right.proof(Side::Opener, &hello, &old_nonce);
        assert!(right
            .check(Side::Opener, &hello, &old_nonce, old_proof)
            .is_ok());
        assert!(right
            .check(Side::Opener, &hello, &[3; 32], old_proof)
            .is_err());
        // Nor can the acceptor's proof pass as the opener's (reflection).
        let reflected = right.proof(Side::Acceptor, &hello, &old_nonce);
        assert!(right
            .check(Side::Opener, &hello, &old_nonce, reflected)
            .is_err());
        // The identity is bound too: the same proof for another target fails.
        let other = Hello { target: 3, ..hello };
        assert!(right
            .check(Side::Opener, &other, &old_nonce, old_proof)
            .is_err());
    }
}
