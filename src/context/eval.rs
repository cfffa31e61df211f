//! Selection quality: needle queries (a query describing a function's behaviour; a hit is the
//! defining fragment sent `full` within the budget) and the skeleton ratio of a tree.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::commit::Resolution;
use super::index::Index;
use super::select::{self, SelectError, SelectOptions};

/// One needle: a query and the fragment that defines the answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Needle {
    pub query: String,
    /// Path of the file holding the definition (relative to the fixture root).
    pub chunk: String,
    /// The defined symbol.
    pub symbol: String,
}

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read needles {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not {expected}: {source}")]
    Parse {
        path: String,
        /// What the file should hold.
        expected: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error(
        "{repository} needle {number}: no fragment of {path} defines `{symbol}`; fix the needle's chunk or symbol"
    )]
    UnknownSymbol {
        repository: String,
        number: usize,
        symbol: String,
        path: String,
    },
}

/// Reads a needle list.
pub fn load_needles(path: &Path) -> Result<Vec<Needle>, EvalError> {
    load_json(
        path,
        "a needle list (a JSON array of {query, chunk, symbol})",
    )
}

fn load_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    expected: &'static str,
) -> Result<T, EvalError> {
    let text = std::fs::read_to_string(path).map_err(|source| EvalError::Read {
        path: path.display().to_string(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| EvalError::Parse {
        path: path.display().to_string(),
        expected,
        source,
    })
}

/// Outcome of one needle.
#[derive(Debug, Clone, Serialize)]
pub struct NeedleOutcome {
    pub query: String,
    pub symbol: String,
    pub hit: bool,
    /// How the defining fragment was sent (`None`: omitted or not found).
    pub resolution: Option<Resolution>,
    /// Rank of the defining fragment in the manifest (1-based), if found.
    pub rank: Option<usize>,
}

/// Runs every needle against `index` at `budget`. `prefix` is prepended to each needle's path
/// (the name under which the fixture tree was indexed).
pub fn run_needles(
    index: &Index,
    needles: &[Needle],
    prefix: &str,
    budget: usize,
) -> Result<Vec<NeedleOutcome>, EvalError> {
    let mut outcomes = Vec::with_capacity(needles.len());
    for needle in needles {
        let selection = select::select(index, &needle.query, budget, &SelectOptions::default())?;
        let path = format!("{prefix}{}", needle.chunk);
        let defining = selection.manifest.iter().enumerate().find(|(_, entry)| {
            entry.path == path
                && index
                    .fragments
                    .iter()
                    .find(|f| f.chunk_id == entry.chunk_id)
                    .is_some_and(|f| f.symbols.iter().any(|s| s == &needle.symbol))
        });
        let resolution = defining.and_then(|(_, e)| e.resolution);
        outcomes.push(NeedleOutcome {
            query: needle.query.clone(),
            symbol: needle.symbol.clone(),
            hit: resolution == Some(Resolution::Full),
            resolution,
            rank: defining.map(|(rank, _)| rank + 1),
        });
    }
    Ok(outcomes)
}

/// Needles written against one commit of a real repository (`fixtures/repo-needles/*.json`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoNeedles {
    /// The repository's name (the bundle's file stem).
    pub repository: String,
    /// The commit the needles were written against (a unique prefix is enough).
    pub commit: String,
    pub needles: Vec<Needle>,
}

/// Reads a [`RepoNeedles`] file.
pub fn load_repo_needles(path: &Path) -> Result<RepoNeedles, EvalError> {
    load_json(
        path,
        "a repository's needles (a JSON object {repository, commit, needles: [{query, chunk, symbol}]})",
    )
}

/// Runs `needles` on the tree of `repo` (a git repository, bare or not) at their commit, the
/// whole tree indexed as the localisation tasks index it. A needle whose symbol no fragment of
/// its file defines is an error naming it: a typo in the data must not read as a miss.
pub fn run_repo_needles(
    repo: &Path,
    needles: &RepoNeedles,
    budget: usize,
) -> Result<Vec<NeedleOutcome>, EvalError> {
    let docs = super::localize::tree_documents(repo, &needles.commit)?;
    let index = Index::from_documents(&docs);
    for (number, needle) in needles.needles.iter().enumerate() {
        let defined = index.fragments.iter().any(|fragment| {
            index.files[fragment.file].path == needle.chunk
                && fragment.symbols.iter().any(|s| s == &needle.symbol)
        });
        if !defined {
            return Err(EvalError::UnknownSymbol {
                repository: needles.repository.clone(),
                number: number + 1,
                symbol: needle.symbol.clone(),
                path: needle.chunk.clone(),
            });
        }
    }
    run_needles(&index, &needles.needles, "", budget)
}

/// Skeleton tokens over text tokens, over code fragments only. A fragment without a skeleton
/// counts at its full size (that is what a skeleton view would send).
pub fn skeleton_ratio(index: &Index) -> (usize, usize) {
    let mut skeleton = 0;
    let mut full = 0;
    for fragment in &index.fragments {
        if !index.files[fragment.file].language.is_code() {
            continue;
        }
        full += fragment.text_tokens;
        skeleton += if fragment.skeleton.is_some() {
            fragment.skeleton_tokens
        } else {
            fragment.text_tokens
        };
    }
    (skeleton, full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::index::IndexOptions;

    fn fixtures() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/code")
    }

    fn fixture_index() -> Index {
        let options = IndexOptions {
            persist: false,
            ..IndexOptions::default()
        };
        Index::build(&fixtures(), &options).expect("index fixtures")
    }

    #[test]
    fn needles_hit_on_the_fixture_tree() {
        let index = fixture_index();
        let needles = load_needles(&fixtures().join("needles.json")).expect("needles");
        assert!(needles.len() >= 30);
        // A budget far below the tree's size, so the selector has to choose.
        let outcomes = run_needles(&index, &needles, "", 600).expect("run");
        let misses: Vec<_> = outcomes.iter().filter(|o| !o.hit).collect();
        assert!(
            misses.len() <= 3,
            "{} of {} needles missed: {misses:#?}",
            misses.len(),
            outcomes.len()
        );
    }

    /// Snapshot of each language's skeleton: `SVC_UPDATE_SNAPSHOTS=1` rewrites them.
    #[test]
    fn skeleton_snapshots_per_language() {
        let index = fixture_index();
        let languages = [
            "rust",
            "python",
            "javascript",
            "typescript",
            "go",
            "java",
            "c",
            "cpp",
        ];
        let mut failures = Vec::new();
        for language in languages {
            let mut rendered = String::new();
            for fragment in &index.fragments {
                if !index.path(fragment).starts_with(&format!("{language}/")) {
                    continue;
                }
                let piece = index
                    .piece(fragment, crate::context::index::PieceKind::Skeleton)
                    .or_else(|| index.piece(fragment, crate::context::index::PieceKind::Full))
                    .unwrap_or_default();
                rendered.push_str(&piece);
            }
            // No source line may appear twice in one fragment's skeleton.
            for fragment in &index.fragments {
                if let Some(skeleton) = &fragment.skeleton {
                    let mut seen = std::collections::HashSet::new();
                    for line in skeleton
                        .lines()
                        .filter(|l| l.trim().len() > 3 && !l.contains(&fragment.chunk_id))
                    {
                        let source_count = index.text(fragment).matches(line).count();
                        assert!(
                            seen.insert(line) || source_count > 1,
                            "{} repeats {line:?}",
                            fragment.chunk_id
                        );
                    }
                }
            }
            let path = fixtures().join(format!("{language}.skeleton"));
            if std::env::var_os("SVC_UPDATE_SNAPSHOTS").is_some() {
                std::fs::write(&path, &rendered).expect("write snapshot");
                continue;
            }
            let expected = std::fs::read_to_string(&path).unwrap_or_default();
            if expected != rendered {
                failures.push(format!(
                    "{language}: skeleton differs from {} (SVC_UPDATE_SNAPSHOTS=1 to accept)\n{rendered}",
                    path.display()
                ));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn repo_needles_run_at_their_commit_and_a_symbol_nowhere_defined_is_an_error() {
        let repo = tempfile::tempdir().expect("repo");
        let git = |args: &[&str]| crate::git::in_test_repo(repo.path(), args);
        git(&["init", "-q"]);
        std::fs::write(
            repo.path().join("geo.py"),
            "def haversine(a, b):\n    \"\"\"Great-circle distance between two points.\"\"\"\n    return 2 * asin(sqrt(a * b))\n\n\ndef bearing(a, b):\n    return atan2(a, b)\n",
        )
        .expect("write");
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "geo"]);
        let head = git(&["rev-parse", "HEAD"]);
        // A later commit removes the function: the needles read the tree they name.
        std::fs::write(
            repo.path().join("geo.py"),
            "def bearing(a, b):\n    return 0\n",
        )
        .expect("write");
        git(&["commit", "-q", "-am", "drop"]);
        let mut needles = RepoNeedles {
            repository: "geo".into(),
            commit: head.trim()[..8].to_string(),
            needles: vec![Needle {
                query: "great-circle distance between two points".into(),
                chunk: "geo.py".into(),
                symbol: "haversine".into(),
            }],
        };
        let outcomes = run_repo_needles(repo.path(), &needles, 4_000).expect("run");
        assert!(outcomes[0].hit, "{outcomes:?}");

        // A needle list where a repository's needles belong: the error says which shape.
        let file = repo.path().join("needles.json");
        std::fs::write(
            &file,
            r#"[{"query": "q", "chunk": "geo.py", "symbol": "bearing"}]"#,
        )
        .expect("write");
        let error = load_repo_needles(&file)
            .expect_err("wrong shape")
            .to_string();
        assert!(
            error.contains("needles.json is not a repository's needles (a JSON object"),
            "{error}"
        );

        needles.needles[0].symbol = "haversin".into();
        let error = run_repo_needles(repo.path(), &needles, 4_000)
            .expect_err("unknown symbol")
            .to_string();
        assert!(
            error.contains("geo needle 1")
                && error.contains("`haversin`")
                && error.contains("geo.py"),
            "{error}"
        );
    }

    #[test]
    fn fixture_skeleton_is_much_smaller() {
        let index = fixture_index();
        let (skeleton, full) = skeleton_ratio(&index);
        assert!(skeleton * 2 < full, "skeleton {skeleton} of {full}");
    }
}
