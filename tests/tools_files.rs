//! What `read_file` and `list_files` return inside the sandbox: lines by
//! offset and limit, a bound on a result's size, binary files refused,
//! directory listings that do not follow links out; and the file size
//! limit and pipes, for every tool that reads.
#![cfg(unix)]

mod tools_support;

#[allow(clippy::wildcard_imports)]
use tools_support::*;

#[tokio::test]
async fn file_over_the_size_limit_is_refused() {
    let d = dirs();
    fs::write(d.work.join("big.txt"), "01234567890").unwrap(); // 11 bytes
    fs::write(d.work.join("fits.txt"), "0123456789").unwrap(); // 10 bytes
    let h = Harness::with(&d, Sandbox::new(&d.work).with_max_file_size(10));
    for tool in ["read_file", "analyze_media"] {
        let e = h
            .refused(
                tool,
                json!({"path": "big.txt"}),
                &["'big.txt' is 11 bytes, over the limit of 10 bytes"],
            )
            .await;
        assert_eq!(
            e,
            SandboxError::TooLarge {
                path: "big.txt".to_owned(),
                size: 11,
                limit: 10
            }
            .to_string()
        );
    }
    assert_eq!(h.model_calls(), 0);
    // At the limit is fine.
    let out = h.ok("read_file", json!({"path": "fits.txt"})).await;
    assert_eq!(numbered(&out), [(1, "0123456789".to_owned())]);
    h.ok("analyze_media", json!({"path": "fits.txt"})).await;
    assert_eq!(h.model_calls(), 1);
    // Outside and too large: refused as outside, size not told.
    fs::write(d.outside.join("huge.txt"), "x".repeat(100)).unwrap();
    let e = h
        .refused(
            "read_file",
            json!({"path": "../../outside/huge.txt"}),
            &[OUTSIDE],
        )
        .await;
    assert!(!e.contains("100 bytes"), "{e}");
}

#[test]
fn default_size_limit_is_20_mb() {
    assert!(
        [20_000_000, 20 << 20].contains(&DEFAULT_MAX_FILE_SIZE),
        "{DEFAULT_MAX_FILE_SIZE}"
    );
    assert_eq!(
        Sandbox::new("/nowhere").max_file_size(),
        DEFAULT_MAX_FILE_SIZE
    );
    let s = Sandbox::new("/w").with_roots(["/r"]).with_max_file_size(7);
    assert_eq!(s.max_file_size(), 7);
    assert_eq!(s.working_dir(), Path::new("/w"));
}

#[tokio::test]
async fn the_default_size_limit_applies() {
    let d = dirs();
    // Sparse: no 20 MB is written.
    let file = fs::File::create(d.work.join("huge.bin")).unwrap();
    file.set_len(DEFAULT_MAX_FILE_SIZE + 1).unwrap();
    let h = Harness::new(&d);
    let expected = SandboxError::TooLarge {
        path: "huge.bin".to_owned(),
        size: DEFAULT_MAX_FILE_SIZE + 1,
        limit: DEFAULT_MAX_FILE_SIZE,
    }
    .to_string();
    for tool in ["read_file", "analyze_media"] {
        let e = h
            .refused(tool, json!({"path": "huge.bin"}), &["over the limit"])
            .await;
        assert_eq!(e, expected);
    }
}

#[tokio::test]
async fn read_file_offset_and_limit() {
    let d = dirs();
    fs::write(d.work.join("five.txt"), "one\ntwo\nthree\nfour\nfive\n").unwrap();
    let h = Harness::new(&d);
    let all = |from: usize, to: usize| -> Vec<(usize, String)> {
        let words = ["one", "two", "three", "four", "five"];
        (from..=to).map(|n| (n, words[n - 1].to_owned())).collect()
    };

    let out = h.ok("read_file", json!({"path": "five.txt"})).await;
    assert_eq!(numbered(&out), all(1, 5));
    // All lines shown: no note saying there are more.
    assert_eq!(out.lines().count(), 5, "{out}");

    let out = h
        .ok(
            "read_file",
            json!({"path": "five.txt", "offset": 2, "limit": 2}),
        )
        .await;
    assert_eq!(numbered(&out), all(2, 3));
    // Not all lines shown: the file's length is told.
    assert!(out.contains('5'), "{out}");

    let out = h
        .ok("read_file", json!({"path": "five.txt", "offset": 4}))
        .await;
    assert_eq!(numbered(&out), all(4, 5));

    let out = h
        .ok("read_file", json!({"path": "five.txt", "limit": 1}))
        .await;
    assert_eq!(numbered(&out), all(1, 1));

    let out = h
        .ok("read_file", json!({"path": "five.txt", "offset": 1}))
        .await;
    assert_eq!(numbered(&out), all(1, 5));

    let out = h
        .ok("read_file", json!({"path": "five.txt", "offset": 9}))
        .await;
    assert_eq!(numbered(&out), []);

    let out = h
        .ok(
            "read_file",
            json!({"path": "five.txt", "offset": 5, "limit": 10}),
        )
        .await;
    assert_eq!(numbered(&out), all(5, 5));

    // An empty file: no lines.
    fs::write(d.work.join("empty.txt"), "").unwrap();
    let out = h.ok("read_file", json!({"path": "empty.txt"})).await;
    assert_eq!(numbered(&out), []);
}

#[tokio::test]
async fn read_file_reads_2000_lines_by_default() {
    let d = dirs();
    let mut text = String::new();
    for n in 1..=2500 {
        writeln!(text, "line {n}").unwrap();
    }
    fs::write(d.work.join("long.txt"), text).unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "long.txt"})).await;
    let lines = numbered(&out);
    assert_eq!(lines.len(), 2000);
    assert_eq!(lines[0], (1, "line 1".to_owned()));
    assert_eq!(lines[1999], (2000, "line 2000".to_owned()));
    assert!(out.contains("2500"), "the total is not told");
    let out = h
        .ok("read_file", json!({"path": "long.txt", "offset": 2001}))
        .await;
    let lines = numbered(&out);
    assert_eq!(lines.len(), 500);
    assert_eq!(lines[499], (2500, "line 2500".to_owned()));
}

/// Calls `tool` on the named pipe `fifo`: its result, and whether the
/// call hung in the meantime (until a writer showed up).
#[cfg(target_os = "linux")]
async fn call_on_fifo(
    h: &Harness,
    tool: &str,
    args: Value,
    fifo: &Path,
) -> (Result<String, String>, bool) {
    let mut call = std::pin::pin!(h.call(tool, args));
    if let Ok(result) = tokio::time::timeout(Duration::from_secs(3), &mut call).await {
        return (result, false);
    }
    // Stuck opening the pipe: opening it for reading and writing (which
    // never blocks on Linux) lets that open return, so nothing is left
    // hanging.
    drop(
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(fifo)
            .unwrap(),
    );
    let result = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("still stuck");
    (result, true)
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_named_pipe_is_refused_without_hanging() {
    let d = dirs();
    let fifo = d.work.join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let h = Harness::new(&d);
    let mut failures = Vec::new();
    for tool in ["read_file", "analyze_media"] {
        let (result, hung) = call_on_fifo(&h, tool, json!({"path": "pipe"}), &fifo).await;
        match result {
            Err(e) if !hung && e.contains("'pipe'") && e.contains("not a regular file") => {}
            other => failures.push(format!("{tool}: hung: {hung}, result: {other:?}")),
        }
    }
    assert_eq!(h.model_calls(), 0);
    assert!(failures.is_empty(), "{failures:#?}");
}

#[tokio::test]
async fn read_file_refuses_binary_and_points_to_analyze_media() {
    let d = dirs();
    // A PNG signature, NUL bytes and all.
    fs::write(
        d.work.join("pic.png"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01",
    )
    .unwrap();
    // Not UTF-8, no NUL.
    fs::write(d.work.join("latin1.txt"), b"caf\xe9 cr\xe8me").unwrap();
    // NUL bytes in otherwise ASCII text.
    fs::write(d.work.join("nul.txt"), b"abc\0def").unwrap();
    let h = Harness::new(&d);
    for path in ["pic.png", "latin1.txt", "nul.txt"] {
        h.refused(
            "read_file",
            json!({"path": path}),
            &[&format!("'{path}'"), "analyze_media"],
        )
        .await;
    }
}

#[tokio::test]
async fn list_files_shows_entries_and_does_not_follow_links_out() {
    let d = dirs();
    fs::create_dir(d.work.join("sub")).unwrap();
    fs::write(d.work.join("a.txt"), "hello").unwrap(); // 5 bytes
    fs::write(d.work.join("sub/inner.txt"), "abc").unwrap();
    symlink(&d.secret, d.work.join("link_file")).unwrap();
    symlink(&d.outside, d.work.join("link_dir")).unwrap();
    symlink(d.work.join("a.txt"), d.work.join("inside_link")).unwrap();
    let h = Harness::new(&d);
    for args in [
        json!({}),
        json!({"dir": "."}),
        json!({"dir": d.work.to_str().unwrap()}),
    ] {
        let out = h.ok("list_files", args.clone()).await;
        let line = |name: &str| -> String {
            out.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("no {name} in {out}"))
                .to_owned()
        };
        assert!(line("sub").starts_with("sub/"), "{out}");
        let a = line("a.txt");
        assert!(a.contains('5'), "{a}");
        assert!(!a.contains('/'), "{a}");
        // A link inside is followed: described as what it leads to.
        let inside = line("inside_link");
        assert!(inside.contains('5'), "{inside}");
        // Links out are marked, not followed: not described as the
        // secret (10 bytes) nor as a directory.
        for name in ["link_file", "link_dir"] {
            let l = line(name);
            assert!(l.contains("outside"), "{args}: {l}");
            assert!(!l.contains("10"), "{args}: {l}");
            assert!(!l.starts_with(&format!("{name}/")), "{args}: {l}");
        }
        // Not recursive, and nothing of the directory out is listed.
        assert!(!out.contains("inner.txt"), "{out}");
        assert!(!out.contains("secret.txt"), "{out}");
        // Entry lines: one per entry (a header or footer may come too).
        let entries = out
            .lines()
            .filter(|l| {
                ["sub", "a.txt", "link_file", "link_dir", "inside_link"]
                    .iter()
                    .any(|n| l.starts_with(n))
            })
            .count();
        assert_eq!(entries, 5, "{out}");
    }
    let out = h.ok("list_files", json!({"dir": "sub"})).await;
    assert!(
        out.lines()
            .any(|l| l.starts_with("inner.txt") && l.contains('3')),
        "{out}"
    );
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn read_file_bounds_what_it_returns() {
    let d = dirs();
    // One line of 1 MB, then a short one.
    let long = "x".repeat(1 << 20);
    fs::write(d.work.join("long.txt"), format!("{long}\nshort\n")).unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "long.txt"})).await;
    assert!(out.len() <= 64 * 1024 + 200, "{} bytes", out.len());
    assert!(
        out.contains("the last line is cut"),
        "{}",
        &out[out.len() - 200..]
    );
    assert!(out.contains("(1 of 2 lines shown; read on with `offset`)"));
    // The next line reads on.
    let out = h
        .ok("read_file", json!({"path": "long.txt", "offset": 2}))
        .await;
    assert_eq!(numbered(&out), [(2, "short".to_owned())]);
}

#[tokio::test]
async fn a_newline_in_a_name_does_not_forge_a_line() {
    let d = dirs();
    fs::write(d.work.join("evil\nforged.txt (999 bytes)"), "abc").unwrap();
    fs::write(d.work.join("back\\slash"), "").unwrap();
    let h = Harness::new(&d);
    let out = h.ok("list_files", json!({})).await;
    let lines: Vec<&str> = out.lines().collect();
    // The header and one line per entry, each as escaped.
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines.contains(&"evil\\nforged.txt (999 bytes) (3 bytes)"),
        "{out}"
    );
    assert!(lines.contains(&"back\\\\slash (0 bytes)"), "{out}");
    assert!(!lines.iter().any(|l| l.starts_with("forged")), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_that_grows_is_not_read_past_the_limit() {
    use std::sync::atomic::{AtomicBool, Ordering};

    // Text up to the limit; past it, when the file grows, NUL bytes: a
    // read that goes on past the limit finds them and calls the file
    // binary.
    const LIMIT: u64 = 1 << 20;
    let d = dirs();
    let path = d.work.join("grows.txt");
    let text = format!("{}\n", "a".repeat(1023)).repeat(1024);
    fs::write(&path, &text).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
            while !stop.load(Ordering::Relaxed) {
                // In each state about as long as a read takes, so that
                // reads opening it at the limit often find it grown when
                // they get there. (Only the race's odds hang on this.)
                file.set_len(LIMIT).unwrap();
                std::thread::sleep(Duration::from_micros(200));
                file.set_len(LIMIT + 4096).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let h = Harness::with(&d, Sandbox::new(&d.work).with_max_file_size(LIMIT));
    let (mut over, mut read) = (0, 0);
    for _ in 0..300 {
        match h.call("read_file", json!({"path": "grows.txt"})).await {
            Ok(out) => {
                read += 1;
                let tail = &out[out.len() - 60..];
                assert!(tail.contains(" of 1024 lines shown"), "{tail}");
            }
            Err(e) if e.contains("not a text file") => over += 1,
            Err(e) => assert!(e.contains("over the limit of 1048576 bytes"), "{e}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(read > 0, "never read");
    assert_eq!(
        over, 0,
        "{over} of 300 reads went past the limit ({read} read)"
    );
}
