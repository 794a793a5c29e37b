//! Unit tests of the rustdoc parser.
use super::*;

/// Parses a `///`-style block: every line gets the usual leading space.
fn doc(src: &str) -> Docs {
    parse(&src.lines().map(|l| format!(" {l}")).collect::<Vec<_>>())
}

/// The arguments as `name=text` separated by `; `.
fn args(d: &Docs) -> String {
    let args: Vec<String> = d
        .args
        .iter()
        .map(|a| format!("{}={}", a.name, a.text))
        .collect();
    args.join("; ")
}

/// The line indexes of the arguments.
fn lines(d: &Docs) -> Vec<usize> {
    d.args.iter().map(|a| a.line).collect()
}

#[test]
fn empty_input() {
    assert_eq!(parse::<&str>(&[]), Docs::default());
    assert_eq!(parse(&["", "  ", "\r", "\t"]), Docs::default());
}

#[test]
fn description_paragraphs_reflowed() {
    let d = doc("\nAdds two  \nnumbers   together.\n\n\n\nSecond  para.\n\n");
    assert_eq!(
        d.description,
        "Adds two numbers   together.\n\nSecond  para."
    );
    assert_eq!((d.returns, d.args_heading, d.args.len()), (None, None, 0));
}

#[test]
fn description_lists_and_code() {
    let d = doc(
        "Modes:\n- fast\n  and loose\n* slow\n1. one\n2) two\n\n```\nlet x;\n\n# let y;\n```\nend",
    );
    let want =
        "Modes:\n- fast and loose\n* slow\n1. one\n2) two\n\n```\nlet x;\n\n# let y;\n```\nend";
    assert_eq!(d.description, want);
    assert_eq!(doc("- a\n  - b\n- c").description, "- a\n  - b\n- c");
}

#[test]
fn fenced_hash_lines_are_not_headings() {
    let d = doc(
        "D.\n\n~~~rust\n# Arguments\n# use a;\n~~~\n# Examples\n```\n# Returns\n```\n# Returns\nV.",
    );
    assert_eq!(d.description, "D.\n\n~~~rust\n# Arguments\n# use a;\n~~~");
    assert_eq!((d.returns.as_deref(), d.args_heading), (Some("V."), None));
}

#[test]
fn returns_and_dropped_sections() {
    let d = doc(
        "D.\n# Errors\nBad.\n# Returns\nThe sum,\nwrapped.\n\n- a\n- b\n# Panics\nNo.\n\
         # Safety\nNone.\n# Examples\nx\n## Return:\nAgain.\n# Notes #\nno",
    );
    assert_eq!(d.description, "D.");
    assert_eq!(
        d.returns.as_deref(),
        Some("The sum, wrapped.\n\n- a\n- b\n\nAgain.")
    );
    assert_eq!(parse(&["# Returns", "", "# Other"]).returns, None);
    // Not headings: no space, seven hashes, indented four.
    let d = parse(&["#Returns", "####### Returns", "    # Returns"]);
    assert_eq!(d.description, "#Returns ####### Returns # Returns");
}

#[test]
fn all_list_styles() {
    let d = doc(
        "# Arguments\n* `a` - one\n- `b`: two\n* c - three\n* `d` — four\n* `e` – five\n+ f: six\n\
         * `g` (i32) - seven\n* `h` (`Vec<(u8, u8)>`): eight\n* `i`:\n* `j`\n* k\n* `l`-nine\n\
         *`m`-ten\n* n -- eleven\n* `o` (optional) — twelve",
    );
    let want = "a=one; b=two; c=three; d=four; e=five; f=six; g=seven; h=eight; \
                i=; j=; k=; l=nine; m=ten; n=eleven; o=twelve";
    assert_eq!(args(&d), want);
    assert_eq!(lines(&d), (1..=15).collect::<Vec<_>>());
    assert_eq!(d.args_heading, Some(0));
    assert!(d.malformed.is_empty(), "{:?}", d.malformed);
}

#[test]
fn odd_spacing() {
    let d = doc(
        "#   Arguments  \n   *    `a`    -    spaced   out   \n*\t`b`\t:\ttab\n* ` c `:x\n* d:y",
    );
    assert_eq!(args(&d), "a=spaced   out; b=tab; c=x; d=y");
}

#[test]
fn heading_variants() {
    for h in [
        "# Args:",
        "## Arguments",
        "###### PARAMS",
        "### parameters :",
        "# Params ##",
    ] {
        let d = parse(&[h, "* `a` - x"]);
        assert_eq!(
            (args(&d), lines(&d), d.args_heading),
            ("a=x".into(), vec![1], Some(0)),
            "{h}"
        );
    }
    assert_eq!(args(&parse(&["# Argument list", "* `a` - x"])), "");
}

#[test]
fn only_arguments_section() {
    let d = doc("# Arguments\n\n* `x` - the x");
    assert_eq!(
        (d.description.as_str(), args(&d), lines(&d)),
        ("", "x=the x".into(), vec![2])
    );
}

#[test]
fn continuation_lines() {
    let d = doc(
        "# Arguments\nThe arguments are:\n* `a` - first\n  wrapped\n\n  after blank\n* `b` - lazy\n\
         continuation\n\nProse, ignored.\n    * `c` - one of:\n      - `fast` - quick\n      - `slow`\n\
         * `d`:\n  later",
    );
    let want = "a=first wrapped after blank; b=lazy continuation; \
                c=one of: - `fast` - quick - `slow`; d=later";
    assert_eq!(args(&d), want);
    assert_eq!(lines(&d), [2, 6, 10, 13]);
    assert!(d.malformed.is_empty());
}

#[test]
fn code_in_args_section_ends_item() {
    let d = doc("# Arguments\n* `a` - x\n  ```\n  * `b` - y\n  ```\n  not continued\n* `c` - z");
    assert_eq!(args(&d), "a=x; c=z");
}

#[test]
fn crlf_and_tabs() {
    let d = parse(&[
        "\tDesc\r",
        "\t\tmore \t\r",
        "\r",
        "\t# Arguments\r",
        "\t* `a` - x\r",
        "\t\tmore\r",
    ]);
    assert_eq!(
        (d.description.as_str(), args(&d), lines(&d)),
        ("Desc more", "a=x more".into(), vec![4])
    );
    // A `/** */` block split on '\n' by the caller.
    let d = parse(
        &"\r\n Sum.\r\n\r\n # Returns\r\n The sum.\r\n"
            .split('\n')
            .collect::<Vec<_>>(),
    );
    assert_eq!(
        (d.description.as_str(), d.returns.as_deref()),
        ("Sum.", Some("The sum."))
    );
}

#[test]
fn unicode() {
    // Ideographic spaces as indentation, multibyte text right after the cut.
    let sp = '\u{3000}';
    let d = parse(&[
        format!("{sp}été 日本"),
        format!("{sp}{sp}ü"),
        format!("{sp}# Arguments"),
        format!("{sp}* `größe` – Größe in m²"),
        format!("{sp}* 名前: 名"),
    ]);
    assert_eq!(
        (d.description.as_str(), args(&d)),
        ("été 日本 ü", "größe=Größe in m²; 名前=名".into())
    );
    assert_eq!((skip_chars("ééx", 2), skip_chars("é", 5)), ("x", ""));
}

#[test]
fn raw_identifiers() {
    let d = doc("# Arguments\n* `r#type` - kind\n* r#match: m\n* `_private` - p");
    assert_eq!(args(&d), "type=kind; match=m; _private=p");
}

#[test]
fn duplicates_and_multiple_sections() {
    let d = doc(
        "# Arguments\n* `a` - one\n* `a` - two\n# Examples\n* `z` - no\n## Params\n- `b`: three",
    );
    assert_eq!(
        (args(&d), lines(&d)),
        ("a=one; a=two; b=three".into(), vec![1, 2, 6])
    );
    assert_eq!(d.args_heading, Some(0));
}

#[test]
fn malformed_items() {
    let d = doc(
        "# Arguments\n* 123 - x\n- - text\n* `a b` - x\n* foo-bar - x\n* a x\n* `open - x\n*\n\
         * `c` (i32 - x\n* `_` - x\n* `ok` - fine\n  * `nested` ok\n* a—b",
    );
    let found: Vec<(usize, &str)> = d
        .malformed
        .iter()
        .map(|m| (m.line, m.message.as_str()))
        .collect();
    let want = [
        (1, "expected an argument name, found `123`"),
        (2, "expected an argument name, found `-`"),
        (3, "`a b` is not an argument name"),
        (4, "expected an argument name, found `foo-bar`"),
        (5, "expected `-` or `:` after `a`, found `x`"),
        (6, "unclosed backtick in argument name `open`"),
        (7, "empty list item, expected `name - description`"),
        (8, "unclosed `(` after `c`"),
        (9, "`_` is not an argument name"),
        (12, "expected an argument name, found `a—b`"),
    ];
    assert_eq!(found, want);
    assert_eq!(args(&d), "ok=fine * `nested` ok");
    // Bold text, rules and numbers are prose, not malformed items.
    let d = doc("# Arguments\n**Note**: all optional.\n---\n-1 is fine");
    assert!(d.malformed.is_empty() && d.args.is_empty());
}

#[test]
fn intra_doc_links() {
    let cases = [
        ("see [`Foo`] and [`Bar`](crate::Bar)", "see `Foo` and `Bar`"),
        ("[the map](std::collections::HashMap::new())", "the map"),
        ("[docs](https://x.y/a_(b))", "[docs](https://x.y/a_(b))"),
        ("[`Foo`](https://x)", "[`Foo`](https://x)"),
        (
            "[text][`Foo`] [optional] a[0] `a[0]` [`x`",
            "text [optional] a[0] `a[0]` [`x`",
        ),
        ("`[`Foo`]` ``[`a`]``", "`[`Foo`]` ``[`a`]``"),
        ("ü [`Größe`] ü", "ü `Größe` ü"),
    ];
    for (input, want) in cases {
        assert_eq!(plain_links(input), want);
    }
    let d = doc(
        "Uses [`Foo`],\n[wrapped\nlink](Bar).\n\n[`Foo`]: crate::Foo\n```\n[`Foo`]\n```\n\
         # Returns\nA [`Bar`].\n# Arguments\n* `a` - a [`Baz`](crate::Baz)",
    );
    assert_eq!(
        d.description,
        "Uses `Foo`, wrapped link.\n\n```\n[`Foo`]\n```"
    );
    assert_eq!(
        (d.returns.as_deref(), args(&d)),
        (Some("A `Bar`."), "a=a `Baz`".into())
    );
}

#[test]
fn helpers() {
    assert!(is_ident("größe") && is_ident("r#type") && is_ident("_x"));
    assert!(!is_ident("1a") && !is_ident("r#") && !is_ident("_") && !is_ident(""));
    assert_eq!(
        (heading("   ## T "), heading("#"), heading("#\tT")),
        (Some("T"), None, Some("T"))
    );
    assert_eq!((code_span_len("``a`b``c"), code_span_len("`abc")), (7, 1));
    assert_eq!(closing("[a[b]`]`]x", '[', ']'), Some(8));
}

#[test]
fn backticked_name_without_separator() {
    let d = doc(
        "# Arguments\n* `area` The rectangle to draw into.\n* `r#type` (u8) A kind,\n  wrapped.\n\
         * `b`  : Still a colon.\n* `c`\tA tab.\n* `d`",
    );
    assert_eq!(
        args(&d),
        "area=The rectangle to draw into.; type=A kind, wrapped.; b=Still a colon.; c=A tab.; d="
    );
    assert!(d.malformed.is_empty());
    // Without backticks the name's end is a guess: still an error.
    let d = doc("# Arguments\n* area The rectangle\n* `x`y - glued\n* `z` (u8)text");
    let found: Vec<&str> = d.malformed.iter().map(|m| m.message.as_str()).collect();
    assert_eq!(
        found,
        [
            "expected `-` or `:` after `area`, found `The`",
            "expected `-` or `:` after `x`, found `y`",
            "expected `-` or `:` after `z`, found `text`",
        ]
    );
}
