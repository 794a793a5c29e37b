//! The pairing rules of each provider's request body, as a provider
//! enforces them, for tests that look at what a backend sent.

use serde_json::Value;

/// The provider's rules for calls and results in a request: it opens on
/// the user; each call is answered in the message right after its own
/// (Claude: a user message of `tool_result`s; OpenAI: `tool` messages;
/// Gemini: a user content of `functionResponse`s), and no result comes
/// without its call.
pub(crate) fn check(provider: &str, body: &Value) -> Result<(), String> {
    let messages = match provider {
        "gemini" => body["contents"].as_array().unwrap(),
        _ => body["messages"].as_array().unwrap(),
    };
    let first = messages
        .iter()
        .find(|m| m["role"] != "system")
        .ok_or("no message")?;
    if first["role"] != "user" {
        return Err(format!("{provider}: the request opens on {first}"));
    }
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        let (calls, mut results) = calls_and_results(provider, m);
        if provider == "openai" && m["role"] == "tool" {
            // One `tool` message per call, right after the calls.
            let id = &results[0];
            let Some(at) = open.iter().position(|c| c == id) else {
                return Err(format!("{provider}: result {id} without its call"));
            };
            open.remove(at);
            continue;
        }
        if provider == "openai" {
            if !open.is_empty() {
                return Err(format!("{provider}: calls {open:?} left unanswered"));
            }
        } else {
            let mut want = std::mem::take(&mut open);
            want.sort();
            results.sort();
            if want != results {
                return Err(format!(
                    "{provider}: calls {want:?} answered by {results:?}"
                ));
            }
        }
        open = calls;
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("{provider}: calls {open:?} left unanswered"))
    }
}

/// The call ids (or names, for Gemini) a wire message makes, and those it
/// answers.
fn calls_and_results(provider: &str, m: &Value) -> (Vec<String>, Vec<String>) {
    let mut calls = Vec::new();
    let mut results = Vec::new();
    match provider {
        "anthropic" => {
            for b in m["content"].as_array().into_iter().flatten() {
                match b["type"].as_str() {
                    Some("tool_use") => calls.push(b["id"].as_str().unwrap().to_owned()),
                    Some("tool_result") => {
                        results.push(b["tool_use_id"].as_str().unwrap().to_owned());
                    }
                    _ => {}
                }
            }
        }
        "openai" => {
            for c in m["tool_calls"].as_array().into_iter().flatten() {
                calls.push(c["id"].as_str().unwrap().to_owned());
            }
            if m["role"] == "tool" {
                results.push(m["tool_call_id"].as_str().unwrap().to_owned());
            }
        }
        _ => {
            for p in m["parts"].as_array().into_iter().flatten() {
                if let Some(call) = p.get("functionCall") {
                    calls.push(call["name"].as_str().unwrap().to_owned());
                }
                if let Some(result) = p.get("functionResponse") {
                    results.push(result["name"].as_str().unwrap().to_owned());
                }
            }
        }
    }
    (calls, results)
}
