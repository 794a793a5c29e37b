//! What the built-in tools' tests share: directories with a secret
//! outside the roots, a context on a sandbox, a model that records what
//! it was sent, and checks that the secret never shows.
#![allow(dead_code, unreachable_pub, unused_imports)]

pub use std::fmt::Write as _;
pub use std::fs;
pub use std::os::unix::fs::symlink;
pub use std::path::{Path, PathBuf};
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use kesoku::llm::tools::{
    DEFAULT_MAX_FILE_SIZE, Sandbox, SandboxError, TurnModel, analyze_media, list_files, read_file,
};
pub use kesoku::llm::{
    AssistantTurn, ContentBlock, Llm, LlmError, LlmFuture, LlmOptions, StopReason, ToolDeclaration,
    Usage, content_blocks,
};
pub use kesoku::{Message, ToolContext, ToolRegistry};
pub use serde_json::{Value, json};
pub use tempfile::TempDir;

/// The content of the file outside the roots.
pub const SECRET: &str = "TOP-SECRET";

/// A model that records the messages of each call and answers "seen".
#[derive(Default)]
pub struct Recorder {
    pub calls: Mutex<Vec<Vec<Message>>>,
}

impl Recorder {
    pub fn calls(&self) -> Vec<Vec<Message>> {
        self.calls.lock().unwrap().clone()
    }
}

impl Llm for Recorder {
    fn provider(&self) -> &'static str {
        "recorder"
    }

    fn complete<'a>(
        &'a self,
        session_id: &'a str,
        messages: &'a [Message],
        _tools: &'a [ToolDeclaration],
        _options: &'a LlmOptions,
    ) -> LlmFuture<'a, Result<AssistantTurn, LlmError>> {
        self.calls.lock().unwrap().push(messages.to_vec());
        Box::pin(async { Ok(AssistantTurn::new(session_id, "recorder", "seen", [])) })
    }
}

/// `base/a/work` (the working directory), `base/staging` (the staging
/// directory) and `base/outside/secret.txt`, outside both.
pub struct Dirs {
    pub _base: TempDir,
    pub work: PathBuf,
    pub staging: PathBuf,
    pub outside: PathBuf,
    pub secret: PathBuf,
}

pub fn dirs() -> Dirs {
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
pub struct Harness {
    pub registry: ToolRegistry,
    pub ctx: ToolContext,
    pub model: Arc<Recorder>,
}

pub fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in [analyze_media::TOOL, list_files::TOOL, read_file::TOOL] {
        registry.register(tool).unwrap();
    }
    registry
}

impl Harness {
    /// The default sandbox on `d.work`, with `d.staging` as staging.
    pub fn new(d: &Dirs) -> Self {
        Self::with(d, Sandbox::new(&d.work))
    }

    pub fn with(d: &Dirs, sandbox: Sandbox) -> Self {
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
    pub async fn call(&self, tool: &str, args: Value) -> Result<String, String> {
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
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args.clone()).await {
            Ok(text) => text,
            Err(e) => panic!("{tool} {args} failed: {e}"),
        }
    }

    /// Calls `tool`, which must fail with an error containing each of
    /// `needles`; the model must not have been asked anything.
    pub async fn refused(&self, tool: &str, args: Value, needles: &[&str]) -> String {
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

    pub fn model_calls(&self) -> usize {
        self.model.calls().len()
    }

    /// The blocks of the last model call.
    pub fn last_blocks(&self) -> Vec<ContentBlock> {
        let calls = self.model.calls();
        let last = calls.last().expect("the model was called");
        last.iter().flat_map(content_blocks).collect()
    }
}

pub fn block_bytes(block: &ContentBlock) -> &[u8] {
    match block {
        ContentBlock::Text { text } => text.as_bytes(),
        ContentBlock::Image { data, .. }
        | ContentBlock::Document { data, .. }
        | ContentBlock::Media { data, .. } => data,
    }
}

/// The one document the model was last sent, as text.
pub fn sent_text(h: &Harness) -> String {
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

pub const OUTSIDE: &str = "is outside the directories this tool may read";

/// The numbered lines `read_file` returned, as (number, text).
pub fn numbered(out: &str) -> Vec<(usize, String)> {
    out.lines()
        .filter_map(|l| {
            let (n, text) = l.split_once('\t')?;
            Some((n.trim().parse().ok()?, text.to_owned()))
        })
        .collect()
}

pub fn canonical(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap()
}

/// Exchanges two names (`renameat2(RENAME_EXCHANGE)`) over and over on a
/// thread, until dropped: each is always there, as one or the other.
#[cfg(target_os = "linux")]
pub struct Swapper {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

#[cfg(target_os = "linux")]
impl Swapper {
    pub fn start(a: &Path, b: &Path) -> Self {
        use rustix::fs::{CWD, RenameFlags, renameat_with};
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = Arc::new(AtomicBool::new(false));
        let (a, b, flag) = (a.to_path_buf(), b.to_path_buf(), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let mut swaps = 0;
            while !flag.load(Ordering::Relaxed) {
                renameat_with(CWD, &a, CWD, &b, RenameFlags::EXCHANGE).unwrap();
                swaps += 1;
            }
            swaps
        });
        Swapper {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops swapping: how many swaps were made.
    pub fn stop(mut self) -> u64 {
        self.halt()
    }

    fn halt(&mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().map_or(0, |t| t.join().unwrap())
    }
}

#[cfg(target_os = "linux")]
impl Drop for Swapper {
    fn drop(&mut self) {
        self.halt();
    }
}

/// `work/sw`, a directory (holding the file `x` and `in-only.txt`), and
/// `work/lnk`, a link to `outside` (holding the secret, the directory `x`
/// and `zz-outside-only.txt`), for a [`Swapper`] to exchange.
#[cfg(target_os = "linux")]
pub fn swap_pair(d: &Dirs) -> (PathBuf, PathBuf) {
    let sw = d.work.join("sw");
    fs::create_dir(&sw).unwrap();
    fs::write(sw.join("x"), "inside\n").unwrap();
    fs::write(sw.join("in-only.txt"), "").unwrap();
    fs::create_dir(d.outside.join("x")).unwrap();
    fs::write(d.outside.join("zz-outside-only.txt"), "").unwrap();
    let lnk = d.work.join("lnk");
    symlink(&d.outside, &lnk).unwrap();
    (sw, lnk)
}
