//! A blocking TLS client connection (rustls) that returns reply bytes exactly, like
//! [`super::Conn`], and shows which certificate the server presented.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::tls::TestPki;
use super::{encode, frame_len, local, words, IO_TIMEOUT};

/// A client configuration that trusts the PKI's `ca.crt` and presents `<stem>.crt` (None:
/// no certificate).
pub fn client_config(pki: &TestPki, stem: Option<&str>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(pki.path("ca.crt")).expect("read ca.crt") {
        roots.add(c.expect("a CA certificate")).expect("add the CA");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots);
    Arc::new(match stem {
        None => builder.with_no_client_auth(),
        Some(stem) => {
            let certs = CertificateDer::pem_file_iter(pki.path(&format!("{stem}.crt")))
                .expect("read the certificate")
                .collect::<Result<Vec<_>, _>>()
                .expect("parse the certificate");
            let key = PrivateKeyDer::from_pem_file(pki.path(&format!("{stem}.key")))
                .expect("read the key");
            builder
                .with_client_auth_cert(certs, key)
                .expect("client certificate")
        }
    })
}

/// One TLS connection to 127.0.0.1.
pub struct TlsConn {
    stream: StreamOwned<ClientConnection, TcpStream>,
    buf: Vec<u8>,
}

impl TlsConn {
    /// Connects to `port` and completes the handshake (for `localhost`).
    pub fn connect(port: u16, config: Arc<ClientConfig>) -> io::Result<TlsConn> {
        let tcp = TcpStream::connect(local(port))?;
        tcp.set_read_timeout(Some(IO_TIMEOUT))?;
        let name = ServerName::try_from("localhost").expect("server name");
        let conn = ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut stream = StreamOwned::new(conn, tcp);
        while stream.conn.is_handshaking() {
            stream.conn.complete_io(&mut stream.sock)?;
        }
        Ok(TlsConn {
            stream,
            buf: Vec::new(),
        })
    }

    /// The certificate the server presented (DER).
    pub fn server_cert(&self) -> Vec<u8> {
        self.stream
            .conn
            .peer_certificates()
            .expect("a server certificate")[0]
            .to_vec()
    }

    /// Sends one command given as words.
    pub fn send(&mut self, line: &str) -> io::Result<()> {
        self.stream.write_all(&encode(&words(line)))?;
        self.stream.flush()
    }

    /// Sends one command given as words and reads its reply (RESP`proto`).
    pub fn cmd(&mut self, line: &str, proto: u8) -> io::Result<Vec<u8>> {
        self.send(line)?;
        self.read_reply(proto)
    }

    /// Reads one complete reply; an error if the connection closes first.
    pub fn read_reply(&mut self, proto: u8) -> io::Result<Vec<u8>> {
        loop {
            match frame_len(&self.buf, proto) {
                Ok(Some(n)) => return Ok(self.buf.drain(..n).collect()),
                Ok(None) => {}
                Err(e) => return Err(io::Error::other(e)),
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stream.read(&mut chunk)? {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                n => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}
