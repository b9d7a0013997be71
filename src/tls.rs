//! TLS: the rustls configurations built from the certificate, key and CA files, for the
//! client port and for the peer port's mutual TLS, kept current across SIGHUP reloads.
//!
//! The API is small: [`Tls::load`] reads the files once and builds every configuration,
//! [`Tls::reload`] reads them again and swaps the configurations only if all of them built,
//! and the getters ([`Tls::clients`], [`Tls::cluster_server`], [`Tls::cluster_client`]) hand
//! out the current ones. A connection keeps the configuration it was accepted with, so a
//! reload never drops it; the next handshake uses the new files.
//!
//! The crypto provider is rustls's `ring`, named explicitly in every builder, so no
//! process-wide default has to be installed and nothing depends on which provider another
//! crate enabled.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use serde::{Deserialize, Serialize};

/// `tls-auth-clients`: whether a client must present a certificate signed by the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum AuthClients {
    /// A client without a valid certificate is refused (Redis's default).
    #[default]
    Yes,
    /// No certificate is asked for.
    No,
    /// A certificate is asked for; a client may send none, but one it sends must verify.
    Optional,
}

impl AuthClients {
    /// Redis's word for it (CONFIG GET).
    pub fn word(self) -> &'static str {
        match self {
            AuthClients::Yes => "yes",
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
        }
    }
}

impl fmt::Display for AuthClients {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// The files a node's TLS is built from (`tls-cert-file`, `tls-key-file`,
/// `tls-ca-cert-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Files {
    /// PEM certificate chain, the node's own certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the first certificate.
    pub key: PathBuf,
    /// PEM CA certificates: clients' certificates (and, on the peer port, every node's)
    /// must chain to one of them. None: no client certificates are verified.
    pub ca: Option<PathBuf>,
}

/// Why a TLS configuration could not be built. The text names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{what} {path}: {why}")]
    File {
        /// Which setting the file belongs to.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// Client certificates are to be verified but there is no CA to verify them with.
    #[error("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!")]
    NoCa,
    /// rustls refused the certificates or key (e.g. a key that does not match).
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The CA could not be made into a verifier.
    #[error("TLS CA {path}: {why}")]
    Verifier {
        /// The CA file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
}

/// Every configuration built from one reading of the files.
struct Configs {
    clients: Arc<ServerConfig>,
    cluster: Option<(Arc<ServerConfig>, Arc<ClientConfig>)>,
}

/// A node's TLS: the files, how clients are authenticated, and the current configurations.
pub struct Tls {
    files: Files,
    auth: AuthClients,
    current: RwLock<Arc<Configs>>,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("files", &self.files)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Reads the files and builds the configurations; the cluster ones only when there is
    /// a CA (mutual TLS needs one).
    pub fn load(files: Files, auth: AuthClients) -> Result<Tls, TlsError> {
        let configs = build(&files, auth)?;
        Ok(Tls {
            files,
            auth,
            current: RwLock::new(Arc::new(configs)),
        })
    }

    /// Reads the files again. On success every later handshake uses the new certificates;
    /// on failure the old configurations stay and the error says which file was bad.
    pub fn reload(&self) -> Result<(), TlsError> {
        let configs = Arc::new(build(&self.files, self.auth)?);
        match self.current.write() {
            Ok(mut current) => *current = configs,
            Err(poisoned) => *poisoned.into_inner() = configs,
        }
        Ok(())
    }

    fn configs(&self) -> Arc<Configs> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The files this was loaded from.
    pub fn files(&self) -> &Files {
        &self.files
    }

    /// The current configuration of the client port's TLS listener.
    pub fn clients(&self) -> Arc<ServerConfig> {
        self.configs().clients.clone()
    }

    /// The current server side of the peer port's mutual TLS (see [`cluster_server_config`]);
    /// None without a CA.
    pub fn cluster_server(&self) -> Option<Arc<ServerConfig>> {
        self.configs().cluster.as_ref().map(|(s, _)| s.clone())
    }

    /// The current client side of the peer port's mutual TLS (see [`cluster_client_config`]);
    /// None without a CA.
    pub fn cluster_client(&self) -> Option<Arc<ClientConfig>> {
        self.configs().cluster.as_ref().map(|(_, c)| c.clone())
    }
}

fn build(files: &Files, auth: AuthClients) -> Result<Configs, TlsError> {
    let clients = Arc::new(client_port_config(files, auth)?);
    let cluster = match files.ca {
        Some(_) => Some((
            Arc::new(cluster_server_config(files)?),
            Arc::new(cluster_client_config(files)?),
        )),
        None => None,
    };
    Ok(Configs { clients, cluster })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(what: &'static str, path: &Path, why: impl fmt::Display) -> TlsError {
    TlsError::File {
        what,
        path: path.to_path_buf(),
        why: why.to_string(),
    }
}

/// The certificates of a PEM file (at least one).
fn certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no certificate in the file"));
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error("tls-key-file", path, e))
}

/// The CA file's certificates as trust anchors.
fn roots(files: &Files) -> Result<(PathBuf, Arc<RootCertStore>), TlsError> {
    let path = files.ca.clone().ok_or(TlsError::NoCa)?;
    let mut store = RootCertStore::empty();
    for cert in certs("tls-ca-cert-file", &path)? {
        store
            .add(cert)
            .map_err(|e| file_error("tls-ca-cert-file", &path, e))?;
    }
    Ok((path, Arc::new(store)))
}

/// The client port's configuration: the node's certificate, and client certificates asked
/// for and checked against the CA as `auth` says.
pub fn client_port_config(files: &Files, auth: AuthClients) -> Result<ServerConfig, TlsError> {
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match auth {
        AuthClients::No => builder.with_no_client_auth(),
        AuthClients::Yes | AuthClients::Optional => {
            let (path, roots) = roots(files)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = if auth == AuthClients::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier.build().map_err(|e| TlsError::Verifier {
                path,
                why: e.to_string(),
            })?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    Ok(builder.with_single_cert(certs("tls-cert-file", &files.cert)?, key(&files.key)?)?)
}

/// The peer port's server side: presents the node's certificate and requires the connecting
/// node to present one that chains to the CA. Every certificate the cluster CA signs is a
/// cluster member: the peer's name is not checked.
pub fn cluster_server_config(files: &Files) -> Result<ServerConfig, TlsError> {
    let (path, roots) = roots(files)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| TlsError::Verifier {
            path,
            why: e.to_string(),
        })?;
    Ok(ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs("tls-cert-file", &files.cert)?, key(&files.key)?)?)
}

/// The peer port's client side: presents the node's certificate and verifies the server's
/// chain against the CA, but not its host name, because peers are addressed by IP and any
/// node the CA signed is a member. Any [`ServerName`] may be passed to the connector (for
/// instance the peer's IP address); it is not checked.
pub fn cluster_client_config(files: &Files) -> Result<ClientConfig, TlsError> {
    let (_, roots) = roots(files)?;
    let algs = provider().signature_verification_algorithms;
    let verifier = Arc::new(SignedByClusterCa { roots, algs });
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(certs("tls-cert-file", &files.cert)?, key(&files.key)?)?)
}

/// Accepts a server certificate that chains to the cluster CA, whatever names it carries.
#[derive(Debug)]
struct SignedByClusterCa {
    roots: Arc<RootCertStore>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for SignedByClusterCa {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let cert = ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &cert,
            &self.roots,
            intermediates,
            now,
            self.algs.all,
        )?;
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

#[cfg(test)]
mod tests;
