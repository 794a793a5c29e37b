//! Rustdoc parsing for `#[tool]`: the description, the `# Returns` text and the
//! documented arguments of a function. Pure string processing, std only.

/// A parsed doc comment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Docs {
    /// Text before the first heading, common indentation stripped, paragraphs kept.
    pub(crate) description: String,
    /// Body of a `# Returns` section, if any (same normalisation as description).
    pub(crate) returns: Option<String>,
    /// Entries of the arguments section, in source order (duplicates kept: the caller reports them).
    pub(crate) args: Vec<ArgDoc>,
    /// Index (into the input lines) of the arguments heading, if there is one.
    pub(crate) args_heading: Option<usize>,
    /// Lines in the arguments section that look like list items but could not be read as `name - text`.
    pub(crate) malformed: Vec<Malformed>,
}

/// One documented argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ArgDoc {
    /// The argument name, without any `r#` prefix.
    pub(crate) name: String,
    /// The description, continuation lines joined with spaces.
    pub(crate) text: String,
    /// Index of the input line holding the item's bullet.
    pub(crate) line: usize,
}

/// A list item of the arguments section that is not `name - text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Malformed {
    /// Index of the offending input line.
    pub(crate) line: usize,
    /// What was wrong, naming what was found.
    pub(crate) message: String,
}

/// Which heading the current line falls under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Description,
    Returns,
    Args,
    Other,
}

/// Parses the doc lines of a function.
pub(crate) fn parse<S: AsRef<str>>(lines: &[S]) -> Docs {
    let lines = normalize(lines);
    let mut docs = Docs::default();
    let mut description = Vec::new();
    let mut returns: Option<Vec<&str>> = None;
    let mut arg_sections: Vec<Vec<(usize, &str)>> = Vec::new();
    let mut section = Section::Description;
    let mut fence = Fence::default();
    for (i, line) in lines.iter().enumerate() {
        // Fenced lines are never headings: examples are full of `# use foo;`.
        let code = fence.step(line);
        if let Some(title) = heading(line).filter(|_| !code) {
            section = section_of(title);
            match section {
                Section::Args => {
                    docs.args_heading.get_or_insert(i);
                    arg_sections.push(Vec::new());
                }
                // Several `# Returns` sections become separate paragraphs.
                Section::Returns => returns.get_or_insert_with(Vec::new).push(""),
                Section::Description | Section::Other => {}
            }
            continue;
        }
        match section {
            Section::Description => description.push(line.as_str()),
            Section::Returns => returns.get_or_insert_with(Vec::new).push(line),
            Section::Args => arg_sections
                .last_mut()
                .expect("pushed at heading")
                .push((i, line)),
            Section::Other => {}
        }
    }
    docs.description = render(&description);
    // An empty `# Returns` section says nothing, so it is reported as absent.
    docs.returns = returns.map(|r| render(&r)).filter(|r| !r.is_empty());
    for section in &arg_sections {
        parse_args(section, &mut docs);
    }
    for arg in &mut docs.args {
        arg.text = plain_links(&arg.text);
    }
    docs
}

/// Strips `\r` and trailing spaces, expands indentation tabs, removes the common indentation.
fn normalize<S: AsRef<str>>(lines: &[S]) -> Vec<String> {
    let expanded: Vec<String> = lines.iter().map(|l| expand_indent(l.as_ref())).collect();
    let common = expanded
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| indent_width(l))
        .min()
        .unwrap_or(0);
    expanded
        .iter()
        .map(|l| skip_chars(l, common).trim_end().to_owned())
        .collect()
}

/// Drops a trailing `\r` and replaces each tab of the indentation with four spaces.
fn expand_indent(line: &str) -> String {
    let line = line.strip_suffix('\r').unwrap_or(line);
    let body = line.trim_start();
    line[..line.len() - body.len()].replace('\t', "    ") + body
}

/// Number of leading whitespace characters (not bytes: indentation may be unicode).
fn indent_width(line: &str) -> usize {
    line.chars().take_while(|c| c.is_whitespace()).count()
}

/// `line` without its first `n` characters, cut on a char boundary.
fn skip_chars(line: &str, n: usize) -> &str {
    line.char_indices().nth(n).map_or("", |(i, _)| &line[i..])
}

/// Tracks fenced code blocks (```` ``` ```` or `~~~`) across lines.
#[derive(Default)]
struct Fence(Option<(char, usize)>);

impl Fence {
    /// Feeds one line; returns whether it is part of a fenced block, fences included.
    fn step(&mut self, line: &str) -> bool {
        let t = line.trim_start();
        let marker = t.chars().next().filter(|c| matches!(c, '`' | '~'));
        let run = marker.map_or(0, |m| t.chars().take_while(|&c| c == m).count());
        match (self.0, marker) {
            (Some((ch, len)), Some(m)) if m == ch && run >= len && t[run..].trim().is_empty() => {
                self.0 = None;
                true
            }
            (Some(_), _) => true,
            (None, Some(m)) if run >= 3 => {
                self.0 = Some((m, run));
                true
            }
            (None, _) => false,
        }
    }
}

/// The title of an ATX heading (`#` to `######`, then a space), if `line` is one.
fn heading(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(' ');
    // Markdown allows up to three spaces before a heading; four make it code.
    if line.len() - t.len() > 3 {
        return None;
    }
    let rest = t.trim_start_matches('#');
    let level = t.len() - rest.len();
    ((1..=6).contains(&level) && rest.starts_with([' ', '\t'])).then(|| rest.trim())
}

/// Classifies a heading title, ignoring case, a trailing colon and closing `#`s.
fn section_of(title: &str) -> Section {
    let title = title.trim_end_matches(|c: char| c == ':' || c == '#' || c.is_whitespace());
    let is = |names: &[&str]| names.iter().any(|n| title.eq_ignore_ascii_case(n));
    if is(&["returns", "return"]) {
        Section::Returns
    } else if is(&["arguments", "args", "parameters", "params"]) {
        Section::Args
    } else {
        Section::Other
    }
}

/// Normalises markdown prose: paragraphs joined with a blank line, soft-wrapped
/// lines reflowed, list items and fenced code kept on their own lines.
fn render(lines: &[&str]) -> String {
    // Output lines, flagged `true` when they are code to keep verbatim. An empty
    // prose line separates paragraphs.
    let mut out: Vec<(String, bool)> = Vec::new();
    // Whether the last output line is prose that a wrapped line continues.
    let mut open = false;
    let mut fence = Fence::default();
    for line in lines {
        let trimmed = line.trim();
        if fence.step(line) {
            out.push(((*line).to_owned(), true));
            open = false;
        } else if trimmed.is_empty() {
            if out.last().is_some_and(|(l, code)| *code || !l.is_empty()) {
                out.push((String::new(), false));
            }
            open = false;
        } else if is_link_definition(trimmed) {
            // `[Foo]: crate::Foo` is not rendered by rustdoc either.
        } else if let Some((last, _)) = out.last_mut().filter(|_| open && !is_list_item(trimmed)) {
            last.push(' ');
            last.push_str(trimmed);
        } else {
            // List items keep their indentation so nested lists stay nested.
            let text = if is_list_item(trimmed) { line } else { trimmed };
            out.push((text.to_owned(), false));
            open = true;
        }
    }
    let out: Vec<String> = out
        .into_iter()
        .map(|(l, code)| if code { l } else { plain_links(&l) })
        .collect();
    out.join("\n").trim_end().to_owned()
}

/// Whether a trimmed line starts a markdown list item (`- `, `* `, `+ `, `1. `, `1) `).
fn is_list_item(t: &str) -> bool {
    let digits = t.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = if digits.len() < t.len() {
        digits.strip_prefix(['.', ')'])
    } else {
        t.strip_prefix(['-', '*', '+'])
    };
    rest.is_some_and(|r| r.is_empty() || r.starts_with(char::is_whitespace))
}

/// Whether a trimmed line is a link reference definition such as `[Foo]: crate::Foo`.
fn is_link_definition(t: &str) -> bool {
    t.starts_with('[')
        && closing(t, '[', ']').is_some_and(|end| {
            end > 1
                && t[end + 1..]
                    .strip_prefix(':')
                    .is_some_and(|dest| !dest.trim().is_empty())
        })
}

/// Reads the items of one arguments section into `docs`.
fn parse_args(section: &[(usize, &str)], docs: &mut Docs) {
    let mut fence = Fence::default();
    // The item being read: its index in `docs.args` and the indentation of its bullet.
    let mut open: Option<(usize, usize)> = None;
    let mut after_blank = false;
    for &(line, text) in section {
        if fence.step(text) {
            // Code does not belong in a one-line argument description.
            open = None;
            continue;
        }
        if text.trim().is_empty() {
            after_blank = true;
            continue;
        }
        let indent = indent_width(text);
        let body = text.trim();
        // A bullet indented under the open item is a nested list: part of its text.
        let nested = open.is_some_and(|(_, bullet)| indent > bullet);
        match bullet_rest(body).filter(|_| !nested) {
            Some(rest) => {
                open = None;
                match parse_item(rest) {
                    Ok((name, text)) => {
                        docs.args.push(ArgDoc { name, text, line });
                        open = Some((docs.args.len() - 1, indent));
                    }
                    Err(message) => docs.malformed.push(Malformed { line, message }),
                }
            }
            None => match open {
                // Indented lines continue the item; unindented ones only without a
                // blank line before them (markdown's lazy continuation).
                Some((i, bullet)) if indent > bullet || !after_blank => {
                    let arg_text = &mut docs.args[i].text;
                    if !arg_text.is_empty() {
                        arg_text.push(' ');
                    }
                    arg_text.push_str(body);
                }
                // Prose such as "The arguments are:" is not an argument.
                _ => open = None,
            },
        }
        after_blank = false;
    }
}

/// The part after the bullet if `body` is a list item. A backtick right after the
/// bullet (`` *`a` - x ``) is accepted too: it cannot be anything else.
fn bullet_rest(body: &str) -> Option<&str> {
    let rest = body.strip_prefix(['*', '-', '+'])?;
    if rest.is_empty() || rest.starts_with(char::is_whitespace) {
        Some(rest.trim_start())
    } else {
        rest.starts_with('`').then_some(rest)
    }
}

/// Reads `name [(type)] [sep text]` into a name (without `r#`) and a trimmed text.
/// After a backticked name the separator may be left out (`` * `a` Text ``):
/// the backticks already say where the name ends.
fn parse_item(rest: &str) -> Result<(String, String), String> {
    if rest.is_empty() {
        return Err("empty list item, expected `name - description`".to_owned());
    }
    let quoted = rest.starts_with('`');
    let (name, mut after) = split_name(rest)?;
    if after.trim_start().starts_with('(') {
        // An optional type such as `(i32)` or `(`Vec<(u8, u8)>`)`.
        let ty = after.trim_start();
        let end = closing(ty, '(', ')').ok_or_else(|| format!("unclosed `(` after `{name}`"))?;
        after = &ty[end + 1..];
    }
    let spaced = after.starts_with(char::is_whitespace);
    let after = after.trim_start();
    let text = if after.is_empty() {
        ""
    } else {
        ["—", "–", "--", "-", ":"]
            .iter()
            .find_map(|sep| after.strip_prefix(sep))
            .or_else(|| (quoted && spaced).then_some(after))
            .ok_or_else(|| {
                format!(
                    "expected `-` or `:` after `{name}`, found `{}`",
                    first_word(after)
                )
            })?
    };
    Ok((
        name.strip_prefix("r#").unwrap_or(name).to_owned(),
        text.trim().to_owned(),
    ))
}

/// Splits the leading argument name (backticked or bare) from the rest.
fn split_name(rest: &str) -> Result<(&str, &str), String> {
    if let Some(quoted) = rest.strip_prefix('`') {
        let end = quoted.find('`').ok_or_else(|| {
            format!(
                "unclosed backtick in argument name `{}`",
                first_word(quoted)
            )
        })?;
        let name = quoted[..end].trim();
        return if is_ident(name) {
            Ok((name, &quoted[end + 1..]))
        } else {
            Err(format!("`{name}` is not an argument name"))
        };
    }
    let raw = if rest.starts_with("r#") { 2 } else { 0 };
    let end = rest[raw..]
        .find(|c: char| !is_ident_char(c))
        .map_or(rest.len(), |i| i + raw);
    let (name, after) = rest.split_at(end);
    // A bare name must end at a space, `:` or `(`, so `foo-bar` is not read as `foo`.
    let ends_well =
        after.is_empty() || after.starts_with([':', '(']) || after.starts_with(char::is_whitespace);
    if is_ident(name) && ends_well {
        Ok((name, after))
    } else {
        Err(format!(
            "expected an argument name, found `{}`",
            first_word(rest)
        ))
    }
}

/// Whether `name` is a (possibly raw, possibly unicode) Rust identifier.
fn is_ident(name: &str) -> bool {
    let bare = name.strip_prefix("r#").unwrap_or(name);
    let mut chars = bare.chars();
    let starts_well = chars.next().is_some_and(|c| c.is_alphabetic() || c == '_');
    starts_well && chars.all(is_ident_char) && bare != "_"
}

/// Whether `c` may continue an identifier.
fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first whitespace-separated word of `s`, for error messages.
fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or(s)
}

/// Byte length of the inline code span at the start of `s` (which starts with a
/// backtick), or of the lone backtick run when it is never closed.
fn code_span_len(s: &str) -> usize {
    let n = s.len() - s.trim_start_matches('`').len();
    let mut i = n;
    while let Some(j) = s[i..].find('`') {
        let start = i + j;
        let run = s[start..].len() - s[start..].trim_start_matches('`').len();
        if run == n {
            return start + n;
        }
        i = start + run;
    }
    n
}

/// Byte index of the `close` matching the `open` at the start of `s`, skipping inline code.
fn closing(s: &str, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(c) = s[i..].chars().next() {
        if c == '`' {
            i += code_span_len(&s[i..]);
            continue;
        }
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return Some(i);
            }
        }
        i += c.len_utf8();
    }
    None
}

/// Turns rustdoc intra-doc links into plain text; URL links and inline code are kept.
fn plain_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find(['`', '[']) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let len = if rest.starts_with('`') {
            // Inline code is copied verbatim: `a[0]` is not a link.
            let len = code_span_len(rest);
            out.push_str(&rest[..len]);
            len
        } else if let Some((text, len)) = link(rest) {
            out.push_str(text);
            len
        } else {
            out.push('[');
            1
        };
        rest = &rest[len..];
    }
    out.push_str(rest);
    out
}

/// If `s` starts with a link to unwrap, its text and byte length.
fn link(s: &str) -> Option<(&str, usize)> {
    let close = closing(s, '[', ']')?;
    let text = &s[1..close];
    let after = &s[close + 1..];
    if after.starts_with('(') {
        let end = closing(after, '(', ')')?;
        // Web links are useful to the model as they are; paths are not.
        return (!after[..end].contains("://")).then_some((text, close + end + 2));
    }
    if after.starts_with('[') {
        // A reference link `[text][target]`.
        let end = closing(after, '[', ']')?;
        return Some((text, close + end + 2));
    }
    // Bare brackets may be prose ("[optional]"); only `[`Foo`]` is surely a link.
    let is_code = text.starts_with('`') && text.len() > 2 && code_span_len(text) == text.len();
    is_code.then_some((text, close + 1))
}

#[cfg(test)]
mod tests;
