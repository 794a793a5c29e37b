//! Deltas across processes: with `PostgresOptions::relay_deltas`, what a
//! gateway publishes reaches the delta listeners of a gateway over
//! another store on the same database (as a front end in another process
//! would open), in order and once; long text arrives in pieces that join
//! back to it.
#![cfg(feature = "postgres")]

#[path = "support/pg.rs"]
mod pg;

use std::time::Duration;

use futures_util::StreamExt as _;
use kesoku::store::{PostgresOptions, PostgresStore};
use kesoku::{Delta, DeltaKind, Gateway};

async fn gateway(url: &str, relay: bool) -> Gateway {
    let options = PostgresOptions::new().with_relay_deltas(relay);
    Gateway::new(PostgresStore::connect_with(url, options).await.unwrap())
}

/// The next delta of `deltas`, or a panic naming `what` after 10 s.
async fn next(deltas: &mut kesoku::gateway::Deltas, what: &str) -> Delta {
    tokio::time::timeout(Duration::from_secs(10), deltas.next())
        .await
        .unwrap_or_else(|_| panic!("no delta for {what} within 10 s"))
        .expect("the delta stream ended")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deltas_reach_another_processs_listeners_in_order_and_once() {
    let Some(url) =
        pg::fresh_database("deltas_reach_another_processs_listeners_in_order_and_once").await
    else {
        return;
    };
    let worker_store =
        PostgresStore::connect_with(&url, PostgresOptions::new().with_relay_deltas(true))
            .await
            .unwrap();
    let worker = Gateway::new(worker_store.clone());
    // A front end in the worker's process, on the same store.
    let beside = Gateway::new(worker_store);
    let front = gateway(&url, true).await;
    assert!(
        worker.has_delta_listeners(),
        "a relaying store may have listeners anywhere"
    );
    let mut seen = front.deltas(Some("s"));
    let mut own = worker.deltas(Some("s"));
    let mut next_door = beside.deltas(Some("s"));

    // Equal pieces (one transaction would deliver equal NOTIFYs once),
    // quotes, NULs and multibyte text, and one piece far over a NOTIFY's
    // 8,000 bytes.
    let mut pieces: Vec<String> = (0..300)
        .map(|n| ["the ", "cat ", "the "][n % 3].into())
        .collect();
    pieces.push("é\"\u{0}🌍\\".repeat(2_000));
    pieces.push(" end".into());
    for piece in &pieces {
        worker.publish(Delta::new("s", DeltaKind::Text(piece.clone())).replying_to("p"));
        worker.publish(Delta::new(
            "other",
            DeltaKind::Text("not this session".into()),
        ));
    }
    let call = DeltaKind::ToolCall {
        index: 0,
        id: "c1".into(),
        name: "lookup".into(),
    };
    worker.publish(Delta::new("s", call.clone()));

    let mut text = String::new();
    loop {
        let delta = next(&mut seen, "the other process").await;
        assert_eq!(delta.session_id, "s");
        match delta.kind {
            DeltaKind::Text(t) => {
                assert_eq!(delta.reply_to.as_deref(), Some("p"));
                text.push_str(&t);
            }
            kind => {
                assert_eq!(kind, call, "the call came before the text ended");
                break;
            }
        }
    }
    let sent = pieces.concat();
    assert!(
        text == sent,
        "the joined text differs: {} bytes arrived, {} sent; first difference at byte {:?}",
        text.len(),
        sent.len(),
        text.bytes().zip(sent.bytes()).position(|(a, b)| a != b)
    );

    // This process's listeners, on the publishing gateway and on another
    // over the same store: each delta once, as published (its relayed
    // copy is not delivered back).
    for listener in [&mut own, &mut next_door] {
        for piece in &pieces {
            assert_eq!(
                next(listener, "this process").await.kind,
                DeltaKind::Text(piece.clone())
            );
        }
        assert_eq!(next(listener, "this process").await.kind, call);
        let more = tokio::time::timeout(Duration::from_millis(300), listener.next()).await;
        assert!(more.is_err(), "a delta came back twice: {more:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_option_deltas_stay_in_their_process() {
    let Some(url) = pg::fresh_database("without_the_option_deltas_stay_in_their_process").await
    else {
        return;
    };
    let worker = gateway(&url, false).await;
    let front = gateway(&url, true).await;
    assert!(!worker.has_delta_listeners());
    let mut seen = front.deltas(None);
    worker.publish(Delta::new("s", DeltaKind::Text("local only".into())));
    // What a relaying store sends does arrive, after what was not sent.
    let relaying = gateway(&url, true).await;
    relaying.publish(Delta::new("s", DeltaKind::Text("relayed".into())));
    let first = next(&mut seen, "the relaying store").await;
    assert_eq!(first.kind, DeltaKind::Text("relayed".into()));
}
