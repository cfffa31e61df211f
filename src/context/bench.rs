//! The `context` group of `svc bench`: index, re-index, selection latency, skeleton ratio,
//! memory, persisted size and needle quality on real crate sources.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::eval::{self, EvalError};
use super::index::{Index, IndexError, IndexOptions};
use super::select::{self, SelectError, SelectOptions};
use crate::bench::Figure;

/// Crates measured when present under the registry source directory, in this order.
pub const CRATES: [&str; 6] = [
    "tokio-",
    "regex-automata-",
    "regex-syntax-",
    "axum-",
    "hyper-",
    "serde-",
];

/// Queries for the latency figure: behaviour descriptions a user would type.
const QUERIES: [&str; 12] = [
    "spawn a task on the runtime and await its join handle",
    "minimize a DFA using Hopcroft's algorithm",
    "parse a regex character class into an AST",
    "route an HTTP request to a handler with path parameters",
    "read a chunked transfer encoded body",
    "deserialize a struct from a map of fields",
    "timer wheel that fires expired sleeps",
    "mpsc channel send when the receiver is dropped",
    "case insensitive literal prefix search",
    "extract json body and reject wrong content type",
    "graceful shutdown of the server on signal",
    "utf8 decoding of invalid byte sequences",
];

#[derive(Debug, thiserror::Error)]
pub enum ContextBenchError {
    #[error("no crates from {wanted:?} under {root}; pass --corpus pointing at a registry src dir")]
    NoCorpus { root: PathBuf, wanted: Vec<String> },
    #[error("copying the corpus: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error(transparent)]
    Eval(#[from] EvalError),
}

/// The newest-named directory under `registry` (or under its index subdirectories, as in
/// `~/.cargo/registry/src/index.crates.io-*/`) starting with each prefix.
pub fn pick_crates(registry: &Path) -> Vec<PathBuf> {
    let found = pick_crates_in(registry);
    if !found.is_empty() {
        return found;
    }
    let Ok(entries) = std::fs::read_dir(registry) else {
        return Vec::new();
    };
    let mut subdirectories: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subdirectories.sort();
    subdirectories
        .iter()
        .map(|dir| pick_crates_in(dir))
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

fn pick_crates_in(registry: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(registry) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    CRATES
        .iter()
        .filter_map(|prefix| {
            names
                .iter()
                .rfind(|n| {
                    n.starts_with(prefix)
                        && n[prefix.len()..].starts_with(|c: char| c.is_ascii_digit())
                })
                .map(|n| registry.join(n))
        })
        .collect()
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// CPU seconds (user + system) this process has used, from /proc/self/stat (100 ticks/s).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// The 1-minute load average: other work competing for the cores while measuring.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Measures the context figures on the crates under `registry` and the needles under
/// `fixtures` (a directory with `needles.json`).
pub fn context_figures(registry: &Path, fixtures: &Path) -> Result<Vec<Figure>, ContextBenchError> {
    let crates = pick_crates(registry);
    if crates.is_empty() {
        return Err(ContextBenchError::NoCorpus {
            root: registry.to_path_buf(),
            wanted: CRATES.iter().map(|c| c.to_string()).collect(),
        });
    }
    let names: Vec<String> = crates
        .iter()
        .filter_map(|c| c.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let work = tempfile::tempdir()?;
    let tree = work.path().join("corpus");
    for (path, name) in crates.iter().zip(&names) {
        copy_tree(path, &tree.join(name))?;
    }
    let options = IndexOptions {
        state_home: Some(work.path().join("state")),
        ..IndexOptions::default()
    };
    let load = load_average();
    let cpu_start = cpu_seconds();
    let start = Instant::now();
    let cold = Index::build(&tree, &options)?;
    let cold_seconds = start.elapsed().as_secs_f64();
    let cold_cpu = cpu_seconds() - cpu_start;
    let rss = peak_rss_mb();
    let tokens = cold.stats.tokens;
    let million = tokens as f64 / 1e6;
    let corpus = format!(
        "{} ({} files, {tokens} o200k tokens, {:.1} MB)",
        names.join(", "),
        cold.stats.files,
        cold.stats.bytes as f64 / 1e6
    );
    let mut figures = vec![Figure {
        name: "context cold index".into(),
        value: cold_seconds / million.max(1e-9),
        unit: "s per 1M tokens".into(),
        target: Some("<= 2".into()),
        detail: format!(
            "{cold_seconds:.2} s wall, {cold_cpu:.2} s CPU over {corpus}, {} threads, load average {load}",
            rayon::current_num_threads()
        ),
    }];
    let persisted = cold.stats.persisted_bytes;
    let (skeleton, full) = eval::skeleton_ratio(&cold);
    drop(cold);

    let warm_cpu_start = cpu_seconds();
    let start = Instant::now();
    let warm = Index::build(&tree, &options)?;
    let warm_ms = start.elapsed().as_secs_f64() * 1e3;
    let warm_cpu_ms = (cpu_seconds() - warm_cpu_start) * 1e3;
    figures.push(Figure {
        name: "context warm re-index".into(),
        value: warm_ms,
        unit: "ms".into(),
        target: Some("<= 200".into()),
        detail: format!(
            "{} files unchanged, {} re-parsed; read + hash + load index; {warm_cpu_ms:.0} ms CPU, load average {}",
            warm.stats.reused,
            warm.stats.parsed,
            load_average()
        ),
    });
    let start = Instant::now();
    warm.prepare();
    let terms_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut latencies = Vec::new();
    let mut over = 0;
    let select_cpu_start = cpu_seconds();
    for round in 0..3 {
        for query in QUERIES {
            let start = Instant::now();
            let selection = select::select(&warm, query, 8_000, &SelectOptions::default())?;
            latencies.push(start.elapsed().as_secs_f64() * 1e3);
            if round == 0 && selection.tokens > 8_000 {
                over += 1;
            }
        }
    }
    let select_cpu_ms = (cpu_seconds() - select_cpu_start) * 1e3 / latencies.len().max(1) as f64;
    latencies.sort_by(f64::total_cmp);
    let p50 = latencies[latencies.len() / 2];
    let p95 = latencies[latencies.len() * 95 / 100];
    figures.push(Figure {
        name: "context select p50 (8K budget)".into(),
        value: p50,
        unit: "ms".into(),
        target: Some("<= 30".into()),
        detail: format!(
            "p95 {p95:.1} ms, mean CPU {select_cpu_ms:.1} ms over {} selections on the warm index (load average {}); term index built once in {terms_ms:.0} ms; {over} over budget",
            latencies.len(),
            load_average()
        ),
    });
    figures.push(Figure {
        name: "context skeleton ratio".into(),
        value: 100.0 * skeleton as f64 / full.max(1) as f64,
        unit: "% of code tokens".into(),
        target: Some("<= 15".into()),
        detail: format!("{skeleton} skeleton tokens of {full} code tokens"),
    });
    figures.push(Figure {
        name: "context peak RSS while indexing".into(),
        value: rss.unwrap_or(f64::NAN),
        unit: "MB".into(),
        target: Some("<= 600".into()),
        detail: "VmHWM of the bench process after the cold index".into(),
    });
    figures.push(Figure {
        name: "context persisted index size".into(),
        value: persisted as f64 / warm.stats.bytes.max(1) as f64,
        unit: "x corpus bytes".into(),
        target: Some("<= 2".into()),
        detail: format!(
            "{:.1} MB index for {:.1} MB of text",
            persisted as f64 / 1e6,
            warm.stats.bytes as f64 / 1e6
        ),
    });
    drop(warm);

    figures.push(needle_figure(&[(String::new(), tree)], fixtures)?);
    Ok(figures)
}

/// Needle hits at 4K: the fixture trees (`fixtures`, with `needles.json`) among the crate
/// sources as distractors, each `(prefix, directory)` of `roots` indexed under its prefix.
pub fn needle_figure(
    roots: &[(String, PathBuf)],
    fixtures: &Path,
) -> Result<Figure, ContextBenchError> {
    let needles = eval::load_needles(&fixtures.join("needles.json"))?;
    let mut docs: Vec<(String, String)> = Vec::new();
    collect_documents(fixtures, "fixtures/", fixtures, &mut docs);
    for (prefix, root) in roots {
        collect_documents(root, prefix, root, &mut docs);
    }
    let haystack = Index::from_documents(&docs);
    let outcomes = eval::run_needles(&haystack, &needles, "fixtures/", 4_000)?;
    let hits = outcomes.iter().filter(|o| o.hit).count();
    let misses: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.hit)
        .map(|o| o.symbol.as_str())
        .collect();
    Ok(Figure {
        name: "context needles (4K budget)".into(),
        value: hits as f64,
        unit: format!("hits of {}", outcomes.len()),
        target: Some(format!("{} of {}", outcomes.len(), outcomes.len())),
        detail: format!(
            "defining fragment sent full; fixtures/code among {} tokens of crate sources; missed: {}",
            haystack.stats.tokens,
            if misses.is_empty() {
                "none".to_string()
            } else {
                misses.join(", ")
            }
        ),
    })
}

/// [`needle_figure`] straight on the crates picked under `registry` (no copy, no index
/// figures): the same documents under the same names as in [`context_figures`].
pub fn needle_figure_on_registry(
    registry: &Path,
    fixtures: &Path,
) -> Result<Figure, ContextBenchError> {
    let crates = pick_crates(registry);
    if crates.is_empty() {
        return Err(ContextBenchError::NoCorpus {
            root: registry.to_path_buf(),
            wanted: CRATES.iter().map(|c| c.to_string()).collect(),
        });
    }
    let mut roots: Vec<(String, PathBuf)> = crates
        .iter()
        .filter_map(|c| {
            let name = c.file_name()?.to_string_lossy().into_owned();
            Some((format!("{name}/"), c.clone()))
        })
        .collect();
    roots.sort();
    needle_figure(&roots, fixtures)
}

fn collect_documents(dir: &Path, prefix: &str, root: &Path, out: &mut Vec<(String, String)>) {
    let walker = ignore::WalkBuilder::new(dir)
        .require_git(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let name = format!("{prefix}{}", relative.to_string_lossy().replace('\\', "/"));
        if name.ends_with(".json") || name.ends_with(".skeleton") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path())
            && text.len() <= 1_000_000
        {
            out.push((name, text));
        }
    }
}

/// File-localisation figures on tasks mined from `repo`'s history (see [`super::localize`]):
/// one recall and one coverage figure per selector, part (tune / held-out) and budget. Returns
/// the per-task outcomes too, tagged with the selector's name.
pub fn localisation_figures(
    name: &str,
    repo: &Path,
    revision: &str,
    max_tasks: usize,
    only: Option<super::localize::Part>,
    selectors: &[(&str, &super::localize::SelectFn)],
) -> Result<LocalisationFigures, super::localize::LocalizeError> {
    use super::localize;
    let mut tasks = localize::mine_tasks(repo, revision, max_tasks, 8)?;
    let mined = tasks.len();
    tasks.retain(|task| only.is_none_or(|part| task.part == part));
    let outcomes = localize::run_localisation_with(repo, &tasks, &LOCALISATION_BUDGETS, selectors)?;
    let names: Vec<&str> = selectors.iter().map(|s| s.0).collect();
    let figures = localisation_summary(
        name,
        &format!("of {mined} mined from {name} ({revision})"),
        &names,
        &outcomes,
    );
    Ok(LocalisationFigures {
        figures,
        outcomes,
        mined,
    })
}

/// Budgets every localisation figure is measured at.
const LOCALISATION_BUDGETS: [usize; 2] = [4_000, 8_000];

/// Resamples of the bootstrap interval of each localisation figure.
const BOOTSTRAP_RESAMPLES: usize = 2_000;

/// Recall and coverage figures of `outcomes` (each tagged with its selector's name) per
/// selector, part and budget, labelled `label` (a repository, or several pooled), each with a
/// 95 % percentile-bootstrap interval over its tasks: with 30 to 100 tasks a figure moves by
/// several points from one sample of tasks to another, and a target is met only when the
/// figure, not its noise, is above it. `source` says where the tasks came from.
pub fn localisation_summary(
    label: &str,
    source: &str,
    selectors: &[&str],
    outcomes: &[(String, super::localize::LocalisationOutcome)],
) -> Vec<Figure> {
    use super::localize::Part;
    let mut figures = Vec::new();
    for &selector in selectors {
        for part in [Part::Tune, Part::HeldOut] {
            for budget in LOCALISATION_BUDGETS {
                let at: Vec<_> = outcomes
                    .iter()
                    .filter(|(s, o)| s == selector && o.part == part && o.budget == budget)
                    .map(|(_, o)| o)
                    .collect();
                if at.is_empty() {
                    continue;
                }
                let rows: Vec<f64> = at
                    .iter()
                    .flat_map(|o| [o.gold_recall, o.line_coverage])
                    .collect();
                let estimates = crate::report::stats::bootstrap_means(
                    &rows,
                    2,
                    BOOTSTRAP_RESAMPLES,
                    0.95,
                    0,
                    <[f64]>::to_vec,
                );
                let seconds = at.iter().map(|o| o.seconds).sum::<f64>() / at.len() as f64;
                let held_out_svc = selector == "svc" && part == Part::HeldOut && budget == 8_000;
                let name = format!("{label}, {}, {selector}", part.as_str());
                for (i, (what, target)) in [("recall", ">= 97"), ("coverage", ">= 65")]
                    .into_iter()
                    .enumerate()
                {
                    // One task or more: the estimate exists (bootstrap_means is None only on
                    // no rows).
                    let Some(estimate) = estimates.get(i).copied().flatten() else {
                        continue;
                    };
                    figures.push(Figure {
                        name: format!("localisation {what} {}K ({name})", budget / 1000),
                        value: 100.0 * estimate.estimate,
                        unit: "%".into(),
                        target: held_out_svc.then(|| target.into()),
                        detail: format!(
                            "{} {} tasks {source}; 95 % CI {:.1}–{:.1} (bootstrap over tasks); mean {:.0} ms per selection",
                            at.len(),
                            part.as_str(),
                            100.0 * estimate.ci_low,
                            100.0 * estimate.ci_high,
                            seconds * 1e3
                        ),
                    });
                }
            }
        }
    }
    figures
}

/// What [`localisation_figures`] measured.
pub struct LocalisationFigures {
    pub figures: Vec<Figure>,
    /// Per task and budget, tagged with the selector's name.
    pub outcomes: Vec<(String, super::localize::LocalisationOutcome)>,
    /// Tasks mined from the history (before keeping one part).
    pub mined: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::localize::{LocalisationOutcome, Part};

    fn outcome(part: Part, budget: usize, recall: f64) -> LocalisationOutcome {
        LocalisationOutcome {
            commit: "c".into(),
            part,
            budget,
            gold_recall: recall,
            line_coverage: recall / 2.0,
            seconds: 0.001,
        }
    }

    /// The pooled figures are the means over every task of the repositories given, each with a
    /// bootstrap interval around it; only the held-out svc figures at 8K carry the targets.
    #[test]
    fn summaries_pool_tasks_and_give_an_interval_around_each_mean() {
        let mut outcomes = Vec::new();
        for (i, recall) in [1.0, 1.0, 0.5, 1.0, 0.0, 1.0, 1.0, 0.5]
            .into_iter()
            .enumerate()
        {
            let part = if i % 2 == 0 {
                Part::HeldOut
            } else {
                Part::Tune
            };
            for budget in LOCALISATION_BUDGETS {
                outcomes.push(("svc".to_string(), outcome(part, budget, recall)));
                outcomes.push(("random".to_string(), outcome(part, budget, 0.0)));
            }
        }
        let figures = localisation_summary(
            "all repositories",
            "of 8 mined from a, b",
            &["svc", "random"],
            &outcomes,
        );
        assert_eq!(figures.len(), 2 * 2 * 2 * 2);
        let held_out = figures
            .iter()
            .find(|f| f.name == "localisation recall 8K (all repositories, held-out, svc)")
            .expect("pooled held-out recall");
        // Held-out tasks: recalls 1.0, 0.5, 0.0, 1.0.
        assert!((held_out.value - 62.5).abs() < 1e-9, "{}", held_out.value);
        assert_eq!(held_out.target.as_deref(), Some(">= 97"));
        assert!(
            held_out
                .detail
                .starts_with("4 held-out tasks of 8 mined from a, b; 95 % CI ")
        );
        let interval: Vec<f64> = held_out.detail
            ["4 held-out tasks of 8 mined from a, b; 95 % CI ".len()..]
            .split(" (")
            .next()
            .expect("interval")
            .split('–')
            .map(|x| x.parse().expect("number"))
            .collect();
        assert!(interval[0] < 62.5 && 62.5 < interval[1], "{interval:?}");
        assert!(interval[0] >= 0.0 && interval[1] <= 100.0);
        let random = figures
            .iter()
            .find(|f| f.name == "localisation recall 8K (all repositories, held-out, random)")
            .expect("baseline");
        assert_eq!(random.value, 0.0);
        assert!(random.target.is_none());
        assert!(
            random.detail.contains("95 % CI 0.0–0.0"),
            "{}",
            random.detail
        );
    }
}
