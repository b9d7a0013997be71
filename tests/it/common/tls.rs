//! Certificates made at test time (rcgen): a cluster CA, a node certificate it signs (valid
//! as server and as client, for `localhost` and 127.0.0.1), a client certificate it signs,
//! and a client certificate signed by an unrelated CA. `src/tls/tests.rs` includes this file
//! too, so it uses nothing but std and rcgen.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

/// A CA's certificate and key, to sign with.
pub struct Ca {
    cert: Certificate,
    key: KeyPair,
}

impl Ca {
    /// A new self-signed CA called `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("generate a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("self-sign the CA");
        Ca { cert, key }
    }

    /// The CA certificate as PEM.
    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses) with the usages given, and
    /// its key, both PEM.
    pub fn issue(&self, cn: &str, names: &[&str], server: bool, client: bool) -> (String, String) {
        let key = KeyPair::generate().expect("generate a key");
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("certificate params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if server {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if client {
            params
                .extended_key_usages
                .push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .expect("sign a certificate");
        (cert.pem(), key.serialize_pem())
    }
}

/// The files of one test PKI, all in one directory.
pub struct TestPki {
    /// The directory that holds them.
    pub dir: PathBuf,
    /// The cluster CA (`ca.crt`), to issue more certificates (a reload test's new one).
    pub ca: Ca,
}

impl TestPki {
    /// Writes into `dir`: `ca.crt`; `node.crt`/`node.key` (server and client usage, for
    /// localhost and 127.0.0.1); `client.crt`/`client.key` (client usage); and
    /// `other-ca.crt` with `stranger.crt`/`stranger.key`, a client certificate of an
    /// unrelated CA.
    pub fn new(dir: &Path) -> TestPki {
        std::fs::create_dir_all(dir).expect("create the PKI directory");
        let ca = Ca::new("palisade test CA");
        let pki = TestPki {
            dir: dir.to_path_buf(),
            ca,
        };
        pki.write("ca.crt", &pki.ca.pem());
        pki.issue_node("node", "node 1");
        let (cert, key) = pki.ca.issue("client", &[], false, true);
        pki.write("client.crt", &cert);
        pki.write("client.key", &key);
        let other = Ca::new("unrelated CA");
        pki.write("other-ca.crt", &other.pem());
        let (cert, key) = other.issue("stranger", &["localhost", "127.0.0.1"], true, true);
        pki.write("stranger.crt", &cert);
        pki.write("stranger.key", &key);
        pki
    }

    /// Issues a node certificate (server and client usage) with common name `cn` into
    /// `<stem>.crt`/`<stem>.key`, replacing those files.
    pub fn issue_node(&self, stem: &str, cn: &str) {
        let (cert, key) = self
            .ca
            .issue(cn, &["localhost", "127.0.0.1", "::1"], true, true);
        self.write(&format!("{stem}.crt"), &cert);
        self.write(&format!("{stem}.key"), &key);
    }

    /// Writes `text` to `name` in the directory.
    pub fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).expect("write a PKI file");
    }

    /// The path of `name` in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `path(name)` as a string, for command lines.
    pub fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}
