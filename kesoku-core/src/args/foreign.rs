//! [`ToolArg`] for other crates' types, each behind a feature of its
//! name: `uuid`, `chrono`, `url`, and `duration` for `std::time::Duration`.
//! Each schema says what the type's `Deserialize` takes, so the model is
//! asked for exactly that; none is `EXACT` (their parsers accept forms the
//! schema does not name, such as braced UUIDs), so the validator always
//! runs first.

#[cfg(any(feature = "chrono", feature = "duration"))]
use crate::schema::tree::NamedSchema;
use crate::schema::tree::Schema;
#[cfg(feature = "duration")]
use crate::schema::tree::{Field, ObjectSchema};

use super::tool_arg::ToolArg;

/// A string of a JSON Schema `format`.
#[cfg(any(feature = "uuid", feature = "chrono", feature = "url"))]
const fn formatted(format: &'static str) -> Schema {
    Schema::formatted(format)
}

/// A string whose form a description gives (a format JSON Schema lacks).
#[cfg(feature = "chrono")]
macro_rules! described_string {
    ($name:literal, $id:literal, $description:literal) => {
        Schema::Named(&NamedSchema {
            name: $name,
            id: $id,
            description: Some($description),
            body: || &<String as ToolArg>::SCHEMA,
        })
    };
}

#[cfg(feature = "uuid")]
impl ToolArg for uuid::Uuid {
    const SCHEMA: Schema = formatted("uuid");
}

#[cfg(feature = "url")]
impl ToolArg for url::Url {
    const SCHEMA: Schema = formatted("uri");
}

#[cfg(feature = "chrono")]
impl<Tz: chrono::TimeZone> ToolArg for chrono::DateTime<Tz>
where
    chrono::DateTime<Tz>: serde::de::DeserializeOwned,
{
    const SCHEMA: Schema = formatted("date-time");
}

#[cfg(feature = "chrono")]
impl ToolArg for chrono::NaiveDate {
    const SCHEMA: Schema = formatted("date");
}

// chrono reads these without an offset, which JSON Schema's `time` and
// `date-time` require: a description says the form instead.
#[cfg(feature = "chrono")]
impl ToolArg for chrono::NaiveTime {
    const SCHEMA: Schema = described_string!(
        "NaiveTime",
        "chrono::NaiveTime",
        "A time of day without an offset, such as 14:30:00."
    );
}

#[cfg(feature = "chrono")]
impl ToolArg for chrono::NaiveDateTime {
    const SCHEMA: Schema = described_string!(
        "NaiveDateTime",
        "chrono::NaiveDateTime",
        "A date and time without an offset, such as 2026-12-05T14:30:00."
    );
}

/// serde's form of a `Duration`: both fields are required.
#[cfg(feature = "duration")]
const DURATION: Schema = Schema::Object(&ObjectSchema {
    fields: &[
        Field {
            name: "secs",
            description: Some("Whole seconds."),
            schema: &<u64 as ToolArg>::SCHEMA,
            required: true,
            default: None,
        },
        Field {
            name: "nanos",
            description: Some("Nanoseconds past the seconds."),
            schema: &Schema::Integer {
                minimum: 0,
                maximum: 999_999_999,
            },
            required: true,
            default: None,
        },
    ],
    flatten: &[],
    description: None,
});

#[cfg(feature = "duration")]
impl ToolArg for std::time::Duration {
    const SCHEMA: Schema = Schema::Named(&NamedSchema {
        name: "Duration",
        id: "std::time::Duration",
        description: Some("A span of time."),
        body: || &DURATION,
    });
}

#[cfg(test)]
mod tests {
    #[allow(unused_imports)]
    use super::*;

    #[cfg(feature = "uuid")]
    #[test]
    fn a_uuid_is_a_uuid_string() {
        assert_eq!(
            uuid::Uuid::SCHEMA.to_json(),
            serde_json::json!({"type": "string", "format": "uuid"})
        );
    }

    #[cfg(feature = "chrono")]
    #[test]
    fn chrono_types_say_their_form() {
        use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, Utc};
        let json = |s: Schema| s.to_json();
        assert_eq!(json(DateTime::<Utc>::SCHEMA)["format"], "date-time");
        assert_eq!(json(DateTime::<FixedOffset>::SCHEMA)["format"], "date-time");
        assert_eq!(json(NaiveDate::SCHEMA)["format"], "date");
        let naive = json(NaiveDateTime::SCHEMA);
        assert_eq!(naive["type"], "string");
        assert!(naive.get("format").is_none());
        // What the description shows, chrono reads.
        let shown: NaiveDateTime = serde_json::from_value("2026-12-05T14:30:00".into()).unwrap();
        assert_eq!(shown.to_string(), "2026-12-05 14:30:00");
    }

    #[cfg(feature = "duration")]
    #[test]
    fn a_duration_is_serdes_secs_and_nanos() {
        use std::time::Duration;
        let schema = Duration::SCHEMA.to_json();
        assert_eq!(schema["required"], serde_json::json!(["secs", "nanos"]));
        let d: Duration =
            serde_json::from_value(serde_json::json!({"secs": 90, "nanos": 5})).unwrap();
        assert_eq!(d, Duration::new(90, 5));
    }
}
