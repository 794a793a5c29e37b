//! The built-in tools' sandbox under races: a directory swapped with a
//! link to outside while `list_files`, `read_file` and `analyze_media` run
//! on it, and a file swapped with a link to a pipe outside; and its fuzz
//! harness (proptest): random
//! paths (relative or absolute, through `..`, links in and out, relative
//! links up, a loop, missing targets) given to `read_file`, `list_files`
//! and `analyze_media`, while a thread swaps a directory with a link to
//! outside; and two trees alike inside, one with files outside and one
//! without, which must give identical answers. 256 cases each by default;
//! `PROPTEST_CASES` runs more.
#![cfg(unix)]

mod tools_support;

#[allow(clippy::wildcard_imports)]
use tools_support::*;

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_files_lists_only_the_directory_it_checked_while_it_is_swapped() {
    let d = dirs();
    let (sw, lnk) = swap_pair(&d);
    let h = Harness::new(&d);
    let swapper = Swapper::start(&sw, &lnk);
    let mut leaks = Vec::new();
    let mut unexplained = Vec::new();
    let mut listed = 0;
    for _ in 0..3000 {
        // `Harness::call` checks the secret itself; the names and sizes
        // of the outside directory must not show either.
        match h.call("list_files", json!({"dir": "sw"})).await {
            Ok(out) => {
                listed += 1;
                if ["secret.txt", "zz-outside-only", "(10 bytes)", "x/"]
                    .iter()
                    .any(|n| out.contains(n))
                {
                    leaks.push(out);
                }
            }
            // A name swapped mid-walk is said to have changed, not left
            // as the system's bare "Invalid argument" (a link's target
            // read after it became a directory again).
            Err(e) if e.contains("os error") && !e.contains("changed") => unexplained.push(e),
            Err(_) => {}
        }
    }
    let swaps = swapper.stop();
    assert!(swaps > 100, "only {swaps} swaps");
    assert!(listed > 0, "never listed");
    assert!(
        leaks.is_empty(),
        "{} of 3000 listings showed the outside, e.g. {:?}",
        leaks.len(),
        leaks[0]
    );
    assert!(
        unexplained.is_empty(),
        "{} of 3000 listings failed without saying why, e.g. {:?}",
        unexplained.len(),
        unexplained[0]
    );
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_directory_does_not_tell_what_is_outside() {
    // `sw/x` is a file inside; through the link it is a directory outside.
    let d = dirs();
    let (sw, lnk) = swap_pair(&d);
    let h = Harness::new(&d);
    let swapper = Swapper::start(&sw, &lnk);
    let mut leaks = Vec::new();
    for _ in 0..3000 {
        match h.call("read_file", json!({"path": "sw/x"})).await {
            Ok(out) => assert_eq!(numbered(&out), [(1, "inside".to_owned())]),
            Err(e) if e.contains("is a directory") || e.contains("not a regular file") => {
                leaks.push(e);
            }
            Err(_) => {}
        }
    }
    swapper.stop();
    assert!(
        leaks.is_empty(),
        "{} of 3000 reads told the type of the outside object, e.g. {:?}",
        leaks.len(),
        leaks[0]
    );
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_swapped_directory_does_not_lead_a_read_outside() {
    // `sw/y` is a file inside; through the link it is the secret. (Before
    // the walk, this held on Linux only by `/proc/self/fd`; where there
    // is no `/proc`, the check compared the file opened through the link
    // with the path followed through the same link, and read it.)
    let d = dirs();
    let (sw, lnk) = swap_pair(&d);
    fs::write(sw.join("y"), "inside\n").unwrap();
    fs::write(d.outside.join("y"), SECRET).unwrap();
    let h = Harness::new(&d);
    let swapper = Swapper::start(&sw, &lnk);
    let mut read = 0;
    // `Harness::call` fails on the secret, in the answer or sent to the
    // model (which it checks whole each time: fewer of those).
    for (tool, times) in [("read_file", 3000), ("analyze_media", 200)] {
        for _ in 0..times {
            if h.call(tool, json!({"path": "sw/y"})).await.is_ok() {
                read += 1;
            }
        }
    }
    assert!(swapper.stop() > 100);
    assert!(read > 0, "never read");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_swapped_for_a_link_to_an_outside_pipe_tells_nothing_of_it() {
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    // `f` is a file inside; swapped, it is a link to a named pipe outside.
    // A type check that followed the link (a `stat` of the path before
    // the open) answered "not a regular file" about 8% of the time.
    let d = dirs();
    let file = d.work.join("f");
    fs::write(&file, "inside\n").unwrap();
    let fifo = d.outside.join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let lnk = d.work.join("lnk");
    symlink(&fifo, &lnk).unwrap();
    // A writer waits for a reader: its open returns only once someone
    // opens the pipe for reading, which only the test itself may do.
    let ending = Arc::new(AtomicBool::new(false));
    let writer = {
        let (fifo, ending) = (fifo.clone(), Arc::clone(&ending));
        std::thread::spawn(move || {
            let opened = fs::OpenOptions::new().write(true).open(&fifo);
            (opened.is_ok(), ending.load(Ordering::SeqCst))
        })
    };
    let h = Harness::new(&d);
    let swapper = Swapper::start(&file, &lnk);
    let started = std::time::Instant::now();
    let (mut calls, mut read, mut leaks) = (0, 0, Vec::new());
    while calls < 10_000 && started.elapsed() < Duration::from_secs(60) {
        calls += 1;
        match h.call("read_file", json!({"path": "f"})).await {
            Ok(out) => {
                assert_eq!(numbered(&out), [(1, "inside".to_owned())]);
                read += 1;
            }
            // The pipe's type, in any wording: only an outside object
            // could be one here.
            Err(e)
                if ["regular", "pipe", "fifo", "special", "device"]
                    .iter()
                    .any(|w| e.to_lowercase().contains(w)) =>
            {
                leaks.push(e);
            }
            Err(_) => {}
        }
    }
    let swaps = swapper.stop();
    ending.store(true, Ordering::SeqCst);
    // Lets the writer's open return (a reader that never blocks).
    let reader = fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed())
        .open(&fifo)
        .unwrap();
    let (opened, after_the_end) = writer.join().unwrap();
    drop(reader);
    assert!(opened && after_the_end, "the pipe was opened for reading");
    assert!(swaps > 100, "only {swaps} swaps");
    assert!(read > 0, "never read in {calls} calls");
    assert!(
        leaks.is_empty(),
        "{} of {calls} reads told the type of the outside pipe, e.g. {:?}",
        leaks.len(),
        leaks[0]
    );
}

/// The names random paths are made of: what the fuzz trees hold, and a
/// few that are nowhere.
const PARTS: &[&str] = &[
    ".",
    "..",
    "a.txt",
    "sub",
    "b.txt",
    "sw",
    "lnk",
    "x",
    "in-only.txt",
    "lnk_in",
    "lnk_file_out",
    "lnk_missing_out",
    "lnk_rel_up",
    "loop",
    "secret.txt",
    "nope",
    "outside",
    "work",
    "staging",
    "a",
];

/// A fuzz tree on `d`: files and links inside, out (absolute and
/// relative), to nothing and in a loop; `swap_pair`'s `sw` and `lnk` on
/// Linux.
fn fuzz_tree(d: &Dirs) {
    fs::write(d.work.join("a.txt"), "alpha\n").unwrap();
    fs::create_dir(d.work.join("sub")).unwrap();
    fs::write(d.work.join("sub/b.txt"), "beta\n").unwrap();
    fs::write(d.staging.join("b.txt"), "staged\n").unwrap();
    symlink(d.work.join("sub"), d.work.join("lnk_in")).unwrap();
    symlink(&d.secret, d.work.join("lnk_file_out")).unwrap();
    symlink(d.outside.join("nope"), d.work.join("lnk_missing_out")).unwrap();
    symlink("../../outside", d.work.join("lnk_rel_up")).unwrap();
    symlink("../../outside", d.staging.join("lnk_rel_up")).unwrap();
    symlink("loop", d.work.join("loop")).unwrap();
}

/// A random tool call: the tool, and its path.
fn fuzz_call() -> impl proptest::strategy::Strategy<Value = (&'static str, String)> {
    use proptest::prelude::*;
    // Often into the swapped names, as races need many tries.
    let first = prop_oneof![
        3 => prop::sample::select(&["sw", "lnk"][..]),
        2 => prop::sample::select(PARTS),
    ];
    let parts = prop::collection::vec(prop::sample::select(PARTS), 0..5);
    // 0: relative; 1: from the root of the file system; 2: from `base`.
    (
        prop::sample::select(&["read_file", "list_files", "analyze_media"][..]),
        prop_oneof![2 => Just(0_u8), 1 => 1..3_u8],
        first,
        parts,
    )
        .prop_map(|(tool, start, first, parts)| {
            let rel = std::iter::once(first)
                .chain(parts)
                .collect::<Vec<_>>()
                .join("/");
            let path = match start {
                0 => rel,
                1 => format!("/{rel}"),
                _ => format!("BASE/{rel}"),
            };
            (tool, path)
        })
}

fn fuzz_config() -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Calls `tool` on `path` (`BASE` made `base`): the answer, with `base`
/// made `BASE` again.
fn fuzz_answer(
    rt: &tokio::runtime::Runtime,
    h: &Harness,
    base: &Path,
    tool: &str,
    path: &str,
) -> String {
    let base = base.to_str().unwrap();
    let path = path.replacen("BASE", base, 1);
    let args = if tool == "list_files" {
        json!({"dir": path})
    } else {
        json!({"path": path})
    };
    let (Ok(text) | Err(text)) = rt.block_on(h.call(tool, args));
    text.replace(base, "BASE")
}

#[cfg(target_os = "linux")]
#[test]
fn fuzz_nothing_outside_is_read_or_listed_while_names_are_swapped() {
    let d = dirs();
    fuzz_tree(&d);
    let (sw, lnk) = swap_pair(&d);
    let h = Harness::new(&d);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let base = d.outside.parent().unwrap().to_path_buf();
    let swapper = Swapper::start(&sw, &lnk);
    let mut runner = proptest::test_runner::TestRunner::new(fuzz_config());
    runner
        .run(&fuzz_call(), |(tool, path)| {
            // `Harness::call` fails on the secret, in the answer or sent
            // to the model; no outside name shows either. A few times
            // each, as the swaps go on.
            for _ in 0..8 {
                let answer = fuzz_answer(&rt, &h, &base, tool, &path);
                proptest::prop_assert!(
                    !answer.contains("zz-outside-only"),
                    "{tool} {path}: {answer}"
                );
                if tool == "list_files" {
                    proptest::prop_assert!(
                        !answer.lines().any(|l| l.starts_with("secret.txt")),
                        "{tool} {path}: {answer}"
                    );
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(swapper.stop() > 0);
}

#[test]
fn fuzz_what_exists_outside_changes_no_answer() {
    // Two trees alike inside; outside, one has the secret and more, the
    // other nothing.
    let (full, empty) = (dirs(), dirs());
    for d in [&full, &empty] {
        fuzz_tree(d);
    }
    fs::remove_file(&empty.secret).unwrap();
    fs::create_dir(full.outside.join("x")).unwrap();
    fs::write(full.outside.join("nope"), "").unwrap();
    fs::create_dir_all(full.outside.join("sub/a")).unwrap();
    let (hf, he) = (Harness::new(&full), Harness::new(&empty));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let mut runner = proptest::test_runner::TestRunner::new(fuzz_config());
    runner
        .run(&fuzz_call(), |(tool, path)| {
            let a = fuzz_answer(&rt, &hf, full.outside.parent().unwrap(), tool, &path);
            let b = fuzz_answer(&rt, &he, empty.outside.parent().unwrap(), tool, &path);
            proptest::prop_assert_eq!(a, b, "{} {}", tool, path);
            Ok(())
        })
        .unwrap();
}
