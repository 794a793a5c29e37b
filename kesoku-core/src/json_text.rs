//! JSON text of a value written into a buffer sized for it at once (one
//! allocation, where `to_string` grows its buffer as it writes).

use serde_json::Value;

/// The length of `value` as compact JSON text, counted as it is written
/// out, without keeping it.
pub(crate) fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A `Value` always serializes; a writer that only counts never fails.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// `value` as compact JSON text, as `value.to_string()` writes it.
pub(crate) fn json_text(value: &Value) -> String {
    let mut text = String::with_capacity(json_len(value));
    push_json(&mut text, value);
    text
}

/// Appends `value` as compact JSON text to `text`.
pub(crate) fn push_json(text: &mut String, value: &Value) {
    use std::fmt::Write as _;
    // Writing to a `String` never fails.
    let _ = write!(text, "{value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_to_string_s_in_one_allocation() {
        for value in [
            serde_json::json!({"city": "Paris", "n": [1, 2.5, null], "q": "a \"b\" \n é"}),
            serde_json::json!("text"),
            serde_json::json!(null),
        ] {
            let text = json_text(&value);
            assert_eq!(text, value.to_string());
            assert_eq!(json_len(&value), text.len());
            assert_eq!(text.capacity(), text.len());
        }
    }
}
