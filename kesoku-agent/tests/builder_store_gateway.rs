//! `AgentBuilder::store` and `AgentBuilder::gateway` both say where
//! messages go; set together, one used to replace the other silently.
//! Now `build` refuses both, naming the conflict (issue 43).

use kesoku_agent::{Agent, AgentError};
use kesoku_core::Gateway;
use kesoku_core::store::MemoryStore;
use kesoku_llm::ScriptedLlm;

fn model() -> ScriptedLlm {
    ScriptedLlm::from_json(serde_json::json!([{"text": "Hello."}])).unwrap()
}

#[test]
fn store_and_gateway_together_are_refused_in_either_order() {
    let gateway = Gateway::new(MemoryStore::new());
    let refused = [
        Agent::builder(model())
            .store(MemoryStore::new())
            .gateway(gateway.clone())
            .build(),
        Agent::builder(model())
            .gateway(gateway)
            .store(MemoryStore::new())
            .build(),
    ];
    for result in refused {
        let err = result.unwrap_err();
        assert_eq!(err, AgentError::StoreAndGateway);
        assert_eq!(
            err.to_string(),
            "invalid agent configuration: both `store` and `gateway` were set; a gateway \
             already holds its store: set one"
        );
    }
}

#[tokio::test]
async fn either_alone_is_used() {
    // The gateway given is the agent's: a message posted through one is
    // seen through the other.
    let gateway = Gateway::new(MemoryStore::new());
    let agent = Agent::builder(model())
        .gateway(gateway.clone())
        .build()
        .unwrap();
    let outcome = agent.send("s", "hi").await.unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("Hello."));
    assert_eq!(gateway.history("s").await.unwrap().len(), 2);

    // A store given is behind the agent's own gateway.
    let agent = Agent::builder(model())
        .store(MemoryStore::new())
        .build()
        .unwrap();
    agent.send("s", "hi").await.unwrap();
    assert_eq!(agent.gateway().history("s").await.unwrap().len(), 2);
    // Neither: a fresh in-memory store.
    assert!(Agent::builder(model()).build().is_ok());
}
