//! Handshakes in memory between the configurations [`super`] builds, with certificates
//! made at test time by the same generator the integration tests use.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;

#[path = "../../tests/it/common/tls.rs"]
mod pki;

fn files(p: &pki::TestPki, stem: &str, ca: &str) -> Files {
    Files {
        cert: p.path(&format!("{stem}.crt")),
        key: p.path(&format!("{stem}.key")),
        ca: Some(p.path(ca)),
    }
}

fn setup() -> (tempfile::TempDir, pki::TestPki) {
    let dir = tempfile::tempdir().unwrap();
    let p = pki::TestPki::new(dir.path());
    (dir, p)
}

/// A client that trusts `ca` and presents no certificate.
fn anonymous_client(p: &pki::TestPki, ca: &str) -> ClientConfig {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(p.path(ca)).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A client that trusts `ca` and presents `stem`'s certificate.
fn client_with_cert(p: &pki::TestPki, stem: &str, ca: &str) -> ClientConfig {
    cluster_client_config(&files(p, stem, ca)).unwrap()
}

/// Runs a handshake, then one byte each way. Returns the server's and the client's outcome;
/// the client's carries the server certificate it saw.
async fn handshake(
    server: Arc<ServerConfig>,
    client: ClientConfig,
) -> (Result<(), String>, Result<Vec<u8>, String>) {
    let (a, b) = tokio::io::duplex(64 * 1024);
    let serve = async move {
        let mut s = TlsAcceptor::from(server)
            .accept(a)
            .await
            .map_err(|e| e.to_string())?;
        let mut byte = [0u8; 1];
        s.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
        s.write_all(&byte).await.map_err(|e| e.to_string())?;
        s.flush().await.map_err(|e| e.to_string())?;
        Ok(())
    };
    let connect = async move {
        let name = ServerName::try_from("localhost").unwrap();
        let mut c = TlsConnector::from(Arc::new(client))
            .connect(name, b)
            .await
            .map_err(|e| e.to_string())?;
        let seen = c.get_ref().1.peer_certificates().unwrap()[0].to_vec();
        c.write_all(b"x").await.map_err(|e| e.to_string())?;
        let mut byte = [0u8; 1];
        c.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
        Ok(seen)
    };
    tokio::join!(serve, connect)
}

fn der(p: &pki::TestPki, name: &str) -> Vec<u8> {
    CertificateDer::from_pem_file(p.path(name))
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn cluster_nodes_authenticate_each_other() {
    let (_d, p) = setup();
    let node = files(&p, "node", "ca.crt");
    let server = Arc::new(cluster_server_config(&node).unwrap());
    let (s, c) = handshake(server.clone(), cluster_client_config(&node).unwrap()).await;
    assert_eq!(s, Ok(()));
    assert_eq!(c, Ok(der(&p, "node.crt")));
    // The host name is not checked: the node certificate names localhost and 127.0.0.1,
    // and a connector given another name still verifies the chain only.
    let (a, b) = tokio::io::duplex(64 * 1024);
    let other_name = ServerName::try_from("10.9.9.9").unwrap();
    let connector = TlsConnector::from(Arc::new(cluster_client_config(&node).unwrap()));
    let (s, c) = tokio::join!(
        TlsAcceptor::from(server).accept(a),
        connector.connect(other_name, b)
    );
    assert!(s.is_ok() && c.is_ok(), "{:?} {:?}", s.err(), c.err());
}

#[tokio::test]
async fn cluster_server_refuses_strangers_and_anonymous_clients() {
    let (_d, p) = setup();
    let server = Arc::new(cluster_server_config(&files(&p, "node", "ca.crt")).unwrap());
    // A node whose certificate an unrelated CA signed (it trusts our CA, so only the
    // server's check can stop it).
    let (s, _) = handshake(server.clone(), client_with_cert(&p, "stranger", "ca.crt")).await;
    assert!(s.is_err(), "a stranger's certificate was accepted");
    let (s, _) = handshake(server, anonymous_client(&p, "ca.crt")).await;
    let e = s.unwrap_err();
    assert!(e.contains("certificate"), "{e}");
}

#[tokio::test]
async fn cluster_client_refuses_a_server_outside_the_ca() {
    let (_d, p) = setup();
    let stranger = files(&p, "stranger", "other-ca.crt");
    let server = Arc::new(cluster_server_config(&stranger).unwrap());
    let (_, c) = handshake(server, client_with_cert(&p, "node", "ca.crt")).await;
    let e = c.unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
}

#[tokio::test]
async fn client_port_auth_modes() {
    let (_d, p) = setup();
    let node = files(&p, "node", "ca.crt");
    let port = |auth| Arc::new(client_port_config(&node, auth).unwrap());
    let (s, _) = handshake(port(AuthClients::Yes), anonymous_client(&p, "ca.crt")).await;
    assert!(
        s.is_err(),
        "yes: a client without a certificate was accepted"
    );
    let (s, _) = handshake(
        port(AuthClients::Yes),
        client_with_cert(&p, "client", "ca.crt"),
    )
    .await;
    assert_eq!(s, Ok(()));
    let (s, _) = handshake(port(AuthClients::Optional), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(s, Ok(()));
    let stranger = client_with_cert(&p, "stranger", "ca.crt");
    let (s, _) = handshake(port(AuthClients::Optional), stranger).await;
    assert!(
        s.is_err(),
        "optional: a certificate that does not verify was accepted"
    );
    let (s, _) = handshake(port(AuthClients::No), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(s, Ok(()));
    // Verifying clients needs a CA; not asking for certificates does not.
    let no_ca = Files { ca: None, ..node };
    assert!(matches!(
        client_port_config(&no_ca, AuthClients::Yes),
        Err(TlsError::NoCa)
    ));
    assert!(client_port_config(&no_ca, AuthClients::No).is_ok());
    let tls = Tls::load(no_ca, AuthClients::No).unwrap();
    assert!(tls.cluster_server().is_none() && tls.cluster_client().is_none());
}

#[tokio::test]
async fn reload_swaps_every_config_and_keeps_the_old_on_a_bad_file() {
    let (_d, p) = setup();
    let tls = Tls::load(files(&p, "node", "ca.crt"), AuthClients::Optional).unwrap();
    let old = der(&p, "node.crt");
    let (_, c) = handshake(tls.clients(), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(c, Ok(old.clone()));
    p.issue_node("node", "node 1, renewed");
    let new = der(&p, "node.crt");
    assert_ne!(old, new);
    tls.reload().unwrap();
    let (_, c) = handshake(tls.clients(), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(c, Ok(new.clone()));
    let cluster_server = tls.cluster_server().unwrap();
    let cluster_client = (*tls.cluster_client().unwrap()).clone();
    let (s, c) = handshake(cluster_server, cluster_client).await;
    assert_eq!((s, c), (Ok(()), Ok(new.clone())));
    // A key that is not PEM: the reload fails, naming the file, and nothing changes.
    p.write("node.key", "not a key\n");
    let e = tls.reload().unwrap_err().to_string();
    assert!(
        e.starts_with("tls-key-file ") && e.contains("node.key"),
        "{e}"
    );
    let (_, c) = handshake(tls.clients(), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(c, Ok(new.clone()));
    // A key of another certificate: rustls refuses the pair.
    std::fs::copy(p.path("client.key"), p.path("node.key")).unwrap();
    assert!(tls.reload().is_err());
    let (_, c) = handshake(tls.clients(), anonymous_client(&p, "ca.crt")).await;
    assert_eq!(c, Ok(new));
}

#[test]
fn missing_files_name_the_setting() {
    let files = Files {
        cert: "/nonexistent/node.crt".into(),
        key: "/nonexistent/node.key".into(),
        ca: None,
    };
    let e = Tls::load(files, AuthClients::No).unwrap_err().to_string();
    assert!(
        e.starts_with("tls-cert-file /nonexistent/node.crt: "),
        "{e}"
    );
}
