//! `svc report --compare-runs A B`: what the two record sets are and what differs in their run
//! manifests (settings, selector, svc version, commit), so a comparison of runs says what was
//! varied. The pairing itself is in `cluster`/`paired` (arms of record set 0 and 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Manifest fields that differ between any two runs and say nothing about their settings.
const VOLATILE: [&str; 6] = [
    "run_id",
    "started_at",
    "ended_at",
    "skipped",
    "planned",
    "written",
];

/// One record set of a run comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSet {
    pub label: String,
    pub paths: Vec<String>,
    /// `manifest.json` files found in or beside the inputs.
    pub manifests: Vec<String>,
}

/// A manifest field whose values differ between the sets (values of several manifests of one
/// set are joined with " | ").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestDifference {
    pub field: String,
    pub a: Option<String>,
    pub b: Option<String>,
}

/// The two record sets of `--compare-runs` and what differs in their manifests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunsCompared {
    pub a: RunSet,
    pub b: RunSet,
    pub differences: Vec<ManifestDifference>,
}

/// A short label for a record set: its last path component (of the first input).
pub fn label(paths: &[PathBuf]) -> String {
    paths
        .first()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "records".into())
}

/// Labels for the two sets, made distinct ("A: x", "B: x") when their names are equal.
pub fn labels(a: &[PathBuf], b: &[PathBuf]) -> [String; 2] {
    let (x, y) = (label(a), label(b));
    if x == y {
        [format!("A: {x}"), format!("B: {y}")]
    } else {
        [x, y]
    }
}

fn manifests(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        let dir = if path.is_dir() {
            path.clone()
        } else {
            path.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        collect(&dir, &mut out, 0);
    }
    out.sort();
    out.dedup();
    out
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>, depth: usize) {
    let manifest = dir.join("manifest.json");
    if manifest.is_file() {
        out.push(manifest);
        return;
    }
    // A runs/ tree holds one run directory per workload; deeper folders are not runs.
    if depth >= 3 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for sub in dirs {
        collect(&sub, out, depth + 1);
    }
}

fn flatten(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let field = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                flatten(&field, v, out);
            }
        }
        serde_json::Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

/// Field → distinct values (joined) over the manifests of one set.
fn fields(manifests: &[PathBuf]) -> BTreeMap<String, String> {
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in manifests {
        let Some(value) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        let mut flat = BTreeMap::new();
        flatten("", &value, &mut flat);
        for (field, v) in flat {
            if VOLATILE.contains(&field.as_str()) {
                continue;
            }
            let entry = values.entry(field).or_default();
            if !entry.contains(&v) {
                entry.push(v);
            }
        }
    }
    values
        .into_iter()
        .map(|(k, v)| (k, v.join(" | ")))
        .collect()
}

/// Describes the two sets and lists the manifest fields whose values differ.
pub fn runs_compared(a: &[PathBuf], b: &[PathBuf], labels: &[String]) -> RunsCompared {
    let set = |paths: &[PathBuf], label: &str| {
        let found = manifests(paths);
        (
            RunSet {
                label: label.to_string(),
                paths: paths
                    .iter()
                    .map(|p| p.to_string_lossy().to_string())
                    .collect(),
                manifests: found
                    .iter()
                    .map(|p| p.to_string_lossy().to_string())
                    .collect(),
            },
            fields(&found),
        )
    };
    let (set_a, fields_a) = set(a, labels.first().map_or("A", String::as_str));
    let (set_b, fields_b) = set(b, labels.get(1).map_or("B", String::as_str));
    let mut keys: Vec<&String> = fields_a.keys().chain(fields_b.keys()).collect();
    keys.sort();
    keys.dedup();
    let differences = keys
        .into_iter()
        .filter(|k| fields_a.get(*k) != fields_b.get(*k))
        .map(|k| ManifestDifference {
            field: k.clone(),
            a: fields_a.get(k).cloned(),
            b: fields_b.get(k).cloned(),
        })
        .collect();
    RunsCompared {
        a: set_a,
        b: set_b,
        differences,
    }
}

/// When the sets differ in a `selector` setting, adds it to their labels ("runs-a · bm25-topk"),
/// so plots and tables name the selector of each point.
pub fn name_selectors(compared: &mut RunsCompared) {
    let Some(difference) = compared
        .differences
        .iter()
        .find(|d| d.field == "selector" || d.field.ends_with(".selector"))
    else {
        return;
    };
    for (set, value) in [
        (&mut compared.a, &difference.a),
        (&mut compared.b, &difference.b),
    ] {
        if let Some(value) = value {
            set.label = format!("{} · {value}", set.label);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_changed_fields_and_skip_volatile_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, selector, version) in [("a", "svc", "0.1.0"), ("b", "bm25-topk", "0.1.0")] {
            let run = dir.path().join(name).join("qa");
            std::fs::create_dir_all(&run).expect("mkdir");
            std::fs::write(
                run.join("manifest.json"),
                format!(
                    r#"{{"run_id":"{name}","svc_version":"{version}","selector":"{selector}","runner":{{"name":"fixture"}},"budgets":[512]}}"#
                ),
            )
            .expect("write");
        }
        let a = [dir.path().join("a")];
        let b = [dir.path().join("b")];
        let compared = runs_compared(&a, &b, &labels(&a, &b));
        assert_eq!(compared.a.manifests.len(), 1);
        assert_eq!(
            compared.differences,
            vec![ManifestDifference {
                field: "selector".into(),
                a: Some("svc".into()),
                b: Some("bm25-topk".into()),
            }]
        );
        assert_eq!(labels(&a, &a), ["A: a".to_string(), "B: a".to_string()]);
        let mut named = compared.clone();
        name_selectors(&mut named);
        assert_eq!(named.a.label, "a · svc");
        assert_eq!(named.b.label, "b · bm25-topk");
    }
}
