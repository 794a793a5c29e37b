//! TLS to PostgreSQL, as libpq's URL parameters ask for it: `require`
//! encrypts every connection the store opens (pooled and listening),
//! `verify-ca` and `verify-full` check the server's certificate against
//! `sslrootcert`, and each refusal names what was wrong.
//!
//! The server is the one `KESOKU_TEST_PG_URL` names, started by
//! `tools/postgres/start.sh`: its certificate is for `localhost` only,
//! signed by the CA beside it (`ssl_cert_file`'s directory, `ca.pem`).
#![cfg(feature = "postgres")]

#[path = "support/pg.rs"]
mod pg;

use std::path::PathBuf;

use kesoku::store::{MessageLog as _, PostgresOptions, PostgresStore};
use kesoku::{Message, MessageType, Role};

/// A fresh database's URL and the server's TLS directory, or `None` when
/// there is no server, or it does not speak TLS (said on stderr).
async fn tls_server(test: &str) -> Option<(String, PathBuf)> {
    let url = pg::fresh_database(test).await?;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let ssl: String = client.query_one("SHOW ssl", &[]).await.unwrap().get(0);
    let cert: String = client
        .query_one("SHOW ssl_cert_file", &[])
        .await
        .unwrap()
        .get(0);
    drop(client);
    let _ = driver.await;
    if ssl != "on" {
        eprintln!("skipped {test}: the server has ssl off (start it with tools/postgres/start.sh)");
        return None;
    }
    let dir = PathBuf::from(cert).parent().unwrap().to_owned();
    assert!(
        dir.join("ca.pem").is_file(),
        "no ca.pem in {}",
        dir.display()
    );
    Some((url, dir))
}

/// `url` with `params` added to its query.
fn with(url: &str, params: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{params}")
}

/// `url` naming the server `localhost`, the name its certificate bears.
fn as_localhost(url: &str) -> String {
    url.replacen("@127.0.0.1:", "@localhost:", 1)
}

/// Connects, stores a message (so a pooled connection and the listener
/// are both open), and answers whether each of the database's
/// connections is encrypted.
async fn encrypted(url: &str) -> Result<Vec<bool>, String> {
    let store = PostgresStore::connect_with(
        url,
        PostgresOptions::new().with_wait_timeout(std::time::Duration::from_secs(10)),
    )
    .await
    .map_err(|e| e.to_string())?;
    store
        .insert(&Message::new("s", Role::User, MessageType::Text, "hi"))
        .await
        .unwrap();
    let plain = url
        .split('?')
        .next()
        .unwrap()
        .replacen("@localhost:", "@127.0.0.1:", 1);
    let database = plain.rsplit('/').next().unwrap();
    let (client, connection) = tokio_postgres::connect(&plain, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    let rows = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.datname = $1 AND a.pid <> pg_backend_pid()",
            &[&database],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
    drop(store);
    Ok(rows.iter().map(|r| r.get::<_, bool>(0)).collect())
}

#[tokio::test]
async fn require_encrypts_the_pooled_and_the_listening_connections() {
    let Some((url, _)) =
        tls_server("require_encrypts_the_pooled_and_the_listening_connections").await
    else {
        return;
    };
    let ssl = encrypted(&with(&url, "sslmode=require")).await.unwrap();
    assert!(
        ssl.len() >= 2,
        "a pooled and a listening connection: {ssl:?}"
    );
    assert!(ssl.iter().all(|&s| s), "{ssl:?}");
}

#[tokio::test]
async fn disable_stays_plain() {
    let Some((url, _)) = tls_server("disable_stays_plain").await else {
        return;
    };
    let ssl = encrypted(&with(&url, "sslmode=disable")).await.unwrap();
    assert!(ssl.len() >= 2, "{ssl:?}");
    assert!(ssl.iter().all(|&s| !s), "{ssl:?}");
}

#[tokio::test]
async fn verify_full_accepts_the_server_under_its_certificate_name() {
    let Some((url, tls)) =
        tls_server("verify_full_accepts_the_server_under_its_certificate_name").await
    else {
        return;
    };
    let url = with(
        &as_localhost(&url),
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            tls.join("ca.pem").display()
        ),
    );
    let ssl = encrypted(&url).await.unwrap();
    assert!(!ssl.is_empty() && ssl.iter().all(|&s| s), "{ssl:?}");
}

#[tokio::test]
async fn verify_full_refuses_a_certificate_for_another_name() {
    let Some((url, tls)) = tls_server("verify_full_refuses_a_certificate_for_another_name").await
    else {
        return;
    };
    // 127.0.0.1 is not a name the certificate bears.
    let url = with(
        &url,
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            tls.join("ca.pem").display()
        ),
    );
    let err = encrypted(&url).await.unwrap_err();
    assert!(err.contains("failed to connect"), "{err}");
    assert!(
        err.contains("certificate") && err.contains("not valid for name"),
        "{err}"
    );
}

#[tokio::test]
async fn verify_ca_checks_the_chain_but_not_the_name() {
    let Some((url, tls)) = tls_server("verify_ca_checks_the_chain_but_not_the_name").await else {
        return;
    };
    let ca = |file: &str| format!("sslmode=verify-ca&sslrootcert={}", tls.join(file).display());
    let ssl = encrypted(&with(&url, &ca("ca.pem"))).await.unwrap();
    assert!(!ssl.is_empty() && ssl.iter().all(|&s| s), "{ssl:?}");
    let err = encrypted(&with(&url, &ca("other-ca.pem")))
        .await
        .unwrap_err();
    assert!(err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn require_with_a_root_certificate_checks_the_chain_as_libpq_does() {
    let Some((url, tls)) =
        tls_server("require_with_a_root_certificate_checks_the_chain_as_libpq_does").await
    else {
        return;
    };
    let url = with(
        &url,
        &format!(
            "sslmode=require&sslrootcert={}",
            tls.join("other-ca.pem").display()
        ),
    );
    let err = encrypted(&url).await.unwrap_err();
    assert!(err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn the_key_value_form_takes_the_same_parameters() {
    let Some((url, tls)) = tls_server("the_key_value_form_takes_the_same_parameters").await else {
        return;
    };
    // postgres://kesoku@127.0.0.1:PORT/DB as key-value pairs.
    let rest = url.strip_prefix("postgres://kesoku@127.0.0.1:").unwrap();
    let (port, db) = rest.split_once('/').unwrap();
    let url = format!(
        "host=localhost port={port} user=kesoku dbname={db} sslmode=verify-full sslrootcert='{}'",
        tls.join("ca.pem").display()
    );
    let store = PostgresStore::connect(&url).await.unwrap();
    store
        .insert(&Message::new("s", Role::User, MessageType::Text, "hi"))
        .await
        .unwrap();
}

#[tokio::test]
async fn the_systems_roots_need_the_full_check_and_do_not_trust_a_private_ca() {
    let Some((url, _)) =
        tls_server("the_systems_roots_need_the_full_check_and_do_not_trust_a_private_ca").await
    else {
        return;
    };
    // Without sslmode, sslrootcert=system means verify-full (as in libpq):
    // the test CA is no system root, so the server is refused.
    let err = encrypted(&with(&as_localhost(&url), "sslrootcert=system"))
        .await
        .unwrap_err();
    assert!(
        err.contains("UnknownIssuer") || err.contains("no system root certificates"),
        "{err}"
    );
    let err = encrypted(&with(&url, "sslmode=require&sslrootcert=system"))
        .await
        .unwrap_err();
    assert!(err.contains("read the connection URL"), "{err}");
    assert!(
        err.contains("sslmode `require` may not be used with sslrootcert=system"),
        "{err}"
    );
}

#[tokio::test]
async fn verify_without_a_root_certificate_is_refused_before_connecting() {
    let Some((url, _)) =
        tls_server("verify_without_a_root_certificate_is_refused_before_connecting").await
    else {
        return;
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if home.is_some_and(|h| h.join(".postgresql/root.crt").exists()) {
        eprintln!("skipped: ~/.postgresql/root.crt exists here, and would be used");
        return;
    }
    let err = encrypted(&with(&url, "sslmode=verify-ca"))
        .await
        .unwrap_err();
    assert!(
        err.contains("sslmode `verify-ca` needs the server's root certificate"),
        "{err}"
    );
}

#[tokio::test]
async fn a_certificate_named_as_its_own_root_is_trusted_as_itself() {
    let Some((url, tls)) =
        tls_server("a_certificate_named_as_its_own_root_is_trusted_as_itself").await
    else {
        return;
    };
    // The server's own certificate as the root file (as with a self-signed
    // server certificate): trusted as itself, though nothing in the file
    // signed it; verify-full still compares its name.
    let pinned = |mode: &str| {
        format!(
            "sslmode={mode}&sslrootcert={}",
            tls.join("server.pem").display()
        )
    };
    let ssl = encrypted(&with(&as_localhost(&url), &pinned("verify-full")))
        .await
        .unwrap();
    assert!(!ssl.is_empty() && ssl.iter().all(|&s| s), "{ssl:?}");
    let err = encrypted(&with(&url, &pinned("verify-full")))
        .await
        .unwrap_err();
    assert!(err.contains("not valid for name"), "{err}");
    let ssl = encrypted(&with(&url, &pinned("verify-ca"))).await.unwrap();
    assert!(!ssl.is_empty() && ssl.iter().all(|&s| s), "{ssl:?}");
}
