//! The walk itself, on Unix.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use super::{
    Entry, EntryKind, Listing, MAX_DEPTH, MAX_LINKS, Opened, Sandbox, SandboxError, escape_name,
    lexical, outside,
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
#[expect(
    clippy::too_many_lines,
    reason = "one loop over a path's names, each case beside the others, read as a whole"
)]
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
                let stat = rustix::fs::statat(top, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)?;
                match FileType::from_raw_mode(stat.st_mode) {
                    FileType::Symlink => {
                        links += 1;
                        if links > MAX_LINKS {
                            return Err(Miss::Io(Errno::LOOP.into()));
                        }
                        // EINVAL: no longer a link (swapped since the stat).
                        let target = rustix::fs::readlinkat(top, name.as_os_str(), Vec::new())
                            .map_err(|e| match e {
                                Errno::INVAL => changed(e),
                                e => e.into(),
                            })?;
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
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
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
    fn locate(&self, path: &str, staging: Option<&Path>) -> Result<(Roots, Reached), SandboxError> {
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
        // A pipe or a device could block the open itself, or a device's
        // open do something: refused unopened. `stat` is the walk's
        // `fstatat` of this name itself, never of a link's target (a link
        // was walked, and one leading outside refused as outside), so this
        // tells only the type of what is inside; the opened handle's
        // `fstat` below is what decides.
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
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
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
                            if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile =>
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
