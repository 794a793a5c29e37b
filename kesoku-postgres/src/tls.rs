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
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_name};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
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
    let plan = plan(&params, default_root_file())?;
    let tls = connector(&plan)?;
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
    /// (libpq's `prefer` and `require` with no root certificate).
    Nothing,
    /// Signed by a trusted root, whatever name it bears (`verify-ca`, and
    /// `prefer` or `require` where a root certificate file exists, as in
    /// libpq).
    Chain,
    /// Signed by a trusted root and issued for the host connected to
    /// (`verify-full`, and `sslrootcert=system`).
    Full,
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Roots {
    /// A PEM file; a certificate in it is also trusted as itself (a
    /// self-signed server certificate named as its own root).
    File(PathBuf),
    /// The system's roots (`sslrootcert=system`).
    System,
}

/// How a URL's TLS parameters are carried out.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    check: Check,
    /// `None` exactly when `check` is [`Check::Nothing`].
    roots: Option<Roots>,
}

const MODES: [&str; 5] = ["disable", "prefer", "require", "verify-ca", "verify-full"];

/// What `params` ask for, as libpq reads them; `default_root` is
/// `~/.postgresql/root.crt` where it exists.
fn plan(params: &Params, default_root: Option<PathBuf>) -> Result<Plan, String> {
    if let Some(key) = &params.unsupported {
        return Err(format!(
            "`{key}` is not supported: client certificates are not implemented; \
             authenticate with a password (sslmode and sslrootcert are supported)"
        ));
    }
    let mode = params.mode.as_deref();
    if let Some(other) = mode.filter(|m| !MODES.contains(m)) {
        return Err(format!(
            "sslmode `{other}` is not supported: use disable, prefer, require, verify-ca or verify-full"
        ));
    }
    if params.root.as_deref() == Some("system") {
        // libpq: the system's roots only with the full check (any public
        // certificate would pass a weaker one).
        return match mode {
            None | Some("verify-full") => Ok(Plan {
                check: Check::Full,
                roots: Some(Roots::System),
            }),
            Some(weak) => Err(format!(
                "sslmode `{weak}` may not be used with sslrootcert=system: use verify-full (or leave sslmode out)"
            )),
        };
    }
    let file = params.root.as_ref().map(PathBuf::from).or(default_root);
    let nothing = Plan {
        check: Check::Nothing,
        roots: None,
    };
    let with_file = |check| match &file {
        Some(file) => Ok(Plan {
            check,
            roots: Some(Roots::File(file.clone())),
        }),
        None => Err(format!(
            "sslmode `{}` needs the server's root certificate, and ~/.postgresql/root.crt does not exist: \
             name it with sslrootcert=PATH (or sslrootcert=system for the system's roots)",
            mode.unwrap_or_default()
        )),
    };
    match mode {
        Some("disable") => Ok(nothing),
        Some("verify-full") => with_file(Check::Full),
        Some("verify-ca") => with_file(Check::Chain),
        // prefer and require check the chain where a root file exists.
        _ if file.is_some() => with_file(Check::Chain),
        _ => Ok(nothing),
    }
}

/// The TLS parameters taken out of a URL.
#[derive(Debug, Default, PartialEq, Eq)]
struct Params {
    mode: Option<String>,
    root: Option<String>,
    /// A libpq TLS parameter this store does not support.
    unsupported: Option<String>,
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
        // As the driver reads it: the credentials end at the first `@`,
        // and the query starts at the first `?` after them.
        let scheme_end = url.find("://").map_or(0, |i| i + 3);
        let host_start = url[scheme_end..]
            .find('@')
            .map_or(scheme_end, |i| scheme_end + i + 1);
        let Some(query_start) = url[host_start..].find('?').map(|i| host_start + i) else {
            return (url.to_owned(), params);
        };
        let (base, query) = (&url[..query_start], &url[query_start + 1..]);
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

/// The rustls connector that carries out `plan`.
fn connector(plan: &Plan) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (webpki, pinned) = match &plan.roots {
        None => (None, Vec::new()),
        Some(roots) => {
            let (store, pinned) = match roots {
                Roots::System => (system_roots()?, Vec::new()),
                Roots::File(path) => {
                    let certs = file_certs(path)?;
                    (file_roots(path, &certs)?, certs)
                }
            };
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
                    .build()
                    .map_err(|e| format!("TLS: {e}"))?;
            (Some(verifier), pinned)
        }
    };
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Verifier {
            check: plan.check,
            webpki,
            pinned,
            provider,
        }))
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

fn default_root_file() -> Option<PathBuf> {
    let home = std::env::var_os("HOME")?;
    let path = Path::new(&home).join(".postgresql").join("root.crt");
    path.is_file().then_some(path)
}

fn file_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let named = || format!("sslrootcert `{}`", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("{}: {e}", named()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{}: {e}", named()))?;
    if certs.is_empty() {
        return Err(format!("{} holds no PEM certificate", named()));
    }
    Ok(certs)
}

fn file_roots(path: &Path, certs: &[CertificateDer<'static>]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert.clone()).map_err(|e| {
            format!(
                "sslrootcert `{}`: not a usable root certificate: {e}",
                path.display()
            )
        })?;
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

/// Checks the server's certificate as a [`Check`] says. The handshake's
/// signatures are always checked (a peer must hold the key of the
/// certificate it shows), whatever the check of the certificate itself.
#[derive(Debug)]
struct Verifier {
    check: Check,
    /// The chain's check against the roots (`None` for
    /// [`Check::Nothing`]).
    webpki: Option<Arc<WebPkiServerVerifier>>,
    /// The root file's certificates, each also trusted as itself: a
    /// self-signed server certificate named as its own root is a CA
    /// certificate that webpki would refuse as an end entity, which
    /// libpq (OpenSSL) accepts.
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        if self
            .pinned
            .iter()
            .any(|c| c.as_ref() == end_entity.as_ref())
        {
            if self.check == Check::Full {
                verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
            }
            return Ok(ServerCertVerified::assertion());
        }
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            // webpki checks the name last, after the chain: for `Chain`,
            // only a name mismatch is forgiven.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
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
            &self.provider.signature_verification_algorithms,
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
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
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
        let file = |p: &str| Some(Roots::File(PathBuf::from(p)));
        let plan_of = |mode, root, default: Option<&str>| {
            plan(&params(mode, root), default.map(PathBuf::from)).map(|p| (p.check, p.roots))
        };
        let nothing = Ok((Check::Nothing, None));
        assert_eq!(plan_of(None, None, None), nothing);
        assert_eq!(plan_of(Some("require"), None, None), nothing);
        assert_eq!(
            plan_of(Some("disable"), Some("ca.pem"), Some("d.crt")),
            nothing
        );
        // A root file, named or ~/.postgresql/root.crt, makes prefer and
        // require check the chain.
        for mode in [None, Some("prefer"), Some("require")] {
            assert_eq!(
                plan_of(mode, Some("ca.pem"), None),
                Ok((Check::Chain, file("ca.pem")))
            );
            assert_eq!(
                plan_of(mode, None, Some("d.crt")),
                Ok((Check::Chain, file("d.crt")))
            );
        }
        assert_eq!(
            plan_of(Some("verify-ca"), Some("ca.pem"), Some("d.crt")),
            Ok((Check::Chain, file("ca.pem")))
        );
        assert_eq!(
            plan_of(Some("verify-full"), None, Some("d.crt")),
            Ok((Check::Full, file("d.crt")))
        );
        // verify-* with no root file at all: refused, not the system's
        // roots (any public certificate would pass verify-ca).
        for mode in ["verify-ca", "verify-full"] {
            let e = plan_of(Some(mode), None, None).unwrap_err();
            assert!(
                e.contains(&format!(
                    "sslmode `{mode}` needs the server's root certificate"
                )),
                "{e}"
            );
        }
        // sslrootcert=system: the full check, and nothing weaker.
        assert_eq!(
            plan_of(None, Some("system"), None),
            Ok((Check::Full, Some(Roots::System)))
        );
        assert_eq!(
            plan_of(Some("verify-full"), Some("system"), Some("d.crt")),
            Ok((Check::Full, Some(Roots::System)))
        );
        for weak in ["disable", "prefer", "require", "verify-ca"] {
            let e = plan_of(Some(weak), Some("system"), None).unwrap_err();
            assert!(e.contains("may not be used with sslrootcert=system"), "{e}");
        }
        for bad in ["allow", "ca", "", "verify"] {
            let e = plan_of(Some(bad), None, None).unwrap_err();
            assert!(
                e.contains(&format!("sslmode `{bad}` is not supported")),
                "{e}"
            );
        }
        let mut p = params(None, None);
        take(&mut p, "sslcert", "client.pem".into());
        let e = plan(&p, None).unwrap_err();
        assert!(e.contains("`sslcert` is not supported"), "{e}");
    }

    #[test]
    fn a_question_mark_in_the_password_is_not_the_query() {
        let (rest, p) = split("postgres://u:a?sslmode=disable&x@db/app?sslmode=verify-full");
        assert_eq!(rest, "postgres://u:a?sslmode=disable&x@db/app");
        assert_eq!(p, params(Some("verify-full"), None));
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
