//! A fresh PostgreSQL database per test, on the server `KESOKU_TEST_PG_URL`
//! names (`.ci/run` starts one; `tools/postgres/start.sh` starts one
//! locally). Without it, a test says it is skipped and why.

/// The URL of a new, empty database, or `None` (and a line saying the
/// test is skipped) when no server is configured.
pub(crate) async fn fresh_database(test: &str) -> Option<String> {
    let Ok(url) = std::env::var("KESOKU_TEST_PG_URL") else {
        eprintln!(
            "skipped {test}: KESOKU_TEST_PG_URL is not set (start a server with `tools/postgres/start.sh target/pg` and set it to the URL it prints)"
        );
        return None;
    };
    let config: tokio_postgres::Config =
        url.parse().expect("KESOKU_TEST_PG_URL is a PostgreSQL URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to KESOKU_TEST_PG_URL ({url}): {e}"));
    let driver = tokio::spawn(connection);
    let name = format!("kesoku_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap_or_else(|e| panic!("cannot create a test database on {url}: {e}"));
    drop(client);
    let _ = driver.await;
    Some(with_database(&url, &name))
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let host_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    format!("{}/{name}{query}", &base[..host_end])
}
