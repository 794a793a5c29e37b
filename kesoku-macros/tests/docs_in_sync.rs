//! The docs keep up with the code (issue 43): every option `#[tool]`
//! accepts is named in `docs/tools.md`, and every `.rs` file of every
//! crate's `src/` in `docs/layout.md`. Here rather than in the facade's
//! tests because this crate builds in seconds; it reads files only.

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: &str) -> String {
    fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The keys of `#[tool(...)]`: the fields of `ToolOptions` (darling's
/// `FromMeta`), each under its `#[darling(rename = "...")]` if it has one.
fn tool_options(attr_rs: &str) -> Vec<String> {
    let file = syn::parse_file(attr_rs).expect("attr.rs parses");
    let options = file
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Struct(s) if s.ident == "ToolOptions" => Some(s),
            _ => None,
        })
        .expect("attr.rs defines ToolOptions");
    options
        .fields
        .iter()
        .map(|field| {
            let mut name = field.ident.as_ref().unwrap().to_string();
            for attr in field.attrs.iter().filter(|a| a.path().is_ident("darling")) {
                attr.parse_nested_meta(|meta| {
                    if meta.path.is_ident("rename") {
                        name = meta.value()?.parse::<syn::LitStr>()?.value();
                    }
                    Ok(())
                })
                .unwrap();
            }
            name
        })
        .collect()
}

/// The keys of `#[arg(...)]` and the bare attributes: every
/// `is_ident("...")` the parameter attributes are read with.
fn arg_options(attr_rs: &str) -> Vec<String> {
    let mut names: Vec<String> = attr_rs
        .split("is_ident(\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|name| *name != "arg")
        .map(str::to_owned)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Whether `text` has a code span that starts with `name`, followed by its
/// end, a space, `=` or `(`: `` `name` ``, `` `name = ...` ``,
/// `` `name(...)` ``.
fn names_option(text: &str, name: &str) -> bool {
    let spans = text.split('`').skip(1).step_by(2);
    spans.into_iter().any(|span| {
        span.strip_prefix(name)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '=', '(']))
    })
}

/// The options (tool and parameter) that `tools_md` does not name.
fn undocumented(attr_rs: &str, tools_md: &str) -> Vec<String> {
    let mut missing: Vec<String> = tool_options(attr_rs)
        .into_iter()
        .filter(|name| !names_option(tools_md, name))
        .collect();
    for name in arg_options(attr_rs) {
        let spelled = if name == "inject" {
            "#[inject]".to_owned()
        } else {
            format!("#[arg({name}")
        };
        if !tools_md.contains(&spelled) {
            missing.push(spelled);
        }
    }
    missing
}

#[test]
fn every_tool_option_is_named_in_docs_tools_md() {
    let attr_rs = read("kesoku-macros/src/attr.rs");
    let tools_md = read("docs/tools.md");
    let options = tool_options(&attr_rs);
    // The parse found the struct's fields, the renamed one by its key.
    assert!(options.len() >= 17, "{options:?}");
    assert!(options.iter().any(|o| o == "crate"), "{options:?}");
    assert!(!options.iter().any(|o| o == "krate"), "{options:?}");
    assert_eq!(arg_options(&attr_rs), ["default", "inject", "schema"]);
    let missing = undocumented(&attr_rs, &tools_md);
    assert!(
        missing.is_empty(),
        "docs/tools.md does not name {missing:?}"
    );
}

#[test]
fn an_option_left_out_of_the_docs_is_caught() {
    let attr_rs = read("kesoku-macros/src/attr.rs");
    let tools_md = read("docs/tools.md");
    // `max_parallel`'s row taken out of the options table.
    let without = tools_md
        .lines()
        .filter(|line| !line.starts_with("| `max_parallel"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(without.len() < tools_md.len());
    assert_eq!(undocumented(&attr_rs, &without), ["max_parallel"]);
    // A mention in prose, not as the option, does not count.
    let prose = tools_md.replace("`crate = path`", "crate = path");
    assert_eq!(undocumented(&attr_rs, &prose), ["crate"]);
    let no_schema = tools_md.replace("#[arg(schema", "#[arg(shape");
    assert_eq!(undocumented(&attr_rs, &no_schema), ["#[arg(schema"]);
}

/// The code spans of `text`.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Whether the rows of a crate's section name `rel` (a path under its
/// `src/`): by its path, by its name alone (in a row about its folder),
/// or as the end of a longer path; a `mod.rs` also by its folder.
fn names_file(section: &[&str], rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap();
    let folder = rel.strip_suffix("/mod.rs");
    section.iter().any(|span| {
        *span == rel
            || *span == name
            || span.ends_with(&format!("/{name}"))
            || folder.is_some_and(|f| {
                let last = f.rsplit('/').next().unwrap();
                *span == format!("{f}/") || *span == format!("{last}/")
            })
    })
}

/// The `.rs` files under `dir`, as paths relative to it with `/`.
fn rust_files(dir: &Path, prefix: &str, out: &mut Vec<String>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        if entry.file_type().unwrap().is_dir() {
            rust_files(&entry.path(), &format!("{rel}/"), out);
        } else if Path::new(&name).extension().is_some_and(|e| e == "rs") {
            out.push(rel);
        }
    }
}

#[test]
fn every_source_file_is_named_in_docs_layout_md() {
    let layout = read("docs/layout.md");
    let mut missing = Vec::new();
    let mut crates: Vec<String> = fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("kesoku-") && root().join(name).join("src").is_dir())
        .collect();
    crates.sort();
    for krate in &crates {
        // The section: from the crate's bold row to the next bold row.
        let header = format!("| **`{krate}/src/`** |");
        let start = layout
            .find(&header)
            .unwrap_or_else(|| panic!("docs/layout.md has no row {header}"));
        let rest = &layout[start..];
        let end = rest[header.len()..]
            .find("| **")
            .map_or(rest.len(), |i| i + header.len());
        let section = spans(&rest[..end]);
        let mut files = Vec::new();
        rust_files(&root().join(krate).join("src"), "", &mut files);
        files.sort();
        for rel in files {
            if !names_file(&section, &rel) {
                missing.push(format!("{krate}/src/{rel}"));
            }
        }
    }
    // The facade's own.
    let mut files = Vec::new();
    rust_files(&root().join("src"), "", &mut files);
    for rel in files {
        if !spans(&layout).contains(&format!("src/{rel}").as_str()) {
            missing.push(format!("src/{rel}"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/layout.md does not name {missing:#?}"
    );
}
