//! `PostgresStore::connect`'s errors name the problem: a malformed URL, a
//! server that is not there, a schema newer than this build. The first
//! two need no server.
#![cfg(feature = "postgres")]

#[path = "support/pg.rs"]
mod pg;

use kesoku::store::{PostgresOptions, PostgresStore};

#[tokio::test]
async fn a_malformed_url_is_named_as_such() {
    let err = PostgresStore::connect("postgres://kesoku@127.0.0.1:notaport/db")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("read the connection URL"), "{err}");
    assert!(
        err.contains("postgres://user:password@host:port/database"),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreachable_server_names_the_place_but_not_the_password() {
    // Port 1 on loopback: nothing listens there.
    let options = PostgresOptions::new().with_wait_timeout(std::time::Duration::from_secs(5));
    let err = PostgresStore::connect_with("postgres://kesoku:s3cret@127.0.0.1:1/kesoku", options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("the PostgreSQL at 127.0.0.1:1/kesoku store failed to connect"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[tokio::test]
async fn no_connections_is_refused() {
    let err = PostgresStore::connect_with(
        "postgres://kesoku@127.0.0.1:1/kesoku",
        PostgresOptions::new().with_max_connections(0),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("max_connections must be at least 1"), "{err}");
}

#[tokio::test]
async fn a_schema_newer_than_this_build_is_refused_and_left_alone() {
    let Some(url) =
        pg::fresh_database("a_schema_newer_than_this_build_is_refused_and_left_alone").await
    else {
        return;
    };
    drop(PostgresStore::connect(&url).await.unwrap());
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("UPDATE kesoku_schema SET version = 99")
        .await
        .unwrap();
    let err = PostgresStore::connect(&url).await.unwrap_err().to_string();
    assert!(
        err.contains("schema version 99, newer than this build's 1; upgrade kesoku"),
        "{err}"
    );
    let version: i64 = client
        .query_one("SELECT version FROM kesoku_schema", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, 99);
    // And connecting twice at once migrates once.
    let fresh = pg::fresh_database("concurrent migrations").await.unwrap();
    let (a, b) = tokio::join!(
        PostgresStore::connect(&fresh),
        PostgresStore::connect(&fresh)
    );
    a.unwrap();
    b.unwrap();
}
