//! Each session's workspace directory, under the agent's sessions
//! directory: a session id made one safe directory name.

use std::fmt::Write as _;

use super::shared::Shared;

/// The workspace directory of `session`, under the agent's sessions
/// directory.
pub(crate) fn workspace(shared: &Shared, session: &str) -> Option<std::path::PathBuf> {
    shared
        .sessions_dir
        .as_ref()
        .map(|root| root.join(dir_name(session)))
}

/// The longest file name most file systems take, in bytes.
const MAX_NAME: usize = 255;
/// How much of an escaped id a long name keeps, before `~` and 64 hex
/// digits of its hash.
const KEPT: usize = 190;

/// A session id as one safe directory name: letters, digits, `-` and `_`
/// kept, anything else escaped, so no id can reach outside the sessions
/// directory or collide with another. An escaped id too long for a file
/// name is cut and ends in `~` and its SHA-256 (which `~`, never part of
/// an escaped id, sets apart from every name kept whole).
fn dir_name(session: &str) -> String {
    let mut out = String::with_capacity(session.len());
    for b in session.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    if out.len() > MAX_NAME {
        // Cut before an escape, not inside one (all of it is ASCII).
        let mut cut = KEPT;
        while let Some(p) = out[cut.saturating_sub(2)..cut].find('%') {
            cut = cut - 2 + p;
        }
        out.truncate(cut);
        out.push('~');
        for b in ring::digest::digest(&ring::digest::SHA256, session.as_bytes()).as_ref() {
            let _ = write!(out, "{b:02x}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::dir_name;

    #[test]
    fn session_directories_cannot_escape() {
        assert_eq!(dir_name("session-1"), "session-1");
        assert_eq!(dir_name("../etc"), "%2E%2E%2Fetc");
        assert_eq!(dir_name("a/b"), "a%2Fb");
        assert_ne!(dir_name("a/b"), dir_name("a_b"));
        assert_eq!(dir_name(""), "%00");
    }

    #[test]
    fn long_session_ids_get_short_distinct_stable_names() {
        let long = "é".repeat(60);
        let name = dir_name(&long);
        assert!(name.len() <= 255, "{} bytes", name.len());
        assert_eq!(name, dir_name(&long));
        // Not cut inside an escape.
        let (kept, hash) = name.split_once('~').unwrap();
        assert!(kept.len() % 3 == 0 && kept.starts_with("%C3%A9"), "{kept}");
        assert_eq!(hash.len(), 64);
        // Ids alike up to the cut still differ.
        let other = format!("{}e", "é".repeat(59));
        assert_ne!(dir_name(&other), name);
        // A name at the limit is kept whole.
        let fits = "a".repeat(255);
        assert_eq!(dir_name(&fits), fits);
        assert_ne!(dir_name(&"a".repeat(256)), "a".repeat(256));
        assert!(dir_name(&"a".repeat(256)).len() <= 255);
    }
}
