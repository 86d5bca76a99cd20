//! `raftrain certs`: a throwaway certificate authority, one certificate every process of a
//! test or demo cluster serves and presents (server and client use, for the given names), and
//! a random cluster token. `demo --secure` uses it too.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use platform::security::SecurityFiles;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

#[derive(Debug, clap::Args)]
pub(crate) struct CertsArgs {
    /// The directory to write ca.pem, node.pem, node.key and token into (created; files that
    /// exist are not overwritten).
    #[arg(long)]
    out: PathBuf,
    /// A host name or IP address the certificate is valid for; repeat for more.
    #[arg(long = "name", default_values_t = default_names())]
    names: Vec<String>,
}

fn default_names() -> Vec<String> {
    vec!["localhost".to_string(), "127.0.0.1".to_string()]
}

pub(crate) fn run(args: &CertsArgs) -> anyhow::Result<()> {
    let files = generate(&args.out, &args.names)?;
    println!("wrote a throwaway CA, a certificate for {} and a token; use:", args.names.join(", "));
    println!("  {}", files.to_args().join(" "));
    Ok(())
}

/// Writes the CA, a certificate and key for `names`, and the token under `dir`; returns the
/// flags that name them.
pub fn generate(dir: &Path, names: &[String]) -> anyhow::Result<SecurityFiles> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let (ca_pem, issuer) = certificate_authority()?;
    let (cert_pem, key_pem) = node_certificate(&issuer, names)?;
    let files = SecurityFiles {
        tls_cert: Some(dir.join("node.pem")),
        tls_key: Some(dir.join("node.key")),
        tls_ca: Some(dir.join("ca.pem")),
        token_file: Some(dir.join("token")),
    };
    write_private(&dir.join("ca.pem"), ca_pem.as_bytes())?;
    write_private(&dir.join("node.pem"), cert_pem.as_bytes())?;
    write_private(&dir.join("node.key"), key_pem.as_bytes())?;
    write_private(&dir.join("token"), random_token().as_bytes())?;
    Ok(files)
}

fn certificate_authority() -> anyhow::Result<(String, Issuer<'static, KeyPair>)> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "raftrain throwaway CA");
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().context("generate the CA key")?;
    let certificate = params.self_signed(&key).context("sign the CA certificate")?;
    Ok((certificate.pem(), Issuer::new(params, key)))
}

fn node_certificate(
    issuer: &Issuer<'static, KeyPair>,
    names: &[String],
) -> anyhow::Result<(String, String)> {
    let mut params = CertificateParams::new(names.to_vec())
        .with_context(|| format!("--name {}: not a host name or IP address", names.join(",")))?;
    params.distinguished_name.push(DnType::CommonName, "raftrain node");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().context("generate the node key")?;
    let certificate = params.signed_by(&key, issuer).context("sign the node certificate")?;
    Ok((certificate.pem(), key.serialize_pem()))
}

/// 32 random bytes as hex: 64 visible characters.
fn random_token() -> String {
    (0..32).map(|_| format!("{:02x}", rand::random::<u8>())).collect()
}

/// Creates `path` readable by this user only.
fn write_private(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    file.write_all(contents).with_context(|| format!("write {}", path.display()))
}
