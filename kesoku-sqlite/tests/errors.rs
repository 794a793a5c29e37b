//! Errors name the database and the call; a row that is not a message is
//! `Corrupt`, naming the row.

use kesoku_core::store::MessageLog;
use kesoku_core::store::StoreError;
use kesoku_core::{Message, MessageType, Role};
use kesoku_sqlite::SqliteStore;

#[test]
fn a_missing_directory_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("absent").join("kesoku.sqlite");
    let err = SqliteStore::open(&path).unwrap_err();
    let StoreError::Backend {
        store,
        action,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(store, &format!("SQLite at `{}`", path.display()));
    assert_eq!(action, "open the database");
    assert!(message.contains("absent"), "{message}");
    assert!(!path.exists());
}

#[test]
fn debug_shows_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("k.sqlite")).unwrap();
    assert!(format!("{store:?}").contains("k.sqlite"));
    assert_eq!(store.path(), Some(dir.path().join("k.sqlite").as_path()));
}

#[tokio::test]
async fn an_undecodable_row_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let store = SqliteStore::open(&path).unwrap();
    let mut m = Message::new("s", Role::User, MessageType::Text, "hi");
    m.id = "m1".into();
    store.insert(&m).await.unwrap();
    // Another program writes a role kesoku does not know.
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE messages SET role = 'wizard' WHERE id = 'm1'", [])
        .unwrap();
    let err = store.get("m1").await.unwrap_err();
    let StoreError::Corrupt {
        store: name,
        id,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(name, &format!("SQLite at `{}`", path.display()));
    assert_eq!(id, "m1");
    assert!(message.contains("wizard"), "{message}");
    assert!(matches!(
        store.history("s").await,
        Err(StoreError::Corrupt { .. })
    ));
    // A bad timestamp too.
    raw.execute(
        "UPDATE messages SET role = 'user', timestamp = 'yesterday' WHERE id = 'm1'",
        [],
    )
    .unwrap();
    let err = store.get("m1").await.unwrap_err();
    assert!(err.to_string().contains("yesterday"), "{err}");
}

#[tokio::test]
async fn a_locked_database_fails_after_the_busy_timeout_naming_the_call() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kesoku.sqlite");
    let options = kesoku_sqlite::SqliteOptions::new().with_busy_timeout(Duration::from_millis(200));
    let store = SqliteStore::open_with(&path, &options).unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let m = Message::new("s", Role::User, MessageType::Text, "hi");
    let err = store.insert(&m).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(
        err.to_string()
            .contains(&format!("save message `{}`", m.id)),
        "{err}"
    );
    raw.execute_batch("ROLLBACK").unwrap();
    store.insert(&m).await.unwrap();
}

#[test]
fn many_openers_of_a_new_file_at_once_all_succeed() {
    // As processes starting together on one new database: one migrates,
    // the others find the schema made.
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(format!("race-{round}.sqlite"));
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
        let openers: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                let barrier = std::sync::Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    SqliteStore::open(&path).map(drop)
                })
            })
            .collect();
        for opener in openers {
            if let Err(e) = opener.join().unwrap() {
                panic!("round {round}: {e}");
            }
        }
    }
}
