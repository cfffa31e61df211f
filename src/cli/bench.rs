//! `svc bench`: throughput figures, printed as a table.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use svc::bench::{self, Figure};
use svc::tokens::Encoding;

use super::Format;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Records generated for the validation benchmark.
    #[arg(long, default_value_t = 200_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    records: usize,
    /// Source tree for the token-counting benchmark [default: the Rust crate sources under
    /// $CARGO_HOME/registry/src, else ./src].
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Megabytes of source text for the token-counting benchmark.
    #[arg(long, default_value_t = 8, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    corpus_mb: usize,
    /// Megabytes of generated log and of generated JSON for the compression benchmark.
    #[arg(long, default_value_t = 16, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    compress_mb: usize,
    /// A directory holding clones of requests, flask and fd (see
    /// `fixtures/compress/kind-truth.tsv`): the compress group then reports kind detection on
    /// that mixed corpus plus generated logs, and code elision by syntax tree against the
    /// brace/indentation reducer, instead of its throughput figures.
    #[arg(long)]
    compress_corpus: Option<PathBuf>,
    /// Megabytes of Markdown (from the corpus) for the prose compression benchmark (0 leaves
    /// prose out; a corpus with less than half of it is an error).
    #[arg(long, default_value_t = 2)]
    prose_mb: usize,
    /// Workload of the harness throughput figure [default: halueval-distractor, or the fixture
    /// workload fixtures/harness/halueval-mini where its data is not found]. A workload named
    /// here that cannot be loaded is an error.
    #[arg(long)]
    harness_workload: Option<String>,
    /// Context budget of the harness throughput figure.
    #[arg(long, default_value_t = 512, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    harness_budget: usize,
    /// Replicates of the harness throughput run.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    harness_replicates: u64,
    /// Runs of the harness throughput figure (the median is reported).
    #[arg(long, default_value_t = 5, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    harness_repeats: usize,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Run only these groups, comma-separated [default: every group].
    #[arg(long, value_enum, value_delimiter = ',')]
    group: Vec<Group>,
    /// Answers verified per evidence text in the witness benchmark (4 verifiable claims each).
    #[arg(long, default_value_t = 400, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    witness_answers: usize,
    /// Git repository (a directory, or a `.bundle` file cloned to a temporary directory) whose
    /// history the file-localisation figures are mined from; repeat it for several [default:
    /// this source tree's repository, all branches].
    #[arg(long)]
    localize_repo: Vec<PathBuf>,
    /// Tasks mined per repository for the file-localisation figures (newest first; split into
    /// tune and held-out parts by commit id).
    #[arg(long, default_value_t = 40, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    localize_tasks: usize,
    /// Run only the tasks of one part (`tune` while tuning; the other part is then never looked
    /// at).
    #[arg(long, value_parser = ["tune", "held-out"])]
    localize_part: Option<String>,
    /// Also run the naive baselines (BM25 top-k, random, recently changed fragments only) on
    /// the localisation tasks.
    #[arg(long)]
    localize_baselines: bool,
    /// Write every localisation outcome (selector, repository, commit, part, budget, recall,
    /// coverage) to this JSON Lines file.
    #[arg(long)]
    localize_out: Option<PathBuf>,
    /// Only one part of the context group (`needles` or `localisation`), for iterating on
    /// selection quality.
    #[arg(long)]
    context_part: Option<ContextPart>,
    /// Records generated for the report benchmark (aggregate + paired stats).
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    report_records: usize,
    /// Generated planner rounds of the proof benchmark (the median is reported).
    #[arg(long, default_value_t = 200, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    proof_rounds: usize,
    /// Requests of the proxy pass-through load run.
    #[arg(long, default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    proxy_requests: usize,
    /// Concurrent clients of the proxy load run.
    #[arg(long, default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    proxy_clients: usize,
    /// Tokens of the generated repository the daemon benchmark watches.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    daemon_repo_tokens: usize,
    /// Trial records of the generated run the viewer benchmark opens.
    #[arg(long, default_value_t = 100_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    viewer_records: usize,
    /// Repository of the MCP round-trip figures [default: about 1M tokens of crate sources
    /// copied from the corpus directory].
    #[arg(long)]
    mcp_repo: Option<PathBuf>,
    /// Warm select_context calls of the MCP round-trip figure.
    #[arg(long, default_value_t = 60, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mcp_calls: usize,
    /// Requests of the simulated routing stream.
    #[arg(long, default_value_t = 10_000, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    routing_requests: usize,
    /// Seed of the reported routing run.
    #[arg(long, default_value_t = svc::routing::simulate::DEFAULT_SEED)]
    routing_seed: u64,
    /// Other seeds the routing targets are checked on (seeds 1..=N).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    routing_seeds: u64,
    /// The gate's shadow_observations in the routing simulation (0: no shadow trials).
    #[arg(long, default_value_t = 0)]
    routing_shadow: u64,
}

/// Parts of the context group that can run alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ContextPart {
    Needles,
    Localisation,
}

/// Benchmark groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    Records,
    Tokens,
    /// Index, selection, skeleton ratio, memory, needle and localisation figures.
    Context,
    Witness,
    Compress,
    Harness,
    /// Aggregation and paired statistics over generated records.
    Report,
    /// The proof loop's recovery planner: time per round at 128 candidates, 100k-token budget.
    Proof,
    /// Proxy added latency (pass-through and optimising), memory, upstream faults.
    Proxy,
    /// Run viewer: opening a large run's page (first page, filtered, middle of the file).
    Viewer,
    /// Daemon: file change -> index updated through the watcher, on a generated repository.
    Daemon,
    /// MCP tool-call round trips through `svc serve` on stdio (select_context on ~1M tokens).
    Mcp,
    /// Fail-closed routing on a simulated stream of requests over 20 task classes with known
    /// success rates: share routed, share routed that should not have been.
    Routing,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let wants = |group: Group| args.group.is_empty() || args.group.contains(&group);
    let mut figures: Vec<Figure> = Vec::new();
    // A group that fails is named, and the others still run and print: one failing group
    // (the viewer's, once) threw away every figure measured before it.
    let mut failed: Vec<&str> = Vec::new();
    let mut keep = |name: &'static str, result: anyhow::Result<Vec<Figure>>| match result {
        Ok(measured) => figures.extend(measured),
        Err(error) => {
            eprintln!("bench: the {name} group failed: {error:#}");
            failed.push(name);
        }
    };
    if wants(Group::Records) {
        eprintln!("bench: records validate ({} records)…", args.records);
        keep(
            "records",
            bench::records_validate(args.records)
                .map(|f| vec![f])
                .map_err(Into::into),
        );
    }
    if wants(Group::Witness) {
        eprintln!(
            "bench: witness verify ({} answers x 10 evidence texts)…",
            args.witness_answers
        );
        let mut witness = vec![svc::witness::bench::claims_per_second(
            args.witness_answers,
            10,
        )];
        eprintln!("bench: witness verify against 500 KB of evidence…");
        witness.push(svc::witness::bench::long_evidence(500_000, 5));
        keep("witness", Ok(witness));
    }
    let corpus_root = args.corpus.clone().unwrap_or_else(default_corpus);
    if wants(Group::Tokens) {
        keep("tokens", token_figures(&corpus_root, args.corpus_mb));
    }
    if wants(Group::Context) {
        keep("context", context_group(&args, &corpus_root));
    }
    if wants(Group::Compress) {
        keep("compress", compress_group(&args, &corpus_root));
    }
    if wants(Group::Harness) {
        keep("harness", harness_figure(&args).map(|f| vec![f]));
    }
    if wants(Group::Report) {
        eprintln!("bench: report ({} generated records)…", args.report_records);
        keep(
            "report",
            tempfile::tempdir().map_err(Into::into).and_then(|dir| {
                Ok(vec![svc::report::bench_figure(
                    args.report_records,
                    dir.path(),
                )?])
            }),
        );
    }
    if wants(Group::Proof) {
        eprintln!(
            "bench: proof planner ({} generated rounds)…",
            args.proof_rounds
        );
        keep(
            "proof",
            Ok(vec![svc::proof::bench::planner_figure(args.proof_rounds)]),
        );
    }
    if wants(Group::Proxy) {
        eprintln!(
            "bench: proxy ({} requests, {} clients, a 50K-token request, upstream faults)…",
            args.proxy_requests, args.proxy_clients
        );
        keep(
            "proxy",
            svc::proxy::bench::figures(args.proxy_requests, args.proxy_clients).map_err(Into::into),
        );
    }
    if wants(Group::Viewer) {
        eprintln!(
            "bench: viewer (a generated run of {} records)…",
            args.viewer_records
        );
        keep(
            "viewer",
            svc::dashboard::bench::figures(args.viewer_records).map_err(Into::into),
        );
    }
    if wants(Group::Daemon) {
        eprintln!(
            "bench: daemon (a generated repository of ~{} tokens)…",
            args.daemon_repo_tokens
        );
        keep(
            "daemon",
            svc::daemon::bench::watcher_figure(args.daemon_repo_tokens)
                .map(|f| vec![f])
                .map_err(Into::into),
        );
    }
    if wants(Group::Mcp) {
        keep("mcp", mcp_figures(&args, &corpus_root));
    }
    if wants(Group::Routing) {
        eprintln!(
            "bench: routing ({} simulated requests, seed {}, then seeds 1..={})…",
            args.routing_requests, args.routing_seed, args.routing_seeds
        );
        let settings = svc::routing::simulate::SimSettings {
            requests: args.routing_requests,
            seed: args.routing_seed,
            shadow_observations: args.routing_shadow,
            ..Default::default()
        };
        let seeds: Vec<u64> = (1..=args.routing_seeds).collect();
        keep(
            "routing",
            svc::routing::simulate::figures(&settings, &seeds).map_err(Into::into),
        );
    }
    let printed = if figures.is_empty() && !failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        print_figures(&figures, args.format)?
    };
    if failed.is_empty() {
        Ok(printed)
    } else {
        eprintln!("bench: failed group(s): {} (see above)", failed.join(", "));
        Ok(ExitCode::from(2))
    }
}

fn token_figures(corpus_root: &std::path::Path, corpus_mb: usize) -> anyhow::Result<Vec<Figure>> {
    let corpus = bench::load_source_corpus(corpus_root, corpus_mb * 1_000_000);
    if corpus.is_empty() {
        anyhow::bail!(
            "no source files under {} for the token benchmark; pass --corpus DIR",
            corpus_root.display()
        );
    }
    let mut figures = Vec::new();
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        eprintln!(
            "bench: token count ({encoding}) on {}…",
            corpus_root.display()
        );
        figures.push(bench::token_count(&corpus, encoding));
    }
    Ok(figures)
}

fn context_group(args: &BenchArgs, corpus_root: &std::path::Path) -> anyhow::Result<Vec<Figure>> {
    eprintln!(
        "bench: context engine on crates under {}…",
        corpus_root.display()
    );
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/code");
    let mut figures = Vec::new();
    match args.context_part {
        None => figures.extend(svc::context::bench::context_figures(
            corpus_root,
            &fixtures,
        )?),
        Some(ContextPart::Needles) => figures.push(svc::context::bench::needle_figure_on_registry(
            corpus_root,
            &fixtures,
        )?),
        Some(ContextPart::Localisation) => {}
    }
    if args.context_part != Some(ContextPart::Needles) || !args.localize_repo.is_empty() {
        figures.extend(localisation(args)?);
    }
    Ok(figures)
}

fn compress_group(args: &BenchArgs, corpus_root: &std::path::Path) -> anyhow::Result<Vec<Figure>> {
    if let Some(root) = &args.compress_corpus {
        eprintln!(
            "bench: compress on the repositories under {} (kinds, code elision)…",
            root.display()
        );
        let truth = include_str!("../../fixtures/compress/kind-truth.tsv");
        let (figures, table) = svc::context::compress::corpus::figures(root, truth)
            .map_err(|message| anyhow::anyhow!("fixtures/compress/kind-truth.tsv: {message}"))?;
        eprintln!("{table}");
        return Ok(figures);
    }
    eprintln!(
        "bench: compress ({} MB log, {} MB JSON, {} MB Markdown prose) and distill…",
        args.compress_mb, args.compress_mb, args.prose_mb
    );
    let prose =
        svc::context::compress::figures::load_markdown(corpus_root, args.prose_mb * 1_000_000);
    // The prose rows were left out, or measured a few KB, without a word.
    if args.prose_mb > 0 && prose.len() < args.prose_mb * 1_000_000 / 2 {
        anyhow::bail!(
            "only {:.2} MB of Markdown under {} for {} MB of prose; pass --corpus DIR with more, a smaller --prose-mb, or --prose-mb 0 to leave prose out",
            prose.len() as f64 / 1e6,
            corpus_root.display(),
            args.prose_mb
        );
    }
    let compress_state = tempfile::tempdir()?;
    let store = svc::context::commit::CommitStore::new(compress_state.path());
    Ok(svc::context::compress::figures::figures(
        args.compress_mb,
        &prose,
        &store,
    ))
}

/// The `mcp` group: this binary serves, on `--mcp-repo` or on crate sources copied from the
/// corpus directory.
fn mcp_figures(args: &BenchArgs, corpus_root: &std::path::Path) -> anyhow::Result<Vec<Figure>> {
    let program = std::env::current_exe().context("locating the svc binary to serve")?;
    let copy = tempfile::tempdir()?;
    let (tree, label) = match &args.mcp_repo {
        Some(repo) => (repo.clone(), repo.display().to_string()),
        None => {
            let names = svc::mcp::bench::copy_registry_corpus(corpus_root, copy.path())?;
            (copy.path().to_path_buf(), names.join(", "))
        }
    };
    eprintln!(
        "bench: mcp select_context round trips ({} warm calls) on {label}…",
        args.mcp_calls
    );
    Ok(svc::mcp::bench::figures(
        &program,
        &tree,
        &label,
        args.mcp_calls,
    )?)
}

fn print_figures(figures: &[Figure], format: Format) -> anyhow::Result<ExitCode> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(figures)?),
        Format::Text => print!("{}", render_table(figures)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The `harness` group: fixture-runner trials per second. The `svc` and `combined` conditions
/// join when the context engine is plugged in (`harness::condition::default_selector`).
fn harness_figure(args: &BenchArgs) -> anyhow::Result<Figure> {
    use svc::harness::{bench as harness_bench, condition, workload};
    let cache = tempfile::tempdir()?;
    let options = workload::LoadOptions {
        cache_dir: cache.path().to_path_buf(),
    };
    let root = workload::workloads_root();
    let loaded = match &args.harness_workload {
        // Named: measured on it or not at all (a typo had fallen back to another workload).
        Some(name) => workload::load(&root, name, &options)
            .with_context(|| format!("--harness-workload {name}"))?,
        None => workload::load(&root, "halueval-distractor", &options)
            .or_else(|error| {
                eprintln!(
                    "bench: {error}; using the fixture workload fixtures/harness/halueval-mini"
                );
                workload::load(&root, "fixtures/harness/halueval-mini", &options)
            })
            .context(
                "the harness figure has no workload: neither halueval-distractor nor the fixture one was found; run from the svc repository, point SVC_WORKLOADS_DIR at its workloads, or name one with --harness-workload",
            )?,
    };
    let selector = condition::default_selector();
    let mut conditions = vec![
        condition::Condition::Raw,
        condition::Condition::NativeCompaction,
    ];
    match harness_bench::selector_available(selector.as_ref()) {
        Ok(()) => conditions.extend([condition::Condition::Svc, condition::Condition::Combined]),
        Err(reason) => eprintln!("bench: harness: svc and combined left out: {reason}"),
    }
    eprintln!(
        "bench: harness fixture trials ({}, budget {})…",
        loaded.name(),
        args.harness_budget
    );
    Ok(harness_bench::fixture_throughput(
        loaded,
        conditions,
        args.harness_budget,
        args.harness_replicates,
        args.harness_repeats,
        None,
        selector,
    )?)
}

fn default_corpus() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(registry) = cargo_home.map(|h| h.join("registry").join("src"))
        && registry.is_dir()
    {
        return registry;
    }
    PathBuf::from("src")
}

/// A Markdown table, readable in a terminal and pasteable into notes.
pub fn render_table(figures: &[Figure]) -> String {
    let mut out =
        String::from("| benchmark | value | unit | target | detail |\n|---|---:|---|---|---|\n");
    for figure in figures {
        out.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} |\n",
            figure.name,
            figure.value,
            figure.unit,
            figure.target.as_deref().unwrap_or("-"),
            figure.detail
        ));
    }
    out
}

/// A repository's history to mine: a directory as it is, a `.bundle` file cloned bare to a
/// temporary directory (kept alive by the returned guard), and the revision to walk.
/// A bundle's temporary clone: removed when dropped, or when a signal ends svc.
pub(crate) type HistoryClone = (tempfile::TempDir, svc::child_groups::RegisteredDir);

pub(crate) fn open_history(
    repo: &std::path::Path,
    own: &std::path::Path,
) -> anyhow::Result<(Option<HistoryClone>, PathBuf, &'static str)> {
    if repo.is_file() {
        // A bundle is cloned bare (log, diff and ls-tree need no work tree).
        let clone = tempfile::tempdir()?;
        let registered = svc::child_groups::register_temp_dir(clone.path());
        eprintln!("cloning {}…", repo.display());
        // git runs as a group of its own, registered, so a signal ends it before its folder
        // is removed (it recreated the folder's parts as it wrote).
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("git")
            .args(["clone", "--quiet", "--bare"])
            .arg(repo)
            .arg(clone.path())
            .process_group(0)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let _group = svc::child_groups::register(child.id());
        let output = child.wait_with_output()?;
        if output.status.code().is_none() {
            // Killed by a signal: ours, whose handler is ending svc (and removing the clone);
            // the clone did not fail, so do not say it did.
            std::thread::sleep(std::time::Duration::from_secs(2));
            anyhow::bail!("cloning {} was interrupted", repo.display());
        }
        if !output.status.success() {
            anyhow::bail!(
                "git clone {} failed ({}); pass a git repository or bundle",
                repo.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        // A bundle holds one branch, which need not be what HEAD names.
        let path = clone.path().to_path_buf();
        Ok((Some((clone, registered)), path, "--all"))
    } else if repo == own {
        Ok((None, repo.to_path_buf(), "--all"))
    } else {
        Ok((None, repo.to_path_buf(), "HEAD"))
    }
}

/// Needles written against `name` (`fixtures/repo-needles/<name>.json`, held out: no scoring
/// change was made with them), run at 4K on the repository at their commit; none when the
/// repository has no needle file.
fn repo_needle_figure(name: &str, repo: &std::path::Path) -> anyhow::Result<Option<Figure>> {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/repo-needles")
        .join(format!("{name}.json"));
    if !file.exists() {
        return Ok(None);
    }
    let needles = svc::context::eval::load_repo_needles(&file)?;
    eprintln!(
        "bench: {} needles on {name} at {}…",
        needles.needles.len(),
        needles.commit
    );
    let outcomes = svc::context::eval::run_repo_needles(repo, &needles, 4_000)?;
    let hits = outcomes.iter().filter(|o| o.hit).count();
    let misses: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.hit)
        .map(|o| match (o.rank, o.resolution) {
            (Some(rank), Some(resolution)) => {
                format!("{} (rank {rank}, {})", o.symbol, resolution.as_str())
            }
            _ => format!("{} (not sent)", o.symbol),
        })
        .collect();
    Ok(Some(Figure {
        name: format!("needles on {name} (4K budget, held out)"),
        value: hits as f64,
        unit: format!("hits of {}", outcomes.len()),
        target: Some(format!("{} of {}", outcomes.len(), outcomes.len())),
        detail: format!(
            "defining fragment sent full; whole repository at {}; missed: {}",
            needles.commit,
            if misses.is_empty() {
                "none".to_string()
            } else {
                misses.join(", ")
            }
        ),
    }))
}

/// The localisation figures of every `--localize-repo` (svc, and the baselines when asked).
fn localisation(args: &BenchArgs) -> anyhow::Result<Vec<Figure>> {
    use svc::context::localize::{SelectFn, Sent};
    use svc::harness::selector::{SelectorName, build};
    let own = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let repos = if args.localize_repo.is_empty() {
        vec![own.clone()]
    } else {
        args.localize_repo.clone()
    };
    let baseline = |name: SelectorName| {
        let selector = build(name, 0);
        move |_: &svc::context::index::Index,
              docs: &[(String, String)],
              query: &str,
              budget: usize|
              -> Result<Sent, String> {
            Ok(selector
                .select(docs, query, budget)?
                .chunks
                .into_iter()
                .filter_map(|chunk| Some((chunk.chunk_id, chunk.resolution?)))
                .collect())
        }
    };
    let bm25 = baseline(SelectorName::Bm25Topk);
    let random = baseline(SelectorName::Random);
    let mut selectors: Vec<(&str, &SelectFn)> =
        vec![("svc", &svc::context::localize::svc_selector)];
    if args.localize_baselines {
        selectors.push(("bm25-topk", &bm25));
        selectors.push(("random", &random));
        selectors.push(("recent-only", &svc::context::localize::recent_selector));
    }
    let mut figures = Vec::new();
    let mut lines = String::new();
    // Every repository's outcomes, for the pooled figures.
    let mut pooled = Vec::new();
    let mut pooled_names = Vec::new();
    let mut pooled_mined = 0;
    for repo in &repos {
        let name = repo
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| repo.display().to_string());
        let (_clone, path, revision) = open_history(repo, &own)?;
        figures.extend(repo_needle_figure(&name, &path)?);
        if args.context_part == Some(ContextPart::Needles) {
            continue;
        }
        eprintln!(
            "bench: file localisation on {} history ({} tasks)…",
            repo.display(),
            args.localize_tasks
        );
        let measured = svc::context::bench::localisation_figures(
            &name,
            &path,
            revision,
            args.localize_tasks,
            match args.localize_part.as_deref() {
                Some("tune") => Some(svc::context::localize::Part::Tune),
                Some(_) => Some(svc::context::localize::Part::HeldOut),
                None => None,
            },
            &selectors,
        )?;
        figures.extend(measured.figures);
        for (selector, outcome) in &measured.outcomes {
            let mut value = serde_json::to_value(outcome)?;
            value["selector"] = selector.as_str().into();
            value["repository"] = name.as_str().into();
            lines.push_str(&value.to_string());
            lines.push('\n');
        }
        pooled.extend(measured.outcomes);
        pooled_mined += measured.mined;
        pooled_names.push(name);
    }
    // Several histories: the figures over all their tasks, which the targets are about.
    if pooled_names.len() > 1 {
        let names: Vec<&str> = selectors.iter().map(|s| s.0).collect();
        figures.extend(svc::context::bench::localisation_summary(
            "all repositories",
            &format!("of {pooled_mined} mined from {}", pooled_names.join(", ")),
            &names,
            &pooled,
        ));
    }
    if let Some(out) = &args.localize_out {
        svc::state::atomic_write(out, lines.as_bytes())?;
    }
    Ok(figures)
}
