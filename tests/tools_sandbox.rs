//! The sandbox of the built-in file tools (`list_files`, `read_file`,
//! `analyze_media`): how a path is resolved (working directory, then
//! staging), and that nothing outside the allowed roots is read — not by
//! traversal, an absolute path, a symlinked file or directory, a root that
//! does not exist. Every refusal is checked on its text, and a secret
//! placed outside the roots must never show up in a result, an error, or
//! what the model was sent. (`tools_files.rs`: what `read_file` and
//! `list_files` return, and the size limit.)
#![cfg(unix)]

mod tools_support;

#[allow(clippy::wildcard_imports)]
use tools_support::*;

#[tokio::test]
async fn traversal_out_of_the_working_directory_is_refused() {
    let d = dirs();
    let h = Harness::new(&d);
    let path = "../../outside/secret.txt";
    for tool in ["read_file", "analyze_media"] {
        h.refused(
            tool,
            json!({"path": path}),
            &[OUTSIDE, &format!("'{path}'")],
        )
        .await;
    }
    h.refused(
        "list_files",
        json!({"dir": "../../outside"}),
        &[OUTSIDE, "'../../outside'"],
    )
    .await;
    // The same way up, from a subdirectory.
    fs::create_dir(d.work.join("sub")).unwrap();
    h.refused(
        "read_file",
        json!({"path": "sub/../../../outside/secret.txt"}),
        &[OUTSIDE],
    )
    .await;
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn traversal_out_of_the_staging_directory_is_refused() {
    let d = dirs();
    let h = Harness::new(&d);
    // Not found from the working directory (`base/a/outside`), but from
    // staging it is the secret.
    let path = "../outside/secret.txt";
    assert!(!d.work.join(path).exists());
    assert!(d.staging.join(path).exists());
    for tool in ["read_file", "analyze_media"] {
        h.refused(tool, json!({"path": path}), &[OUTSIDE]).await;
    }
    h.refused("list_files", json!({"dir": "../outside"}), &[OUTSIDE])
        .await;
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn dot_dot_that_stays_inside_is_read() {
    let d = dirs();
    fs::create_dir(d.work.join("sub")).unwrap();
    fs::write(d.work.join("a.txt"), "alpha\n").unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "sub/../a.txt"})).await;
    assert_eq!(numbered(&out), [(1, "alpha".to_owned())]);
}

#[tokio::test]
async fn absolute_path_outside_the_roots_is_refused() {
    let d = dirs();
    let h = Harness::new(&d);
    // In a temporary directory of its own, too.
    let elsewhere = tempfile::tempdir().unwrap();
    let other = elsewhere.path().join("secret.txt");
    fs::write(&other, SECRET).unwrap();
    for file in [&d.secret, &other] {
        let path = file.to_str().unwrap();
        for tool in ["read_file", "analyze_media"] {
            h.refused(tool, json!({"path": path}), &[OUTSIDE, path])
                .await;
        }
    }
    for dir in [&d.outside, &elsewhere.path().to_path_buf()] {
        let dir = dir.to_str().unwrap();
        h.refused("list_files", json!({"dir": dir}), &[OUTSIDE, dir])
            .await;
    }
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn absolute_path_inside_a_root_is_read() {
    let d = dirs();
    fs::write(d.work.join("a.txt"), "in work\n").unwrap();
    fs::write(d.staging.join("b.txt"), "in staging\n").unwrap();
    let h = Harness::new(&d);
    let a = d.work.join("a.txt");
    let out = h
        .ok("read_file", json!({"path": a.to_str().unwrap()}))
        .await;
    assert_eq!(numbered(&out), [(1, "in work".to_owned())]);
    let b = d.staging.join("b.txt");
    let out = h
        .ok("read_file", json!({"path": b.to_str().unwrap()}))
        .await;
    assert_eq!(numbered(&out), [(1, "in staging".to_owned())]);
}

#[tokio::test]
async fn symlink_to_a_file_outside_is_refused() {
    let d = dirs();
    symlink(&d.secret, d.work.join("link.txt")).unwrap();
    symlink(&d.secret, d.staging.join("staged-link.txt")).unwrap();
    let h = Harness::new(&d);
    let absolute = d.work.join("link.txt");
    for path in ["link.txt", "staged-link.txt", absolute.to_str().unwrap()] {
        for tool in ["read_file", "analyze_media"] {
            h.refused(tool, json!({"path": path}), &[OUTSIDE, path])
                .await;
        }
    }
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn symlinked_directory_leading_outside_is_refused() {
    let d = dirs();
    symlink(&d.outside, d.work.join("out")).unwrap();
    // A chain: a link inside to the link out.
    symlink(d.work.join("out"), d.work.join("out2")).unwrap();
    let h = Harness::new(&d);
    // `..` after a link goes up from where the link leads.
    h.refused(
        "read_file",
        json!({"path": "out/../outside/secret.txt"}),
        &[OUTSIDE],
    )
    .await;
    for dir in ["out", "out2"] {
        let path = format!("{dir}/secret.txt");
        for tool in ["read_file", "analyze_media"] {
            h.refused(tool, json!({"path": path}), &[OUTSIDE, &path])
                .await;
        }
        h.refused("list_files", json!({"dir": dir}), &[OUTSIDE])
            .await;
    }
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn symlink_that_stays_inside_is_followed() {
    let d = dirs();
    fs::write(d.staging.join("real.txt"), "real\n").unwrap();
    symlink(d.staging.join("real.txt"), d.work.join("alias.txt")).unwrap();
    fs::create_dir(d.work.join("sub")).unwrap();
    fs::write(d.work.join("sub/x.txt"), "x\n").unwrap();
    symlink(d.work.join("sub"), d.work.join("subalias")).unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "alias.txt"})).await;
    assert_eq!(numbered(&out), [(1, "real".to_owned())]);
    let out = h.ok("read_file", json!({"path": "subalias/x.txt"})).await;
    assert_eq!(numbered(&out), [(1, "x".to_owned())]);
    let out = h.ok("list_files", json!({"dir": "subalias"})).await;
    assert!(out.contains("x.txt"), "{out}");
}

#[tokio::test]
async fn missing_file_is_named() {
    let d = dirs();
    let h = Harness::new(&d);
    for tool in ["read_file", "analyze_media"] {
        let e = h
            .refused(
                tool,
                json!({"path": "nope.txt"}),
                &["file 'nope.txt' does not exist"],
            )
            .await;
        // Both places it was looked for are named.
        for place in [&d.work, &d.staging] {
            let looked = place.join("nope.txt");
            assert!(e.contains(looked.to_str().unwrap()), "{e}");
        }
    }
    let absolute = d.work.join("gone.txt");
    let absolute = absolute.to_str().unwrap();
    h.refused(
        "read_file",
        json!({"path": absolute}),
        &[&format!("file '{absolute}' does not exist")],
    )
    .await;
    h.refused(
        "list_files",
        json!({"dir": "nodir"}),
        &["'nodir' does not exist"],
    )
    .await;
    // A path that leaves the roots by its text is refused as outside
    // before anything is looked up: whether it exists is not told.
    h.refused(
        "read_file",
        json!({"path": "../../outside/none.txt"}),
        &[OUTSIDE],
    )
    .await;
    h.refused(
        "read_file",
        json!({"path": "../../outside/secret.txt"}),
        &[OUTSIDE],
    )
    .await;
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn directory_given_to_a_file_tool_is_refused() {
    let d = dirs();
    fs::create_dir(d.work.join("sub")).unwrap();
    let h = Harness::new(&d);
    for tool in ["read_file", "analyze_media"] {
        let e = h
            .refused(
                tool,
                json!({"path": "sub"}),
                &["'sub' is a directory, not a file"],
            )
            .await;
        assert_eq!(
            e,
            SandboxError::Directory {
                path: "sub".to_owned()
            }
            .to_string()
        );
        h.refused(tool, json!({"path": "."}), &["is a directory"])
            .await;
    }
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test]
async fn file_given_to_list_files_is_refused() {
    let d = dirs();
    fs::write(d.work.join("a.txt"), "alpha").unwrap();
    let h = Harness::new(&d);
    let e = h
        .refused(
            "list_files",
            json!({"dir": "a.txt"}),
            &["'a.txt' is not a directory"],
        )
        .await;
    assert_eq!(
        e,
        SandboxError::NotADirectory {
            path: "a.txt".to_owned()
        }
        .to_string()
    );
}

#[tokio::test]
async fn file_only_in_staging_is_found_there() {
    let d = dirs();
    fs::write(d.staging.join("note.txt"), "staged note\n").unwrap();
    fs::create_dir(d.staging.join("uploads")).unwrap();
    fs::write(d.staging.join("uploads/u.txt"), "u").unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "note.txt"})).await;
    assert_eq!(numbered(&out), [(1, "staged note".to_owned())]);
    let answer = h.ok("analyze_media", json!({"path": "note.txt"})).await;
    assert_eq!(answer, "seen");
    assert_eq!(h.model_calls(), 1);
    assert_eq!(sent_text(&h), "staged note\n");
    let listing = h.ok("list_files", json!({"dir": "uploads"})).await;
    assert!(listing.lines().any(|l| l.starts_with("u.txt")), "{listing}");
}

#[tokio::test]
async fn working_directory_wins_over_staging() {
    let d = dirs();
    fs::write(d.work.join("both.txt"), "from work\n").unwrap();
    fs::write(d.staging.join("both.txt"), "from staging\n").unwrap();
    fs::create_dir(d.work.join("dir")).unwrap();
    fs::write(d.work.join("dir/w.txt"), "").unwrap();
    fs::create_dir(d.staging.join("dir")).unwrap();
    fs::write(d.staging.join("dir/s.txt"), "").unwrap();
    let h = Harness::new(&d);
    let out = h.ok("read_file", json!({"path": "both.txt"})).await;
    assert_eq!(numbered(&out), [(1, "from work".to_owned())]);
    h.ok("analyze_media", json!({"path": "both.txt"})).await;
    assert_eq!(sent_text(&h), "from work\n");
    let listing = h.ok("list_files", json!({"dir": "dir"})).await;
    assert!(listing.contains("w.txt"), "{listing}");
    assert!(!listing.contains("s.txt"), "{listing}");
}

#[tokio::test]
async fn with_roots_restricts_to_a_subdirectory() {
    let d = dirs();
    let allowed = d.work.join("allowed");
    fs::create_dir(&allowed).unwrap();
    fs::write(allowed.join("x.txt"), "x\n").unwrap();
    fs::write(d.work.join("a.txt"), "a\n").unwrap();
    fs::write(d.staging.join("s.txt"), "s\n").unwrap();
    let h = Harness::with(&d, Sandbox::new(&d.work).with_roots([&allowed]));
    let out = h.ok("read_file", json!({"path": "allowed/x.txt"})).await;
    assert_eq!(numbered(&out), [(1, "x".to_owned())]);
    h.ok("analyze_media", json!({"path": "allowed/x.txt"}))
        .await;
    assert_eq!(h.model_calls(), 1);
    let listing = h.ok("list_files", json!({"dir": "allowed"})).await;
    assert!(listing.contains("x.txt"), "{listing}");
    // The working directory itself, and staging, are no longer roots.
    for path in ["a.txt", "s.txt", "../../outside/secret.txt"] {
        for tool in ["read_file", "analyze_media"] {
            let e = h.refused(tool, json!({"path": path}), &[OUTSIDE]).await;
            // The allowed root is named.
            assert!(e.contains(canonical(&allowed).to_str().unwrap()), "{e}");
        }
    }
    h.refused("list_files", json!({}), &[OUTSIDE]).await;
    h.refused("list_files", json!({"dir": "."}), &[OUTSIDE])
        .await;
    assert_eq!(h.model_calls(), 1);
}

#[tokio::test]
async fn root_that_does_not_exist_admits_nothing() {
    let d = dirs();
    fs::write(d.work.join("a.txt"), "a\n").unwrap();
    fs::write(d.staging.join("s.txt"), "s\n").unwrap();
    let missing = d.work.join("not-there");
    let h = Harness::with(&d, Sandbox::new(&d.work).with_roots([&missing]));
    for path in ["a.txt", "s.txt", "../../outside/secret.txt"] {
        for tool in ["read_file", "analyze_media"] {
            h.refused(tool, json!({"path": path}), &[OUTSIDE]).await;
        }
    }
    h.refused("list_files", json!({}), &[OUTSIDE]).await;
    assert_eq!(h.model_calls(), 0);
    assert!(!missing.exists(), "the tools made the root");
    // A working directory that does not exist admits nothing either.
    let gone = d.work.join("gone");
    let h = Harness::with(&d, Sandbox::new(&gone).with_roots([&gone]));
    h.refused(
        "read_file",
        json!({"path": d.work.join("a.txt").to_str().unwrap()}),
        &[OUTSIDE],
    )
    .await;
}

#[tokio::test]
async fn a_working_directory_named_through_a_symlink_works() {
    let d = dirs();
    fs::write(d.work.join("a.txt"), "alpha\n").unwrap();
    let alias = d.outside.join("work-alias");
    symlink(&d.work, &alias).unwrap();
    let h = Harness::with(&d, Sandbox::new(&alias));
    let out = h.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(numbered(&out), [(1, "alpha".to_owned())]);
    // `..` goes up from where the link leads (`base/a`), not from the
    // directory the link sits in (`base/outside`).
    h.refused(
        "read_file",
        json!({"path": "../../outside/secret.txt"}),
        &[OUTSIDE],
    )
    .await;
    // Leaving the roots by its text, it is refused unlooked.
    h.refused("read_file", json!({"path": "../secret.txt"}), &[OUTSIDE])
        .await;
    h.refused(
        "read_file",
        json!({"path": d.secret.to_str().unwrap()}),
        &[OUTSIDE],
    )
    .await;
}

#[tokio::test]
async fn without_a_staging_directory_only_the_working_directory_is_searched() {
    let d = dirs();
    fs::write(d.staging.join("s.txt"), "s\n").unwrap();
    let ctx = ToolContext::new("s").with_state(Sandbox::new(&d.work));
    let e = registry()
        .get("read_file")
        .unwrap()
        .call(json!({"path": "s.txt"}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("file 's.txt' does not exist"), "{e}");
    assert!(e.contains(d.work.join("s.txt").to_str().unwrap()), "{e}");
    assert!(!e.contains(d.staging.to_str().unwrap()), "{e}");
    // Nor is staging a root.
    let e = registry()
        .get("read_file")
        .unwrap()
        .call(
            json!({"path": d.staging.join("s.txt").to_str().unwrap()}),
            &ctx,
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(OUTSIDE), "{e}");
}

#[tokio::test]
async fn without_a_sandbox_the_current_directory_is_the_root() {
    // An integration test runs in the package's directory.
    let cwd = std::env::current_dir().unwrap();
    assert!(cwd.join("Cargo.toml").is_file());
    let d = dirs();
    let ctx = ToolContext::new("s");
    let registry = registry();
    let read = registry.get("read_file").unwrap();
    let out = read
        .call(json!({"path": "Cargo.toml", "limit": 5}), &ctx)
        .await
        .unwrap()
        .text();
    assert!(!numbered(&out).is_empty(), "{out}");
    let e = read
        .call(json!({"path": d.secret.to_str().unwrap()}), &ctx)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains(OUTSIDE), "{e}");
    assert!(!e.contains(SECRET), "{e}");
    let listing = registry
        .get("list_files")
        .unwrap()
        .call(json!({}), &ctx)
        .await
        .unwrap()
        .text();
    assert!(
        listing.lines().any(|l| l.starts_with("Cargo.toml")),
        "{listing}"
    );
}

#[tokio::test]
async fn a_link_out_does_not_tell_whether_a_file_exists_there() {
    let d = dirs();
    symlink(&d.outside, d.work.join("lnk")).unwrap();
    let h = Harness::new(&d);
    // The same answer for a file that exists outside and one that does not.
    for path in [
        "lnk/secret.txt",
        "lnk/nonexistent.txt",
        "lnk/no/such/dir.txt",
    ] {
        h.refused("read_file", json!({"path": path}), &[OUTSIDE, path])
            .await;
    }
    // Inside, a missing file is still named as missing.
    h.refused(
        "read_file",
        json!({"path": "nope.txt"}),
        &["'nope.txt' does not exist"],
    )
    .await;
}

/// `text` with `names[0]` in place of each other name, so answers about
/// different names compare.
fn alike(text: &str, names: &[&str]) -> String {
    names[1..]
        .iter()
        .fold(text.to_owned(), |t, n| t.replace(n, names[0]))
}

#[tokio::test]
async fn links_out_answer_alike_whether_their_target_exists() {
    let d = dirs();
    symlink(&d.secret, d.work.join("a")).unwrap();
    symlink(d.outside.join("nope"), d.work.join("b")).unwrap();
    // Out through a relative link, and to a directory that exists or not.
    symlink("../../outside/secret.txt", d.work.join("c")).unwrap();
    symlink(&d.outside, d.work.join("e")).unwrap();
    symlink(d.outside.join("no-dir"), d.work.join("f")).unwrap();
    let h = Harness::new(&d);
    let names = ["a", "b", "c"];
    for tool in ["read_file", "analyze_media"] {
        let mut answers = Vec::new();
        for name in names {
            let e = h.refused(tool, json!({"path": name}), &[OUTSIDE]).await;
            answers.push(alike(&e, &names));
        }
        assert!(answers.iter().all(|a| *a == answers[0]), "{answers:#?}");
    }
    let mut answers = Vec::new();
    for dir in ["e", "f"] {
        let e = h
            .refused("list_files", json!({"dir": dir}), &[OUTSIDE])
            .await;
        answers.push(alike(&e, &["e", "f"]));
    }
    assert_eq!(answers[0], answers[1]);
    // Listed, each is marked alike.
    let out = h.ok("list_files", json!({})).await;
    let marks: Vec<&str> = ["a ", "b ", "c ", "e ", "f "]
        .iter()
        .map(|n| {
            out.lines()
                .find_map(|l| l.strip_prefix(n))
                .unwrap_or_else(|| panic!("no {n} in {out}"))
        })
        .collect();
    assert!(
        marks
            .iter()
            .all(|m| *m == "(a link leading outside the sandbox)"),
        "{out}"
    );
    // A link inside to nothing is still a broken link.
    symlink(d.work.join("gone"), d.work.join("g")).unwrap();
    let out = h.ok("list_files", json!({})).await;
    assert!(out.lines().any(|l| l == "g (a broken link)"), "{out}");
}

#[tokio::test]
async fn the_staging_fallback_does_not_tell_whether_a_file_exists_outside() {
    // `work/ln_dir` leads outside; `staging/ln_dir/x` is real.
    let answer = |outside_x: bool| async move {
        let d = dirs();
        symlink(&d.outside, d.work.join("ln_dir")).unwrap();
        fs::create_dir(d.staging.join("ln_dir")).unwrap();
        fs::write(d.staging.join("ln_dir/x"), "staged\n").unwrap();
        if outside_x {
            fs::write(d.outside.join("x"), SECRET).unwrap();
        }
        let h = Harness::new(&d);
        h.call("read_file", json!({"path": "ln_dir/x"})).await
    };
    let (with, without) = (answer(true).await, answer(false).await);
    assert_eq!(with, without);
    // Outside is as good as not there: the staged file is read.
    assert_eq!(numbered(&with.unwrap()), [(1, "staged".to_owned())]);
}

/// Runs the test `name` of this binary in a process of its own with
/// `KESOKU_CHILD` set, for a test that changes the current directory
/// (which every test of a process shares).
fn in_child(name: &str) -> bool {
    if std::env::var_os("KESOKU_CHILD").is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("KESOKU_CHILD", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
    false
}

/// An agent on `model` with the built-in tools, sessions under `sessions`.
fn agent_with_tools(
    sessions: impl Into<PathBuf>,
    sandbox: Sandbox,
    model: Value,
) -> kesoku::llm::Agent {
    kesoku::llm::Agent::builder(kesoku::llm::ScriptedLlm::from_json(model).unwrap())
        .registry(registry())
        .sessions_dir(sessions)
        .sandbox(sandbox)
        .build()
        .unwrap()
}

/// A turn that reads `note.txt` and answers with what it read.
fn reads_the_note() -> Value {
    json!([
        {"tool_calls": [{"id": "r", "name": "read_file", "arguments": {"path": "note.txt"}}]},
        {"text": "{{r}}"}
    ])
}

#[test]
fn a_relative_sessions_dir_is_resolved_once() {
    if !in_child("a_relative_sessions_dir_is_resolved_once") {
        return;
    }
    let base = tempfile::tempdir().unwrap();
    let (first, second) = (base.path().join("first"), base.path().join("second"));
    fs::create_dir(&first).unwrap();
    fs::create_dir(&second).unwrap();
    std::env::set_current_dir(&first).unwrap();
    let agent = agent_with_tools("sessions", Sandbox::new(&first), reads_the_note());
    let workspace = agent.workspace("s").unwrap();
    assert_eq!(workspace, first.join("sessions").join("s"));
    fs::create_dir_all(&workspace).unwrap();
    fs::write(workspace.join("note.txt"), "attached\n").unwrap();
    // The process moves on; the session's workspace does not.
    std::env::set_current_dir(&second).unwrap();
    assert_eq!(agent.workspace("s").unwrap(), workspace);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let outcome = rt.block_on(agent.send("s", "read the note")).unwrap();
    let answer = outcome.answer.unwrap();
    assert_eq!(numbered(&answer), [(1, "attached".to_owned())], "{answer}");
    assert!(!second.join("sessions").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_id_still_gets_a_workspace() {
    let d = dirs();
    let sessions = d.staging.join("sessions");
    let agent = agent_with_tools(&sessions, Sandbox::new(&d.work), reads_the_note());
    let id = "é".repeat(60);
    let workspace = agent.workspace(&id).unwrap();
    let name = workspace.file_name().unwrap();
    assert!(name.len() <= 255, "{} bytes", name.len());
    assert_eq!(workspace.parent(), Some(sessions.as_path()));
    // The same each time, and not another's.
    assert_eq!(agent.workspace(&id).unwrap(), workspace);
    let other = format!("{}e", "é".repeat(59));
    assert_ne!(agent.workspace(&other).unwrap(), workspace);
    fs::create_dir_all(&workspace).unwrap();
    fs::write(workspace.join("note.txt"), "attached\n").unwrap();
    let outcome = agent.send(&id, "read the note").await.unwrap();
    let answer = outcome.answer.unwrap();
    assert_eq!(numbered(&answer), [(1, "attached".to_owned())], "{answer}");
}
