//! What part a file plays in a project, from its path alone: source code, tests,
//! documentation, configuration (build, CI, packaging), or generated and vendored text. A
//! question about a project is usually answered by its source code, so a match elsewhere is
//! weaker evidence than the same match in source — not none: a test or a config file can be
//! what the question is about, and a project made only of documents ranks as before (a prior
//! that every file shares changes no relative score).

use super::index::Language;

/// A file's role. Changelogs and licences are documentation with a prior of their own
/// ([`super::weights::Feature::RecordPrior`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    Source,
    Test,
    Docs,
    Config,
    Generated,
}

/// Score factors by role, chosen on the tune part of the mined localisation tasks (see the
/// docs/context-engine.md, "Localisation on real history"): documentation and configuration name the
/// project's words in prose and settings without holding the behaviour asked about;
/// generated, lock and vendored files repeat names without being anyone's edit target.
impl FileRole {
    pub fn prior(self) -> f64 {
        match self {
            FileRole::Source => 1.0,
            FileRole::Test => 1.0,
            FileRole::Docs => 0.3,
            FileRole::Config => 0.3,
            FileRole::Generated => 0.1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FileRole::Source => "source",
            FileRole::Test => "test",
            FileRole::Docs => "docs",
            FileRole::Config => "config",
            FileRole::Generated => "generated",
        }
    }
}

/// Directory names whose files are tests.
const TEST_DIRECTORIES: &[&str] = &["tests", "test", "__tests__", "spec", "specs"];
/// Directory names whose files are someone else's code or build output.
const VENDORED_DIRECTORIES: &[&str] = &["vendor", "third_party", "node_modules", "dist"];
/// Directory names whose text files are documentation.
const DOC_DIRECTORIES: &[&str] = &["doc", "docs", "documentation", "man"];

/// The role of the file at `path`.
pub fn role_of(path: &str) -> FileRole {
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().unwrap_or_default().to_ascii_lowercase();
    let extension = file.rsplit_once('.').map_or("", |(_, e)| e);
    if is_generated(&file, extension) || parts.iter().any(|p| VENDORED_DIRECTORIES.contains(p)) {
        return FileRole::Generated;
    }
    let code = Language::from_name(&file).is_code();
    if code {
        let test_file = (file.starts_with("test_") && extension == "py")
            || file.ends_with("_test.py")
            || file == "conftest.py"
            || file.ends_with("_test.go")
            || file.contains(".test.")
            || file.contains(".spec.");
        let test_directory = parts.iter().any(|p| TEST_DIRECTORIES.contains(p));
        return if test_file || test_directory {
            FileRole::Test
        } else {
            FileRole::Source
        };
    }
    let prose = matches!(
        extension,
        "md" | "markdown" | "mdx" | "rst" | "txt" | "adoc" | "asciidoc" | "org" | "tex"
    );
    // Man pages: `fd.1`, `git-log.5`.
    let man_page = extension.len() == 1 && extension.as_bytes()[0].is_ascii_digit();
    if prose || man_page || parts.iter().any(|p| DOC_DIRECTORIES.contains(p)) {
        return FileRole::Docs;
    }
    FileRole::Config
}

/// Lock files, minified bundles, source maps and images kept as text.
fn is_generated(file: &str, extension: &str) -> bool {
    matches!(extension, "lock" | "map" | "svg" | "snap")
        || matches!(
            file,
            "package-lock.json" | "pnpm-lock.yaml" | "go.sum" | "npm-shrinkwrap.json"
        )
        || file.contains(".min.")
        || file.ends_with("_pb2.py")
        || file.ends_with(".pb.go")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_get_the_role_a_developer_would_give_them() {
        for (path, role) in [
            ("src/requests/models.py", FileRole::Source),
            ("src/flask/testing.py", FileRole::Source),
            ("build.rs", FileRole::Source),
            ("docs/conf.py", FileRole::Source),
            ("tests/test_requests.py", FileRole::Test),
            ("tests/tests.rs", FileRole::Test),
            ("pkg/walk_test.go", FileRole::Test),
            ("web/app.test.ts", FileRole::Test),
            ("conftest.py", FileRole::Test),
            ("docs/user/quickstart.rst", FileRole::Docs),
            ("README.md", FileRole::Docs),
            ("doc/fd.1", FileRole::Docs),
            ("docs/Makefile", FileRole::Docs),
            ("pyproject.toml", FileRole::Config),
            (".github/workflows/ci.yml", FileRole::Config),
            ("tox.ini", FileRole::Config),
            ("Cargo.lock", FileRole::Generated),
            ("uv.lock", FileRole::Generated),
            ("web/package-lock.json", FileRole::Generated),
            ("static/app.min.js", FileRole::Generated),
            ("vendor/lib/x.go", FileRole::Generated),
            ("ext/logo.svg", FileRole::Generated),
        ] {
            assert_eq!(role_of(path), role, "{path}");
        }
    }
}
