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

use std::collections::VecDeque;
use std::ffi::OsString;
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
mod walk {
    //! The walk itself, on Unix.

    use std::ffi::OsStr;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};

    use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
    use rustix::io::Errno;

    use super::{
        Component, Entry, EntryKind, File, Listing, MAX_DEPTH, MAX_LINKS, Opened, OsString, Path,
        PathBuf, Sandbox, SandboxError, VecDeque, escape_name, io, lexical, outside,
    };

    /// An allowed root, open.
    struct Root {
        /// Canonical.
        real: PathBuf,
        /// As configured (absolute, `.` and `..` folded): a path spelt so
        /// enters the root too, as it would have before the root was
        /// resolved.
        given: PathBuf,
        fd: OwnedFd,
    }

    /// The roots of one call, open.
    pub(super) struct Roots(Vec<Root>);

    impl Roots {
        /// The canonical paths, for messages.
        fn reals(&self) -> Vec<PathBuf> {
            self.0.iter().map(|r| r.real.clone()).collect()
        }

        /// Where the walk is at the textual `p`: inside the root `p` names
        /// or lies under (by either spelling), with the rest of `p` queued
        /// to be walked from it; above the roots, if `p` lies on the way to
        /// one; `None` if it leads to none.
        fn at(&self, p: PathBuf, queue: &mut VecDeque<Step>) -> Option<Place> {
            for (i, r) in self.0.iter().enumerate() {
                for base in [&r.real, &r.given] {
                    if let Ok(rest) = p.strip_prefix(base) {
                        for c in rest.components().rev() {
                            queue.push_front(Step::Name(c.as_os_str().to_owned()));
                        }
                        return Some(Place::Inside {
                            root: i,
                            dirs: Vec::new(),
                        });
                    }
                }
            }
            self.0
                .iter()
                .any(|r| r.real.starts_with(&p) || r.given.starts_with(&p))
                .then_some(Place::Above(p))
        }
    }

    /// One step of a path.
    enum Step {
        Root,
        Up,
        Name(OsString),
    }

    /// The steps of `path`, `.` left out.
    fn steps(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
        path.components().filter_map(|c| match c {
            Component::RootDir | Component::Prefix(_) => Some(Step::Root),
            Component::ParentDir => Some(Step::Up),
            Component::Normal(n) => Some(Step::Name(n.to_owned())),
            Component::CurDir => None,
        })
    }

    /// Where a walk is.
    enum Place {
        /// Outside every root, on the way to one: nothing here is looked
        /// up, the path is only text.
        Above(PathBuf),
        /// Inside root `root`, in the directories opened from it, each
        /// with its name.
        Inside {
            root: usize,
            dirs: Vec<(OwnedFd, OsString)>,
        },
    }

    /// What a walk reached.
    pub(super) enum Reached {
        Dir {
            fd: OwnedFd,
            path: PathBuf,
        },
        /// Anything but a directory: the directory it is in, its name and
        /// what `fstatat` said of it (without following it).
        Other {
            parent: OwnedFd,
            name: OsString,
            stat: Stat,
            path: PathBuf,
        },
    }

    /// Why a walk reached nothing.
    pub(super) enum Miss {
        NotFound,
        Outside,
        Io(io::Error),
    }

    impl From<Errno> for Miss {
        fn from(e: Errno) -> Self {
            match e {
                Errno::NOENT | Errno::NOTDIR => Miss::NotFound,
                e => Miss::Io(e.into()),
            }
        }
    }

    /// Opens the roots that exist.
    pub(super) fn roots(sandbox: &Sandbox, staging: Option<&Path>) -> Roots {
        Roots(
            sandbox
                .given_roots(staging)
                .into_iter()
                .filter_map(|given| {
                    let real = std::fs::canonicalize(given).ok()?;
                    let fd = rustix::fs::open(
                        &real,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .ok()?;
                    Some(Root {
                        given: lexical(given),
                        real,
                        fd,
                    })
                })
                .collect(),
        )
    }

    /// Walks the absolute `path` (see the module's doc).
    pub(super) fn walk(roots: &Roots, path: &Path) -> Result<Reached, Miss> {
        let mut queue: VecDeque<Step> = steps(path).collect();
        // `/` always leads to a root (or is one); so does every directory
        // above one, which is all `..` ever reaches from above or inside.
        let top_of = |queue: &mut VecDeque<Step>, p: PathBuf| {
            roots
                .at(p, queue)
                .unwrap_or(Place::Above(PathBuf::from("/")))
        };
        let mut place = top_of(&mut queue, PathBuf::from("/"));
        let mut links = 0;
        while let Some(step) = queue.pop_front() {
            match (step, &mut place) {
                (Step::Root, _) => place = top_of(&mut queue, PathBuf::from("/")),
                (Step::Up, Place::Above(p)) => {
                    let up = p
                        .parent()
                        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
                    place = top_of(&mut queue, up);
                }
                (Step::Up, Place::Inside { root, dirs }) => {
                    if dirs.pop().is_none() {
                        let up = roots.0[*root]
                            .real
                            .parent()
                            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
                        place = top_of(&mut queue, up);
                    }
                }
                (Step::Name(name), Place::Above(p)) => {
                    // Leaving the roots: refused unlooked.
                    place = roots.at(p.join(&name), &mut queue).ok_or(Miss::Outside)?;
                }
                (Step::Name(name), Place::Inside { root, dirs }) => {
                    let top = top(roots, *root, dirs);
                    let stat =
                        rustix::fs::statat(top, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
                    match FileType::from_raw_mode(stat.st_mode) {
                        FileType::Symlink => {
                            links += 1;
                            if links > MAX_LINKS {
                                return Err(Miss::Io(Errno::LOOP.into()));
                            }
                            let target = rustix::fs::readlinkat(top, name.as_os_str(), Vec::new())?;
                            let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
                            // The target's steps, then what followed the
                            // link; a relative target from the link's
                            // directory, where the walk is.
                            for s in steps(&target).rev() {
                                queue.push_front(s);
                            }
                        }
                        FileType::Directory => {
                            if dirs.len() >= MAX_DEPTH {
                                return Err(Miss::Io(Errno::NAMETOOLONG.into()));
                            }
                            let fd = rustix::fs::openat(
                                top,
                                name.as_os_str(),
                                OFlags::RDONLY
                                    | OFlags::DIRECTORY
                                    | OFlags::NOFOLLOW
                                    | OFlags::CLOEXEC,
                                Mode::empty(),
                            )
                            .map_err(changed)?;
                            dirs.push((fd, name));
                        }
                        _ if queue.is_empty() => {
                            let parent = match dirs.pop() {
                                Some((fd, dir)) => {
                                    let path = path_of(roots, *root, dirs).join(dir);
                                    return Ok(Reached::Other {
                                        parent: fd,
                                        path: path.join(&name),
                                        name,
                                        stat,
                                    });
                                }
                                None => roots.0[*root].fd.try_clone().map_err(Miss::Io)?,
                            };
                            return Ok(Reached::Other {
                                parent,
                                path: roots.0[*root].real.join(&name),
                                name,
                                stat,
                            });
                        }
                        // A file where a directory was wanted.
                        _ => return Err(Miss::NotFound),
                    }
                }
            }
        }
        match place {
            Place::Above(_) => Err(Miss::Outside),
            Place::Inside { root, mut dirs } => {
                let path = path_of(roots, root, &dirs);
                let fd = match dirs.pop() {
                    Some((fd, _)) => fd,
                    None => roots.0[root].fd.try_clone().map_err(Miss::Io)?,
                };
                Ok(Reached::Dir { fd, path })
            }
        }
    }

    /// An entry that changed between `fstatat` and `openat`: a name
    /// swapped meanwhile (for a link, which `O_NOFOLLOW` refuses).
    fn changed(e: Errno) -> Miss {
        Miss::Io(io::Error::other(format!(
            "it changed while it was opened ({})",
            io::Error::from(e)
        )))
    }

    /// The directory a walk inside `root` is in.
    fn top<'a>(roots: &'a Roots, root: usize, dirs: &'a [(OwnedFd, OsString)]) -> BorrowedFd<'a> {
        dirs.last()
            .map_or_else(|| roots.0[root].fd.as_fd(), |(fd, _)| fd.as_fd())
    }

    fn path_of(roots: &Roots, root: usize, dirs: &[(OwnedFd, OsString)]) -> PathBuf {
        let mut path = roots.0[root].real.clone();
        for (_, name) in dirs {
            path.push(name);
        }
        path
    }

    impl Sandbox {
        /// What `path` leads to: the first candidate found inside a root.
        fn locate(
            &self,
            path: &str,
            staging: Option<&Path>,
        ) -> Result<(Roots, Reached), SandboxError> {
            let roots = roots(self, staging);
            let mut looked = Vec::new();
            let mut led_outside = false;
            for (shown, walked) in self.candidates(Path::new(path), staging) {
                match walk(&roots, &walked) {
                    Ok(reached) => return Ok((roots, reached)),
                    Err(Miss::NotFound) => looked.push(format!("'{}'", shown.display())),
                    // Like a candidate not found: the next is tried, and
                    // whether anything is out there plays no part.
                    Err(Miss::Outside) => led_outside = true,
                    Err(Miss::Io(e)) => {
                        return Err(SandboxError::Io {
                            path: path.to_owned(),
                            message: e.to_string(),
                        });
                    }
                }
            }
            if led_outside {
                return Err(outside(path, &roots.reals()));
            }
            Err(SandboxError::NotFound {
                path: path.to_owned(),
                looked: looked.join(", "),
            })
        }

        /// Opens the regular file `path` resolves to for reading, to be
        /// read up to the size limit.
        pub(crate) fn open_file(
            &self,
            path: &str,
            staging: Option<&Path>,
        ) -> Result<Opened, SandboxError> {
            let io = |e: io::Error| SandboxError::Io {
                path: path.to_owned(),
                message: e.to_string(),
            };
            let (parent, name, stat, real) = match self.locate(path, staging)?.1 {
                Reached::Dir { .. } => {
                    return Err(SandboxError::Directory {
                        path: path.to_owned(),
                    });
                }
                Reached::Other {
                    parent,
                    name,
                    stat,
                    path,
                } => (parent, name, stat, path),
            };
            // A pipe or a device could block the open itself.
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return Err(SandboxError::NotAFile {
                    path: path.to_owned(),
                });
            }
            // Not following a link, and without waiting: a name swapped
            // for a link since is refused, one swapped for a pipe fails
            // the check below instead of blocking (reading a regular file
            // ignores the flag).
            let fd = rustix::fs::openat(
                &parent,
                name.as_os_str(),
                OFlags::RDONLY
                    | OFlags::NOFOLLOW
                    | OFlags::NONBLOCK
                    | OFlags::NOCTTY
                    | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| {
                io(io::Error::other(format!(
                    "it changed while it was opened ({})",
                    io::Error::from(e)
                )))
            })?;
            let opened = rustix::fs::fstat(&fd).map_err(|e| io(e.into()))?;
            if (opened.st_dev, opened.st_ino) != (stat.st_dev, stat.st_ino)
                || FileType::from_raw_mode(opened.st_mode) != FileType::RegularFile
            {
                return Err(io(io::Error::other("it changed while it was opened")));
            }
            let size = u64::try_from(opened.st_size).unwrap_or(0);
            if size > self.max_file_size {
                return Err(SandboxError::TooLarge {
                    path: path.to_owned(),
                    size,
                    limit: self.max_file_size,
                });
            }
            Ok(Opened {
                file: File::from(fd),
                path: real,
                size,
                limit: self.max_file_size,
            })
        }

        /// The entries of the directory `path` resolves to, each described
        /// without following it out of the roots.
        pub(crate) fn list_dir(
            &self,
            path: &str,
            staging: Option<&Path>,
        ) -> Result<Listing, SandboxError> {
            let io = |e: io::Error| SandboxError::Io {
                path: path.to_owned(),
                message: e.to_string(),
            };
            let (roots, reached) = self.locate(path, staging)?;
            let Reached::Dir { fd, path: real } = reached else {
                return Err(SandboxError::NotADirectory {
                    path: path.to_owned(),
                });
            };
            // The directory opened and checked, read through its handle;
            // each entry looked at relative to it.
            let dir = rustix::fs::Dir::read_from(&fd).map_err(|e| io(e.into()))?;
            let mut entries = Vec::new();
            for entry in dir {
                let entry = entry.map_err(|e| io(e.into()))?;
                let name = OsStr::from_bytes(entry.file_name().to_bytes());
                if name == "." || name == ".." {
                    continue;
                }
                let kind = match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                    // Gone since it was listed.
                    Err(Errno::NOENT) => continue,
                    Err(e) => EntryKind::Unreadable(io::Error::from(e).to_string()),
                    Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                        FileType::Directory => EntryKind::Dir,
                        FileType::RegularFile => {
                            EntryKind::File(u64::try_from(stat.st_size).unwrap_or(0))
                        }
                        // Followed only where it stays inside.
                        FileType::Symlink => match walk(&roots, &real.join(name)) {
                            Ok(Reached::Dir { .. }) => EntryKind::Dir,
                            Ok(Reached::Other { stat, .. })
                                if FileType::from_raw_mode(stat.st_mode)
                                    == FileType::RegularFile =>
                            {
                                EntryKind::File(u64::try_from(stat.st_size).unwrap_or(0))
                            }
                            Ok(Reached::Other { .. }) => EntryKind::Special,
                            Err(Miss::Outside) => EntryKind::LinkOut,
                            Err(Miss::NotFound) => EntryKind::BrokenLink,
                            Err(Miss::Io(e)) => EntryKind::Unreadable(e.to_string()),
                        },
                        _ => EntryKind::Special,
                    },
                };
                entries.push(Entry {
                    name: escape_name(name),
                    kind,
                });
            }
            Ok(Listing {
                path: real,
                entries,
            })
        }
    }
}

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
