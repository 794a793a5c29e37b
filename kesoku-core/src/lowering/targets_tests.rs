//! The compile-time check agrees with the lowering: for random schema
//! trees, a target refuses a parameter's constructs (what
//! `#[tool(targets(...))]` fails the build on) exactly when lowering the
//! tool's schema for that target's dialect reports something unsupported.

use proptest::prelude::*;

use super::{Dialect, Severity, lower};
use crate::schema::targets::{Constructs, Target};
use crate::schema::tree::{ArraySchema, Field, ObjectSchema, Schema, StringSchema};

fn leak<T>(value: T) -> &'static T {
    Box::leak(Box::new(value))
}

fn field(name: &'static str, schema: Schema, required: bool) -> Field {
    Field {
        name,
        description: None,
        schema: leak(schema),
        required,
        default: None,
    }
}

fn object(fields: Vec<Field>, flatten: Vec<Schema>) -> Schema {
    Schema::Object(leak(ObjectSchema {
        fields: Box::leak(fields.into_boxed_slice()),
        flatten: Box::leak(flatten.into_boxed_slice()),
        description: None,
    }))
}

fn leaf() -> impl Strategy<Value = Schema> {
    prop_oneof![
        Just(Schema::Any),
        Just(Schema::Boolean),
        Just(Schema::Integer {
            minimum: 0,
            maximum: 255
        }),
        Just(Schema::Number),
        Just(Schema::String(StringSchema {
            min_length: None,
            max_length: Some(8),
            format: Some("uuid"),
        })),
        Just(Schema::Enum(&["a", "b"])),
    ]
}

fn tree() -> impl Strategy<Value = Schema> {
    leaf().prop_recursive(3, 24, 3, |inner| {
        prop_oneof![
            (inner.clone(), any::<bool>()).prop_map(|(items, unique_items)| {
                Schema::Array(ArraySchema {
                    items: leak(items),
                    min_items: None,
                    max_items: None,
                    unique_items,
                })
            }),
            inner.clone().prop_map(|v| Schema::Map(leak(v))),
            inner.clone().prop_map(|v| Schema::Nullable(leak(v))),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| Schema::Tuple(Box::leak(vec![a, b].into_boxed_slice()))),
            // A tagged enum's alternatives: objects with a tag.
            (inner.clone(), inner.clone()).prop_map(|(a, b)| {
                let alt = |tag: &'static str, v: Schema| {
                    object(
                        vec![
                            field(
                                "kind",
                                Schema::Const {
                                    value: tag,
                                    description: None,
                                },
                                true,
                            ),
                            field("value", v, true),
                        ],
                        vec![],
                    )
                };
                Schema::OneOf(Box::leak(vec![alt("a", a), alt("b", b)].into_boxed_slice()))
            }),
            // A struct, sometimes with something flattened into it.
            (
                inner.clone(),
                any::<bool>(),
                prop::option::of(prop_oneof![
                    inner.clone().prop_map(|v| Schema::Map(leak(v))),
                    inner.clone().prop_map(|v| Schema::Nullable(leak(object(
                        vec![field("x", v, true)],
                        vec![]
                    )))),
                    inner.prop_map(|v| object(vec![field("y", v, true)], vec![])),
                ])
            )
                .prop_map(|(v, required, flat)| {
                    object(vec![field("f", v, required)], flat.into_iter().collect())
                }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_target_refuses_exactly_what_its_lowering_cannot_express(param in tree()) {
        let root = object(vec![field("p", param, true)], vec![]);
        let json = root.to_json();
        let constructs = Constructs::of(&param);
        for target in Target::ALL {
            let lowered = lower(Dialect::from(target), "t", &json);
            let unsupported: Vec<String> = lowered
                .report
                .iter()
                .filter(|e| e.severity == Severity::Unsupported)
                .map(ToString::to_string)
                .collect();
            prop_assert_eq!(
                constructs.refused(target).is_some(),
                !unsupported.is_empty(),
                "{:?} for {}: {:?}\n{:#}",
                constructs,
                target.name(),
                unsupported,
                json
            );
        }
    }
}

#[test]
fn a_map_is_refused_by_gemini_and_the_strict_modes_only() {
    let tags = Schema::Map(&Schema::Integer {
        minimum: 0,
        maximum: 4_294_967_295,
    });
    let c = Constructs::of(&tags);
    for target in Target::ALL {
        let refused = c.refused(target);
        let expected = matches!(
            target,
            Target::Gemini | Target::OpenAiStrict | Target::AnthropicStructured
        );
        assert_eq!(refused.is_some(), expected, "{}", target.name());
        if let Some(why) = refused {
            assert!(why.contains("map"), "{why}");
            assert!(why.contains(target.name()), "{why}");
        }
    }
}
