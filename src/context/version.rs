//! Releases: a query naming a version number ("release version 2.3.3", "v2.30.0") is a
//! release or a version bump, which edits the line where the package sets its version — a
//! line no query word reaches ("version" is everywhere, the number is the new one). A developer
//! greps for `__version__`; [`setting_fragments`] is that grep.

use super::index::Index;

/// Whether the query names a release number: `major.minor.patch` (three or more numeric parts,
/// optionally after a `v`). Two parts ("Python 3.8") name a platform far more often.
pub fn names_release(query: &str) -> bool {
    query.split_whitespace().any(|raw| {
        let word = raw
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .trim_start_matches(['v', 'V']);
        let parts: Vec<&str> = word.split('.').collect();
        parts.len() >= 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Names a package's version constant goes by.
const VERSION_NAMES: &[&str] = &["__version__", "VERSION", "__VERSION__", "version"];

/// Declaration words that may precede the name (`pub const VERSION`, `export const version`).
const DECLARATIONS: &[&str] = &["pub", "const", "static", "export", "let", "var", "final"];

/// Whether a line of code assigns a version constant: after optional declaration words, one of
/// [`VERSION_NAMES`], an optional type annotation, then `=` (not `==`).
pub fn sets_version(line: &str) -> bool {
    let mut rest = line.trim_start();
    while let Some((word, after)) = rest.split_once(char::is_whitespace)
        && DECLARATIONS.contains(&word)
    {
        rest = after.trim_start();
    }
    let Some(name) = VERSION_NAMES
        .iter()
        .find(|n| rest.starts_with(**n))
        .copied()
    else {
        return false;
    };
    let after = &rest[name.len()..];
    // The name must end there (`versions = …`, `version_info` are other names).
    if after
        .chars()
        .next()
        .is_some_and(|c| c.is_alphanumeric() || c == '_')
    {
        return false;
    }
    // A type annotation (`: &str`) may sit between the name and the `=`.
    let after = after.trim_start();
    let after = match after.strip_prefix(':') {
        Some(typed) => typed.split_once('=').map_or("", |(_, v)| v),
        None => match after.strip_prefix('=') {
            Some(value) if !value.starts_with('=') => value,
            _ => return false,
        },
    };
    !after.trim().is_empty()
}

/// The fragments of code files that hold a line setting a version constant.
pub fn setting_fragments(index: &Index) -> Vec<usize> {
    let mut out = Vec::new();
    for file in &index.files {
        // Most files name no version at all: skip them without splitting lines.
        if !file.language.is_code()
            || !(file.text.contains("version") || file.text.contains("VERSION"))
        {
            continue;
        }
        let mut offset = 0;
        for line in file.text.split_inclusive('\n') {
            if sets_version(line.trim_end())
                && let Some(fragment) = index.fragment_at(file, offset)
                && !out.contains(&fragment)
            {
                out.push(fragment);
            }
            offset += line.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_numbers_have_three_parts() {
        assert!(names_release("release version 2.3.3"));
        assert!(names_release("v2.30.0"));
        assert!(names_release("Bump to 10.0.1."));
        assert!(!names_release("drop support for Python 3.8"));
        assert!(!names_release("fix 1.2-metre telescope"));
        assert!(!names_release("release notes"));
    }

    #[test]
    fn version_constants_are_assignments_of_a_version_name() {
        for line in [
            "__version__ = \"2.3.3.dev\"",
            "    __version__ = '1.0'",
            "pub const VERSION: &str = \"8.7.0\";",
            "export const version = '1.2.3';",
            "VERSION = (1, 2, 3)",
        ] {
            assert!(sets_version(line), "{line}");
        }
        for line in [
            "if __version__ == \"1\":",
            "version_info = (1, 2)",
            "versions = []",
            "print(version)",
            "version =",
            "the version = 3",
        ] {
            assert!(!sets_version(line), "{line}");
        }
    }
}
