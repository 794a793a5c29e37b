//! [`Sandbox`]: which files the built-in tools may read, and how a path a
//! model gives is resolved to one.
//!
//! A path is never handed to the operating system whole. It is walked one
//! name at a time from a handle on an allowed root, each step relative to
//! the directory handle reached before it and without following a link
//! (`openat` and `fstatat` with `O_NOFOLLOW` / `AT_SYMLINK_NOFOLLOW`); a
//! link is read (`readlinkat`) and its target walked the same way. Outside
//! the roots, nothing is looked up at all: a path that leaves them, by its
//! text or through a link, is refused by its text alone. So what a tool
//! reads or lists is what was checked, however the names are swapped
//! meanwhile, and whether anything exists outside is never told.

#![cfg_attr(not(unix), allow(dead_code))]

use std::fs::File;
use std::io::{self, Read as _};
use std::path::{Component, Path, PathBuf};

/// Where the built-in file tools ([`analyze_media`](super::analyze_media()),
/// [`list_files`](super::list_files()), [`read_file`](super::read_file())) may
/// read.
///
/// A path the model gives is resolved as follows: an absolute path as
/// given; otherwise relative to the working directory, then relative to
/// the session's staging directory (the turn's
/// [`ToolContext::workspace`](kesoku_core::ToolContext::workspace)): the
/// first of these found inside a root is taken. With every symlink
/// resolved, the file must lie under one of the allowed roots: the working
/// and staging directories, unless [`with_roots`](Self::with_roots) says
/// otherwise. A link may lead from one root into another.
///
/// The path is walked one name at a time from a handle on the root, each
/// step relative to the directory opened before it and never following a
/// link implicitly, so a path swapped for a symlink while it is walked
/// cannot lead outside; a path that leaves the roots (by `..`, an absolute
/// path or a link) is refused without anything outside being looked up, so
/// the answer is the same whether a file exists there or not. A file is
/// read up to the size limit and no further, even if it grows meanwhile.
///
/// A *hard* link inside a root is the file itself, wherever its other
/// names are: it is read like any other file in the root. Making one takes
/// write access to the root and (with Linux's default
/// `fs.protected_hardlinks`) ownership of the file, so whoever can write in
/// a root can show the tools any file they own; keep roots writable only
/// by those trusted to read what they could link there.
///
/// The roots themselves (and the directories above them) are trusted: they
/// are resolved by their path when a tool runs. The tools need a Unix
/// platform (`openat` and friends); elsewhere they refuse every path
/// ([`SandboxError::Unsupported`]).
///
/// An [`Agent`](crate::Agent) puts its sandbox in the context of every
/// turn ([`AgentBuilder::sandbox`](crate::AgentBuilder::sandbox)); a tool
/// run without one uses `Sandbox::new(current directory)`.
///
/// ```
/// use kesoku_agent::tools::Sandbox;
///
/// let sandbox = Sandbox::new("/srv/agent")
///     .with_roots(["/srv/agent", "/srv/shared"])
///     .with_max_file_size(5 << 20);
/// assert_eq!(sandbox.max_file_size(), 5 << 20);
/// assert_eq!(sandbox.working_dir(), std::path::Path::new("/srv/agent"));
/// ```
#[derive(Debug, Clone)]
pub struct Sandbox {
    working_dir: PathBuf,
    /// `None`: the working directory and the session's staging directory.
    roots: Option<Vec<PathBuf>>,
    max_file_size: u64,
}

/// The largest file the tools read by default: 20 MB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 20_000_000;

/// The most symlinks one path may pass through (Linux's own limit).
const MAX_LINKS: usize = 40;
/// The deepest a walk goes below a root: each level holds a directory
/// handle open while the path is walked.
const MAX_DEPTH: usize = 256;

impl Sandbox {
    /// A sandbox whose working directory is `working_dir`; the roots are
    /// it and the session's staging directory, and files may be up to
    /// [`DEFAULT_MAX_FILE_SIZE`].
    /// A relative `working_dir` is made absolute now, against the current
    /// directory: a later change of the process's current directory does
    /// not move the sandbox.
    pub fn new(working_dir: impl Into<PathBuf>) -> Self {
        Sandbox {
            working_dir: absolute(working_dir.into()),
            roots: None,
            max_file_size: DEFAULT_MAX_FILE_SIZE,
        }
    }

    /// Only files under these directories may be read (instead of the
    /// working and staging directories). A root that does not exist
    /// admits nothing.
    #[must_use]
    pub fn with_roots<P: Into<PathBuf>>(mut self, roots: impl IntoIterator<Item = P>) -> Self {
        self.roots = Some(roots.into_iter().map(|r| absolute(r.into())).collect());
        self
    }

    /// The largest file, in bytes, a tool reads.
    #[must_use]
    pub fn with_max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes;
        self
    }

    /// The working directory relative paths are resolved against first.
    pub fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    /// The largest file, in bytes, a tool reads.
    pub fn max_file_size(&self) -> u64 {
        self.max_file_size
    }

    /// The roots as configured for a turn with `staging`.
    fn given_roots<'a>(&'a self, staging: Option<&'a Path>) -> Vec<&'a Path> {
        match &self.roots {
            Some(roots) => roots.iter().map(PathBuf::as_path).collect(),
            None => std::iter::once(self.working_dir.as_path())
                .chain(staging)
                .collect(),
        }
    }

    /// The candidates for `path`, in the order they are tried: each as it
    /// is shown, and as it is walked (from the working or staging
    /// directory resolved now, so a link naming either is followed once,
    /// here, as for a root).
    fn candidates(&self, path: &Path, staging: Option<&Path>) -> Vec<(PathBuf, PathBuf)> {
        if path.is_absolute() {
            return vec![(path.to_path_buf(), path.to_path_buf())];
        }
        std::iter::once(self.working_dir.as_path())
            .chain(staging)
            .map(|base| {
                let real = std::fs::canonicalize(base).unwrap_or_else(|_| lexical(base));
                (base.join(path), real.join(path))
            })
            .collect()
    }
}

/// The error for `path` outside `roots`.
fn outside(path: &str, roots: &[PathBuf]) -> SandboxError {
    SandboxError::Outside {
        path: path.to_owned(),
        roots: if roots.is_empty() {
            "none exists".to_owned()
        } else {
            roots
                .iter()
                .map(|r| format!("'{}'", r.display()))
                .collect::<Vec<_>>()
                .join(", ")
        },
    }
}

/// `p` made absolute against the current directory (as it is, if that is
/// unknown).
fn absolute(p: PathBuf) -> PathBuf {
    std::path::absolute(&p).unwrap_or(p)
}

/// `p` made absolute with `.` and `..` folded by their text, without
/// looking at the file system.
fn lexical(p: &Path) -> PathBuf {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// A file opened inside the sandbox, to be read up to the limit.
#[derive(Debug)]
pub(crate) struct Opened {
    file: File,
    /// Its real path (as walked).
    pub(crate) path: PathBuf,
    /// Its size when it was opened.
    size: u64,
    limit: u64,
}

impl Opened {
    /// Its bytes, read up to the size limit and never past it: a file
    /// that grew over the limit since it was opened is refused, not read
    /// on. `shown` is the path as given.
    pub(crate) fn read(mut self, shown: &str) -> Result<Vec<u8>, SandboxError> {
        let io = |e: io::Error| SandboxError::Io {
            path: shown.to_owned(),
            message: e.to_string(),
        };
        let mut bytes = Vec::with_capacity(usize::try_from(self.size.min(self.limit)).unwrap_or(0));
        (&mut self.file)
            .take(self.limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(io)?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > self.limit {
            let now = self.file.metadata().map_or(0, |m| m.len());
            return Err(SandboxError::TooLarge {
                path: shown.to_owned(),
                size: now.max(read),
                limit: self.limit,
            });
        }
        Ok(bytes)
    }
}

/// One line of a directory listing, before it is sorted.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The name, escaped ([`escape_name`]).
    pub(crate) name: String,
    pub(crate) kind: EntryKind,
}

/// What a listed entry is.
#[derive(Debug)]
pub(crate) enum EntryKind {
    Dir,
    File(u64),
    /// A link (or a chain of links) leading out of every root: where is
    /// not told, nor whether anything is there.
    LinkOut,
    /// A link inside whose target does not exist.
    BrokenLink,
    /// A device, a socket or a pipe.
    Special,
    Unreadable(String),
}

/// A listed directory: its real path and its entries, unsorted.
#[derive(Debug)]
pub(crate) struct Listing {
    pub(crate) path: PathBuf,
    pub(crate) entries: Vec<Entry>,
}

/// `name` as one line can show it: `\` doubled, control characters (a
/// newline among them) as `\n`, `\t`, `\r` or `\u{..}`, and bytes that are
/// not UTF-8 as `\xNN`, so a name cannot add a line or pass for another.
pub(crate) fn escape_name(name: &std::ffi::OsStr) -> String {
    let bytes = name.as_encoded_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                // Unicode's own line and paragraph separators too.
                c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                    use std::fmt::Write as _;
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            use std::fmt::Write as _;
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

#[cfg(unix)]
mod walk;

#[cfg(not(unix))]
impl Sandbox {
    /// Refused: the walk needs `openat` (see [`SandboxError::Unsupported`]).
    pub(crate) fn open_file(
        &self,
        path: &str,
        _staging: Option<&Path>,
    ) -> Result<Opened, SandboxError> {
        Err(SandboxError::Unsupported {
            path: path.to_owned(),
        })
    }

    /// Refused: the walk needs `openat` (see [`SandboxError::Unsupported`]).
    pub(crate) fn list_dir(
        &self,
        path: &str,
        _staging: Option<&Path>,
    ) -> Result<Listing, SandboxError> {
        Err(SandboxError::Unsupported {
            path: path.to_owned(),
        })
    }
}

/// Why a built-in tool would not read a path. Its text is what the model
/// is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// No candidate exists.
    #[error("file '{path}' does not exist (looked for {looked})")]
    NotFound {
        /// The path as given.
        path: String,
        /// The candidates tried.
        looked: String,
    },
    /// It resolves outside every root.
    #[error(
        "'{path}' is outside the directories this tool may read ({roots}); give a path inside one of them"
    )]
    Outside {
        /// The path as given.
        path: String,
        /// The roots.
        roots: String,
    },
    /// A file was wanted.
    #[error("'{path}' is a directory, not a file; list it with `list_files`")]
    Directory {
        /// The path as given.
        path: String,
    },
    /// A directory was wanted.
    #[error("'{path}' is not a directory")]
    NotADirectory {
        /// The path as given.
        path: String,
    },
    /// Neither a regular file nor a directory (a device, a socket, a pipe).
    #[error("'{path}' is not a regular file")]
    NotAFile {
        /// The path as given.
        path: String,
    },
    /// Over the size limit (when it was opened, or by the time the limit
    /// was read: a file growing meanwhile is not read past it).
    #[error("'{path}' is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The path as given.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The file system refused.
    #[error("cannot read '{path}': {message}")]
    Io {
        /// The path as given.
        path: String,
        /// Why.
        message: String,
    },
    /// This platform has no `openat`, which the sandbox needs to walk a
    /// path without races: the tools refuse rather than check paths
    /// they could not hold still.
    #[error(
        "cannot read '{path}': the file tools' sandbox needs a Unix platform (openat), and this is not one"
    )]
    Unsupported {
        /// The path as given.
        path: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_working_directory_is_fixed_when_the_sandbox_is_made() {
        let sandbox = Sandbox::new(".").with_roots(["sub"]);
        let cwd = std::env::current_dir().unwrap();
        assert!(sandbox.working_dir().is_absolute());
        assert_eq!(lexical(sandbox.working_dir()), cwd);
        assert_eq!(sandbox.roots.as_deref(), Some(&[cwd.join("sub")][..]));
    }

    #[test]
    fn names_are_escaped_onto_one_line() {
        use std::ffi::OsStr;
        assert_eq!(escape_name(OsStr::new("a.txt")), "a.txt");
        assert_eq!(escape_name(OsStr::new("a\nb")), "a\\nb");
        assert_eq!(escape_name(OsStr::new("a\\nb")), "a\\\\nb");
        assert_eq!(
            escape_name(OsStr::new("é\u{7f}\u{2028}")),
            "é\\u{7f}\\u{2028}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt as _;
            assert_eq!(escape_name(OsStr::from_bytes(b"x\xffy")), "x\\xffy");
        }
    }
}
