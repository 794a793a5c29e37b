//! The sandbox of the built-in file tools (`list_files`, `read_file`,
//! `analyze_media`): how a path is resolved (working directory, then
//! staging), and that nothing outside the allowed roots is read — not by
//! traversal, an absolute path, a symlinked file or directory, a root that
//! does not exist — nor a file over the size limit. Every refusal is
//! checked on its text, and a secret placed outside the roots must never
//! show up in a result, an error, or what the model was sent.
#![cfg(unix)]

use std::fmt::Write as _;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kesoku::llm::tools::{
    DEFAULT_MAX_FILE_SIZE, Sandbox, SandboxError, TurnModel, analyze_media, list_files, read_file,
};
use kesoku::llm::{
    AssistantTurn, ContentBlock, Llm, LlmError, LlmFuture, LlmOptions, StopReason, ToolDeclaration,
    Usage, content_blocks,
};
use kesoku::{Message, ToolContext, ToolRegistry};
use serde_json::{Value, json};
use tempfile::TempDir;

/// The content of the file outside the roots.
const SECRET: &str = "TOP-SECRET";

/// A model that records the messages of each call and answers "seen".
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<Vec<Message>>>,
}

impl Recorder {
    fn calls(&self) -> Vec<Vec<Message>> {
        self.calls.lock().unwrap().clone()
    }
}

impl Llm for Recorder {
    fn provider(&self) -> &'static str {
        "recorder"
    }

    fn complete<'a>(
        &'a self,
        _session_id: &'a str,
        messages: &'a [Message],
        _tools: &'a [ToolDeclaration],
        _options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.calls.lock().unwrap().push(messages.to_vec());
        Box::pin(async {
            Ok(AssistantTurn {
                text: "seen".to_owned(),
                tool_calls: Vec::new(),
                stop_reason: StopReason::EndTurn,
                usage: Usage::default(),
                messages: Vec::new(),
                fallbacks: Vec::new(),
            })
        })
    }
}

/// `base/a/work` (the working directory), `base/staging` (the staging
/// directory) and `base/outside/secret.txt`, outside both.
struct Dirs {
    _base: TempDir,
    work: PathBuf,
    staging: PathBuf,
    outside: PathBuf,
    secret: PathBuf,
}

fn dirs() -> Dirs {
    let base = tempfile::tempdir().unwrap();
    let work = base.path().join("a").join("work");
    let staging = base.path().join("staging");
    let outside = base.path().join("outside");
    for d in [&work, &staging, &outside] {
        fs::create_dir_all(d).unwrap();
    }
    let secret = outside.join("secret.txt");
    fs::write(&secret, SECRET).unwrap();
    Dirs {
        _base: base,
        work,
        staging,
        outside,
        secret,
    }
}

/// The three tools, a context on a sandbox, and the model it carries.
struct Harness {
    registry: ToolRegistry,
    ctx: ToolContext,
    model: Arc<Recorder>,
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in [analyze_media::TOOL, list_files::TOOL, read_file::TOOL] {
        registry.register(tool).unwrap();
    }
    registry
}

impl Harness {
    /// The default sandbox on `d.work`, with `d.staging` as staging.
    fn new(d: &Dirs) -> Self {
        Self::with(d, Sandbox::new(&d.work))
    }

    fn with(d: &Dirs, sandbox: Sandbox) -> Self {
        let model = Arc::new(Recorder::default());
        let llm: Arc<dyn Llm> = model.clone();
        let ctx = ToolContext::new("s")
            .with_workspace(&d.staging)
            .with_state(sandbox)
            .with_state(TurnModel::new(llm, LlmOptions::new("m")));
        Harness {
            registry: registry(),
            ctx,
            model,
        }
    }

    /// Calls `tool`: its text, or its error's. Neither, nor anything the
    /// model was sent so far, holds the secret.
    async fn call(&self, tool: &str, args: Value) -> Result<String, String> {
        let result = self
            .registry
            .get(tool)
            .unwrap()
            .call(args.clone(), &self.ctx)
            .await
            .map(|o| o.text())
            .map_err(|e| e.to_string());
        let (Ok(text) | Err(text)) = &result;
        assert!(
            !text.contains(SECRET),
            "{tool} {args} leaked the secret: {text}"
        );
        for message in self.model.calls().iter().flatten() {
            assert!(!message.content.contains(SECRET));
            for block in content_blocks(message) {
                assert!(
                    !block_bytes(&block)
                        .windows(SECRET.len())
                        .any(|w| w == SECRET.as_bytes()),
                    "{tool} {args} sent the secret to the model"
                );
            }
        }
        result
    }

    /// Calls `tool`, which must succeed.
    async fn ok(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args.clone()).await {
            Ok(text) => text,
            Err(e) => panic!("{tool} {args} failed: {e}"),
        }
    }

    /// Calls `tool`, which must fail with an error containing each of
    /// `needles`; the model must not have been asked anything.
    async fn refused(&self, tool: &str, args: Value, needles: &[&str]) -> String {
        let calls_before = self.model.calls().len();
        let error = match self.call(tool, args.clone()).await {
            Ok(text) => panic!("{tool} {args} was not refused: {text}"),
            Err(e) => e,
        };
        for needle in needles {
            assert!(
                error.contains(needle),
                "{tool} {args}: {error:?} does not contain {needle:?}"
            );
        }
        assert_eq!(
            self.model.calls().len(),
            calls_before,
            "{tool} {args} asked the model though it was refused"
        );
        error
    }

    fn model_calls(&self) -> usize {
        self.model.calls().len()
    }

    /// The blocks of the last model call.
    fn last_blocks(&self) -> Vec<ContentBlock> {
        let calls = self.model.calls();
        let last = calls.last().expect("the model was called");
        last.iter().flat_map(content_blocks).collect()
    }
}

fn block_bytes(block: &ContentBlock) -> &[u8] {
    match block {
        ContentBlock::Text { text } => text.as_bytes(),
        ContentBlock::Image { data, .. }
        | ContentBlock::Document { data, .. }
        | ContentBlock::Media { data, .. } => data,
    }
}

/// The one document the model was last sent, as text.
fn sent_text(h: &Harness) -> String {
    let blocks = h.last_blocks();
    assert_eq!(blocks.len(), 1, "{blocks:?}");
    match &blocks[0] {
        ContentBlock::Document {
            mime_type, data, ..
        } => {
            assert_eq!(mime_type, "text/plain");
            String::from_utf8(data.clone()).unwrap()
        }
        other => panic!("not a document: {other:?}"),
    }
}

const OUTSIDE: &str = "is outside the directories this tool may read";

/// The numbered lines `read_file` returned, as (number, text).
fn numbered(out: &str) -> Vec<(usize, String)> {
    out.lines()
        .filter_map(|l| {
            let (n, text) = l.split_once('\t')?;
            Some((n.trim().parse().ok()?, text.to_owned()))
        })
        .collect()
}

fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap()
}

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
