//! [`Sandbox`]: which files the built-in tools may read, and how a path a
//! model gives is resolved to one.

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Where the built-in file tools ([`analyze_media`](super::analyze_media()),
/// [`list_files`](super::list_files()), [`read_file`](super::read_file())) may
/// read.
///
/// A path the model gives is resolved as follows: an absolute path as
/// given; otherwise relative to the working directory, if it exists there;
/// otherwise relative to the session's staging directory (the turn's
/// [`ToolContext::workspace`](kesoku_core::ToolContext::workspace)). With
/// every symlink resolved, the file must then lie under one of the allowed
/// roots: the working and staging directories, unless
/// [`with_roots`](Self::with_roots) says otherwise. The check is made on
/// the file as opened, so a path swapped for a symlink after the check
/// cannot lead outside either.
///
/// An [`Agent`](crate::Agent) puts its sandbox in the context of every
/// turn ([`AgentBuilder::sandbox`](crate::AgentBuilder::sandbox)); a tool
/// run without one uses `Sandbox::new(current directory)`.
///
/// ```
/// use kesoku_llm::tools::Sandbox;
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

    /// The allowed roots, canonical; those that do not exist are left out.
    fn roots(&self, staging: Option<&Path>) -> Vec<PathBuf> {
        let given: Vec<&Path> = match &self.roots {
            Some(roots) => roots.iter().map(PathBuf::as_path).collect(),
            None => std::iter::once(self.working_dir.as_path())
                .chain(staging)
                .collect(),
        };
        given
            .into_iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .collect()
    }

    /// The candidates for `path`, in the order they are tried.
    fn candidates(&self, path: &Path, staging: Option<&Path>) -> Vec<PathBuf> {
        if path.is_absolute() {
            return vec![path.to_path_buf()];
        }
        std::iter::once(self.working_dir.join(path))
            .chain(staging.map(|s| s.join(path)))
            .collect()
    }

    /// Resolves `path` and checks it against the roots, without opening
    /// it: the first candidate that exists, canonical.
    pub(crate) fn resolve(
        &self,
        path: &str,
        staging: Option<&Path>,
    ) -> Result<PathBuf, SandboxError> {
        let roots = self.roots(staging);
        // A candidate that leaves every root by its text alone (`../..`,
        // an absolute path elsewhere) is refused before anything is looked
        // up, so whether a file exists outside is not told either.
        let given_roots: Vec<PathBuf> = match &self.roots {
            Some(r) => r.iter().map(|r| lexical(r)).collect(),
            None => std::iter::once(self.working_dir.as_path())
                .chain(staging)
                .map(lexical)
                .collect(),
        };
        let inside = |c: &PathBuf| {
            let c = lexical(c);
            roots.iter().chain(&given_roots).any(|r| c.starts_with(r))
        };
        let candidates: Vec<PathBuf> = self
            .candidates(Path::new(path), staging)
            .into_iter()
            .filter(inside)
            .collect();
        if candidates.is_empty() {
            return Err(outside(path, &roots));
        }
        let Some(found) = candidates
            .iter()
            .find_map(|c| std::fs::canonicalize(c).ok())
        else {
            // Where a link leads outside, whether a file exists there is
            // not told either: the deepest part of the path that exists
            // decides.
            let leads_outside = |c: &PathBuf| {
                c.ancestors()
                    .find_map(|a| std::fs::canonicalize(a).ok())
                    .is_none_or(|a| !roots.iter().any(|r| a.starts_with(r)))
            };
            if candidates.iter().any(leads_outside) {
                return Err(outside(path, &roots));
            }
            return Err(SandboxError::NotFound {
                path: path.to_owned(),
                looked: candidates
                    .iter()
                    .map(|c| format!("'{}'", c.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        self.check(path, &found, staging)?;
        Ok(found)
    }

    /// `real` (canonical) lies under a root.
    fn check(&self, path: &str, real: &Path, staging: Option<&Path>) -> Result<(), SandboxError> {
        let roots = self.roots(staging);
        if roots.iter().any(|r| real.starts_with(r)) {
            return Ok(());
        }
        Err(outside(path, &roots))
    }

    /// Opens the regular file `path` resolves to for reading, checking
    /// the file as opened (not only its path) against the roots and the
    /// size limit.
    pub(crate) fn open_file(
        &self,
        path: &str,
        staging: Option<&Path>,
    ) -> Result<Opened, SandboxError> {
        let real = self.resolve(path, staging)?;
        let io = |e: io::Error| SandboxError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let meta = std::fs::metadata(&real).map_err(io)?;
        if meta.is_dir() {
            return Err(SandboxError::Directory {
                path: path.to_owned(),
            });
        }
        // A pipe or a device could block the open itself.
        if !meta.is_file() {
            return Err(SandboxError::NotAFile {
                path: path.to_owned(),
            });
        }
        let file = open_nonblocking(&real).map_err(io)?;
        // What was opened, not what the path names now: a component
        // swapped for a symlink since `resolve` is caught here.
        let opened = opened_path(&file, &real).map_err(io)?;
        self.check(path, &opened, staging)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(SandboxError::NotAFile {
                path: path.to_owned(),
            });
        }
        if meta.len() > self.max_file_size {
            return Err(SandboxError::TooLarge {
                path: path.to_owned(),
                size: meta.len(),
                limit: self.max_file_size,
            });
        }
        Ok(Opened {
            file,
            path: opened,
            size: meta.len(),
        })
    }

    /// The directory `path` resolves to, checked against the roots.
    pub(crate) fn open_dir(
        &self,
        path: &str,
        staging: Option<&Path>,
    ) -> Result<PathBuf, SandboxError> {
        let real = self.resolve(path, staging)?;
        if !real.is_dir() {
            return Err(SandboxError::NotADirectory {
                path: path.to_owned(),
            });
        }
        Ok(real)
    }

    /// Whether `real` (canonical) lies under a root: for the entries a
    /// listing shows.
    pub(crate) fn admits(&self, real: &Path, staging: Option<&Path>) -> bool {
        self.roots(staging).iter().any(|r| real.starts_with(r))
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

/// A file opened inside the sandbox.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) file: File,
    /// Its real path.
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
}

/// Opens `path` for reading without waiting: a file swapped for a pipe
/// since it was checked fails the check after the open instead of
/// blocking it (reading a regular file ignores the flag).
fn open_nonblocking(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    options.open(path)
}

/// The real path of the opened `file`: on Linux, what `/proc/self/fd`
/// says; elsewhere, `real` if it still names the same file (device and
/// inode), else an error.
fn opened_path(file: &File, real: &Path) -> io::Result<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(p) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            return Ok(p);
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (file.metadata()?, std::fs::metadata(real)?);
        if a.dev() == b.dev() && a.ino() == b.ino() {
            return Ok(real.to_path_buf());
        }
        Err(io::Error::other("the file changed while it was opened"))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        Ok(real.to_path_buf())
    }
}

/// `p` made absolute against the current directory (as it is, if that is
/// unknown).
fn absolute(p: PathBuf) -> PathBuf {
    std::path::absolute(&p).unwrap_or(p)
}

/// `p` made absolute with `.` and `..` folded by their text, without
/// looking at the file system (so a link is not followed): only ever used
/// to refuse, never to admit.
fn lexical(p: &Path) -> PathBuf {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
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
    /// Over the size limit.
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
}
