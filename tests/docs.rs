//! The documentation stands alone: every relative link in the README, CONTRIBUTING and docs/
//! leads to a file of the repository, and every `#anchor` to a heading of that file (GitHub's
//! anchors: the heading in lower case, spaces as `-`, other punctuation dropped, `-1`, `-2`
//! for repeats). Module documentation points at docs by path; those paths exist too.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README, CONTRIBUTING, every page under docs/, and the READMEs of the conformance suite,
/// the examples and the SDKs.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![
        root().join("README.md"),
        root().join("CONTRIBUTING.md"),
        root().join("conformance/README.md"),
        root().join("examples/README.md"),
        root().join("sdks/python/README.md"),
        root().join("sdks/node/README.md"),
        root().join("sdks/go/README.md"),
        root().join("sdks/java/README.md"),
    ];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                docs.push(path);
            }
        }
    }
    docs.sort();
    docs
}

/// The lines outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor of a heading's text.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading);
        let n = seen.entry(base.clone()).or_default();
        out.insert(if *n == 0 {
            base.clone()
        } else {
            format!("{base}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of the inline links `[text](target)` of `text`'s prose (inline code removed).
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        // Code spans hold brackets that are not links.
        let line: String = line.split('`').step_by(2).collect::<Vec<_>>().join("");
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            rest = &rest[i + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = rest[..end].split_whitespace().next().unwrap_or("");
            out.push(target.to_string());
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = fs::read_to_string(&doc).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            let shown = format!("{}: {target}", doc.strip_prefix(root()).unwrap().display());
            if !path.exists() {
                broken.push(format!("{shown} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor
                && path.extension().is_some_and(|e| e == "md")
                && !anchors(&fs::read_to_string(&path).unwrap()).contains(anchor)
            {
                broken.push(format!("{shown} (no such heading)"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 30, "only {checked} links found");
}

/// `docs/….md` named in the sources' comments (module documentation cites the docs by path).
#[test]
fn every_doc_the_sources_cite_exists() {
    let mut missing = BTreeSet::new();
    let mut stack = vec![root().join("src"), root().join("migrations")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(text) = fs::read_to_string(&path) else {
                continue;
            };
            for (i, _) in text.match_indices("docs/") {
                let name: String = text[i..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || matches!(c, '/' | '-' | '_' | '.'))
                    .collect();
                let name = name.trim_end_matches('.');
                if name.ends_with(".md") && !Path::new(&root().join(name)).exists() {
                    missing.insert(format!("{}: {name}", path.display()));
                }
            }
        }
    }
    assert!(missing.is_empty(), "cited docs missing:\n{missing:#?}");
}

#[test]
fn anchors_follow_github() {
    let text = "# JobFlow\n## Running jobs in production\n### `routeStrategy` (routing)\n## Notes\n## Notes\n```\n# not a heading\n```\n";
    assert_eq!(
        anchors(text),
        BTreeSet::from(
            [
                "jobflow",
                "running-jobs-in-production",
                "routestrategy-routing",
                "notes",
                "notes-1"
            ]
            .map(String::from)
        )
    );
}
