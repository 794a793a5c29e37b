//! TLS for the store's connections, read from the URL as libpq reads it:
//! `sslmode` (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`)
//! and `sslrootcert`.
//!
//! tokio-postgres reads only the first three modes and no root
//! certificate, so this module takes both parameters out of the URL,
//! hands the rest to tokio-postgres (with the mode it knows), and makes
//! the rustls connector that checks the server as the URL asks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use percent_encoding::percent_decode_str;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

/// A URL read: the driver's configuration and the TLS connector for it.
pub(crate) struct Connect {
    pub(crate) config: Config,
    pub(crate) tls: MakeRustlsConnect,
}

/// Reads `url` (the URL or the key-value form).
pub(crate) fn read(url: &str) -> Result<Connect, String> {
    let (config, params) = driver_config(url)?;
    let check = check_of(&params)?;
    let tls = connector(check, params.root.as_deref())?;
    Ok(Connect { config, tls })
}

/// The driver's configuration from `url` without its TLS parameters (but
/// with the mode the driver knows), and those parameters.
fn driver_config(url: &str) -> Result<(Config, Params), String> {
    let (rest, params) = split(url);
    let driver_mode = match params.mode.as_deref() {
        None => None,
        Some("disable") => Some("disable"),
        Some("prefer") => Some("prefer"),
        Some(_) => Some("require"),
    };
    let rest = match driver_mode {
        Some(mode) => with_param(&rest, "sslmode", mode),
        None => rest,
    };
    let config: Config = rest
        .parse()
        .map_err(|e| format!("{e} (expected postgres://user:password@host:port/database)"))?;
    Ok((config, params))
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    /// Not at all: the connection is encrypted against eavesdroppers only
    /// (libpq's `prefer` and `require`).
    Nothing,
    /// Signed by a trusted root, whatever name it bears (`verify-ca`, and
    /// `require` with an `sslrootcert`, as in libpq).
    Chain,
    /// Signed by a trusted root and issued for the host connected to
    /// (`verify-full`).
    Full,
}

/// The TLS parameters taken out of a URL.
#[derive(Debug, Default, PartialEq, Eq)]
struct Params {
    mode: Option<String>,
    root: Option<String>,
    /// A libpq TLS parameter this store does not support.
    unsupported: Option<String>,
}

fn check_of(params: &Params) -> Result<Check, String> {
    if let Some(key) = &params.unsupported {
        return Err(format!(
            "`{key}` is not supported: client certificates are not implemented; \
             authenticate with a password (sslmode and sslrootcert are supported)"
        ));
    }
    Ok(match params.mode.as_deref() {
        Some("require") if params.root.is_some() => Check::Chain,
        None | Some("disable" | "prefer" | "require") => Check::Nothing,
        Some("verify-ca") => Check::Chain,
        Some("verify-full") => Check::Full,
        Some(other) => {
            return Err(format!(
                "sslmode `{other}` is not supported: use disable, prefer, require, verify-ca or verify-full"
            ));
        }
    })
}

/// Parameters taken out of the URL and handled here, and libpq's others
/// that would otherwise reach the driver as unknown options.
fn is_taken(key: &str) -> bool {
    matches!(
        key,
        "sslmode" | "sslrootcert" | "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir"
    )
}

fn take(params: &mut Params, key: &str, value: String) {
    match key {
        "sslmode" => params.mode = Some(value),
        "sslrootcert" => params.root = Some(value),
        _ => params.unsupported = Some(key.to_owned()),
    }
}

/// `url` without its TLS parameters, and those parameters.
fn split(url: &str) -> (String, Params) {
    let mut params = Params::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_owned(), params);
        };
        let mut kept = Vec::new();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode_str(key).decode_utf8_lossy();
            if is_taken(&key) {
                take(
                    &mut params,
                    &key,
                    percent_decode_str(value).decode_utf8_lossy().into_owned(),
                );
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return (rest, params);
    }
    // The key-value form: `key=value` pairs apart by whitespace, a value
    // quoted with '...' when it holds spaces, `\` escaping the next char.
    let mut rest = String::with_capacity(url.len());
    let mut pairs = KeyValues { text: url, at: 0 };
    while let Some(token) = pairs.next_pair() {
        match token {
            Token::Pair { key, value, .. } if is_taken(key) => take(&mut params, key, value),
            Token::Pair { span, .. } => {
                if !rest.is_empty() {
                    rest.push(' ');
                }
                rest.push_str(&url[span]);
            }
            // Not a pair: the driver names the mistake.
            Token::Malformed => return (url.to_owned(), Params::default()),
        }
    }
    (rest, params)
}

/// What the key-value form holds next.
enum Token<'a> {
    /// `key=value`: the value unescaped, and the pair's span in the text.
    Pair {
        key: &'a str,
        value: String,
        span: std::ops::Range<usize>,
    },
    /// Text that is not a pair.
    Malformed,
}

/// A reader of the key-value form, as tokio-postgres reads it.
struct KeyValues<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> KeyValues<'a> {
    /// The next token, `None` at the end.
    fn next_pair(&mut self) -> Option<Token<'a>> {
        self.skip_spaces();
        let start = self.at;
        if start == self.text.len() {
            return None;
        }
        let key_end = self.text[start..]
            .find(|c: char| c == '=' || c.is_whitespace())
            .map_or(self.text.len(), |i| start + i);
        let key = &self.text[start..key_end];
        self.at = key_end;
        self.skip_spaces();
        if key.is_empty() || !self.text[self.at..].starts_with('=') {
            return Some(Token::Malformed);
        }
        self.at += 1;
        self.skip_spaces();
        let mut value = String::new();
        let mut chars = self.text[self.at..].char_indices();
        let quoted = self.text[self.at..].starts_with('\'');
        if quoted {
            chars.next();
        }
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, escaped)) => value.push(escaped),
                    None => return Some(Token::Malformed),
                },
                '\'' if quoted => {
                    end = Some(self.at + i + 1);
                    break;
                }
                c if !quoted && c.is_whitespace() => {
                    end = Some(self.at + i);
                    break;
                }
                c => value.push(c),
            }
        }
        let end = match end {
            Some(end) => end,
            None if quoted => return Some(Token::Malformed),
            None => self.text.len(),
        };
        self.at = end;
        Some(Token::Pair {
            key,
            value,
            span: start..end,
        })
    }

    fn skip_spaces(&mut self) {
        let rest = &self.text[self.at..];
        self.at += rest.len() - rest.trim_start().len();
    }
}

/// `url` with `key=value` added.
fn with_param(url: &str, key: &str, value: &str) -> String {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}{key}={value}")
    } else if url.trim().is_empty() {
        format!("{key}={value}")
    } else {
        format!("{url} {key}={value}")
    }
}

/// The rustls connector that checks the server as `check` says, against
/// the roots `root` names.
fn connector(check: Check, root: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let config = match check {
        Check::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Unchecked(provider)))
            .with_no_client_auth(),
        Check::Chain | Check::Full => {
            let roots = roots(root)?;
            let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS: {e}"))?;
            if check == Check::Full {
                builder.with_webpki_verifier(verifier).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(verifier)))
                    .with_no_client_auth()
            }
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

/// The trusted roots: the file `sslrootcert` names, the system's for
/// `sslrootcert=system`, and without it `~/.postgresql/root.crt` where it
/// exists (libpq's default), else the system's.
fn roots(root: Option<&str>) -> Result<RootCertStore, String> {
    match root {
        Some("system") => system_roots(),
        Some(path) => file_roots(Path::new(path)),
        None => match default_root_file() {
            Some(path) => file_roots(&path),
            None => system_roots(),
        },
    }
}

fn default_root_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home).join(".postgresql").join("root.crt");
    path.is_file().then_some(path)
}

fn file_roots(path: &Path) -> Result<RootCertStore, String> {
    let named = || format!("sslrootcert `{}`", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", named()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", named()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", named()));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("{}: not a usable root certificate: {e}", named()))?;
    }
    Ok(roots)
}

fn system_roots() -> Result<RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(found.certs);
    if roots.is_empty() {
        let why = found
            .errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(format!(
            "no system root certificates found{}; name the server's CA with sslrootcert=PATH",
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({why})")
            }
        ));
    }
    Ok(roots)
}

/// libpq's `require`: any certificate, so the link is encrypted but the
/// server not authenticated. The handshake's signatures are still checked
/// (a peer must hold the key of the certificate it shows).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name the
/// certificate bears is not compared with the host's. (webpki checks the
/// name last, after the chain, so only a name mismatch is forgiven.)
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(mode: Option<&str>, root: Option<&str>) -> Params {
        Params {
            mode: mode.map(Into::into),
            root: root.map(Into::into),
            unsupported: None,
        }
    }

    #[test]
    fn url_form_loses_its_tls_parameters_and_keeps_the_rest() {
        let (rest, p) = split(
            "postgres://u:p@db:5432/app?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca%20b.pem",
        );
        assert_eq!(rest, "postgres://u:p@db:5432/app?application_name=x");
        assert_eq!(p, params(Some("verify-full"), Some("/etc/ca b.pem")));
        let (rest, p) = split("postgresql://db/app?sslmode=require");
        assert_eq!(rest, "postgresql://db/app");
        assert_eq!(p, params(Some("require"), None));
        let (rest, p) = split("postgres://db/app");
        assert_eq!((rest.as_str(), p), ("postgres://db/app", Params::default()));
    }

    #[test]
    fn key_value_form_loses_its_tls_parameters_and_keeps_the_rest() {
        let (rest, p) = split(
            "host=db  sslrootcert = '/etc/my ca.pem' user='a b' sslmode=verify-ca password=x\\ y",
        );
        assert_eq!(rest, "host=db user='a b' password=x\\ y");
        assert_eq!(p, params(Some("verify-ca"), Some("/etc/my ca.pem")));
        // Not pairs: left whole for the driver to name the mistake.
        for text in ["host", "host=db sslmode='verify-full", "=x"] {
            assert_eq!(split(text), (text.to_owned(), Params::default()), "{text}");
        }
    }

    #[test]
    fn the_driver_gets_a_mode_it_knows() {
        let read = |url: &str| driver_config(url).map(|(c, _)| format!("{:?}", c.get_ssl_mode()));
        assert_eq!(
            read("postgres://db/app?sslmode=verify-ca&sslrootcert=system").unwrap(),
            "Require"
        );
        assert_eq!(read("host=db sslmode=verify-full").unwrap(), "Require");
        assert_eq!(read("host=db sslmode=disable").unwrap(), "Disable");
        assert_eq!(read("host=db").unwrap(), "Prefer");
        assert_eq!(read("postgres://db").unwrap(), "Prefer");
    }

    #[test]
    fn modes_check_as_libpq_does() {
        let check = |mode, root| check_of(&params(mode, root));
        assert_eq!(check(None, None), Ok(Check::Nothing));
        assert_eq!(check(Some("prefer"), Some("ca.pem")), Ok(Check::Nothing));
        assert_eq!(check(Some("require"), None), Ok(Check::Nothing));
        assert_eq!(check(Some("require"), Some("ca.pem")), Ok(Check::Chain));
        assert_eq!(check(Some("verify-ca"), None), Ok(Check::Chain));
        assert_eq!(check(Some("verify-full"), None), Ok(Check::Full));
        let e = check(Some("allow"), None).unwrap_err();
        assert!(e.contains("sslmode `allow` is not supported"), "{e}");
        let mut p = params(None, None);
        take(&mut p, "sslcert", "client.pem".into());
        let e = check_of(&p).unwrap_err();
        assert!(e.contains("`sslcert` is not supported"), "{e}");
    }

    #[test]
    fn a_root_file_that_is_missing_or_empty_is_named() {
        let e = read("host=db sslmode=verify-full sslrootcert=/nonexistent/ca.pem")
            .err()
            .unwrap();
        assert!(e.contains("sslrootcert `/nonexistent/ca.pem`"), "{e}");
        let dir = std::env::temp_dir().join(format!("kesoku-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = read(&format!(
            "host=db sslmode=verify-ca sslrootcert={}",
            empty.display()
        ))
        .err()
        .unwrap();
        assert!(e.contains("holds no PEM certificate"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
