//! `--data-root`: the one directory a leader reads reported datasets from. A pattern and every
//! path it expands to are resolved (`..` and symbolic links) and must lie under the root;
//! anything else is refused before it is opened.

use super::ScanError;
use anyhow::Context as _;
use std::io;
use std::path::{Component, Path, PathBuf};

/// The root, resolved once at start: a symbolic link swapped in later cannot move it.
#[derive(Debug)]
pub(crate) struct DataRoot {
    /// The resolved directory every dataset file must lie under.
    canonical: PathBuf,
    /// The root as the operator spelled it (made absolute, `..` removed): absolute patterns
    /// may use this spelling even when it runs through a symbolic link.
    given: PathBuf,
}

impl DataRoot {
    /// Resolves `given`, which must be a directory; the error names the flag and the path.
    pub(crate) fn open(given: &Path) -> anyhow::Result<Self> {
        let canonical = std::fs::canonicalize(given)
            .with_context(|| format!("--data-root {}: cannot resolve it", given.display()))?;
        anyhow::ensure!(
            canonical.is_dir(),
            "--data-root {}: not a directory (resolved to {})",
            given.display(),
            canonical.display()
        );
        let given = std::path::absolute(given)
            .with_context(|| format!("--data-root {}: cannot make it absolute", given.display()))?;
        Ok(Self { canonical, given: lexically_normal(&given) })
    }

    /// The resolved root: relative patterns are taken relative to it, and messages name it.
    pub(crate) fn path(&self) -> &Path {
        &self.canonical
    }

    /// Refuses, by its text alone (nothing on disk is touched), a pattern whose `..` or
    /// absolute path leaves the root. Symbolic links are checked later, on what it expands to.
    pub(crate) fn check_pattern(&self, pattern: &str) -> Result<(), ScanError> {
        let joined = lexically_normal(&self.canonical.join(pattern));
        if joined.starts_with(&self.canonical) || joined.starts_with(&self.given) {
            return Ok(());
        }
        Err(self.outside(pattern, Path::new(pattern)))
    }

    /// `path` resolved, if it lies under the root; `None` if it does not exist (nothing to
    /// read there). Resolving follows symbolic links but opens nothing.
    pub(crate) fn resolve(&self, pattern: &str, path: &Path) -> Result<Option<PathBuf>, ScanError> {
        // An empty path is the working directory, which a pattern under a root never names.
        let named = if path.as_os_str().is_empty() { Path::new(".") } else { path };
        match std::fs::canonicalize(named) {
            Ok(resolved) if resolved.starts_with(&self.canonical) => Ok(Some(resolved)),
            Ok(_) => Err(self.outside(pattern, path)),
            Err(error) if is_absent(&error) => Ok(None),
            Err(source) => Err(ScanError::Unresolvable {
                pattern: pattern.to_string(),
                path: path.to_owned(),
                source,
            }),
        }
    }

    fn outside(&self, pattern: &str, path: &Path) -> ScanError {
        ScanError::OutsideRoot {
            pattern: pattern.to_string(),
            path: path.to_owned(),
            root: self.canonical.clone(),
        }
    }
}

/// Whether resolving failed only because nothing is there.
fn is_absent(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

/// `path` with `.` dropped and each `..` taking away the name before it (never above `/`),
/// by the text alone.
fn lexically_normal(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                normal.pop();
            }
            other => normal.push(other.as_os_str()),
        }
    }
    normal
}
