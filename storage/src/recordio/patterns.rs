//! Turning the file arguments of a dataset (paths and globs) into the list of files to read.
//!
//! The expansion walks directories itself (the `glob` crate only matches names) so that a
//! caller can watch every step through an [`ExpandGuard`]: count entries, check a deadline or a
//! cancel flag, and refuse directories it must not look into. A glob over a symlink loop
//! otherwise walks for ever: `**` follows symbolic links, as the `glob` crate does, so the
//! expansion itself refuses a `**` that reaches a directory it is already inside (known by
//! device and inode, whatever path led there) or that goes deeper than [`GLOB_DEPTH_MAX`]:
//! every caller, guarded or not, gets a bounded walk.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use glob::{MatchOptions, Pattern};

use super::{ErrorKind, RecordIoError};

/// The most directories one `**` descends below where it starts: deeper than any dataset's
/// layout, shallow enough that a walk it bounds stays cheap.
pub const GLOB_DEPTH_MAX: usize = 64;

/// A directory as the filesystem knows it, whatever path reached it: (device, inode).
type DirectoryId = (u64, u64);

/// What an expansion asks its caller before each step; the caller stops it by returning an
/// error, or skips a directory by returning `false`.
pub trait ExpandGuard {
    /// The caller's error: carries a [`RecordIoError`] from the expansion itself.
    type Error: From<RecordIoError>;
    /// Called before the expansion lists `directory` or looks up a name in it; `Ok(false)`
    /// skips it (as if it were empty).
    fn visit_directory(&mut self, directory: &Path) -> Result<bool, Self::Error>;
    /// Called for every entry of a listed directory, before it is matched.
    fn visit_entry(&mut self, entry: &Path) -> Result<(), Self::Error>;
}

/// A guard that lets every step through: the plain expansion of local tools.
struct Unguarded;

impl ExpandGuard for Unguarded {
    type Error = RecordIoError;

    fn visit_directory(&mut self, _directory: &Path) -> Result<bool, RecordIoError> {
        Ok(true)
    }

    fn visit_entry(&mut self, _entry: &Path) -> Result<(), RecordIoError> {
        Ok(())
    }
}

/// Expands each pattern, in the order given, into the files it names: an existing file is
/// taken as is (even if its name contains glob characters); anything else is a glob whose
/// matching files come in sorted order. Directories are skipped. A pattern that names no file
/// is an error naming the pattern (and saying so when it names a directory).
pub fn expand_patterns(patterns: &[String]) -> Result<Vec<PathBuf>, RecordIoError> {
    let mut paths = Vec::new();
    for pattern in patterns {
        let matched = expand_pattern_guarded(Path::new(""), pattern, &mut Unguarded)?;
        if matched.is_empty() {
            let pattern = pattern.clone();
            let kind = if Path::new(&pattern).is_dir() {
                ErrorKind::Directory { pattern: pattern.clone() }
            } else {
                ErrorKind::NoMatch { pattern: pattern.clone() }
            };
            return Err(RecordIoError::new(&pattern, 0, kind));
        }
        paths.extend(matched);
    }
    Ok(paths)
}

/// The files one pattern names, sorted (empty if none), with a relative pattern taken
/// relative to `base` (taken literally: glob characters in it are not special). `guard` sees
/// every directory before it is looked into and every entry listed.
pub fn expand_pattern_guarded<G: ExpandGuard>(
    base: &Path,
    pattern: &str,
    guard: &mut G,
) -> Result<Vec<PathBuf>, G::Error> {
    let literal = base.join(pattern);
    if guard.visit_directory(parent(&literal))? && literal.is_file() {
        return Ok(vec![literal]);
    }
    let parts = parse(pattern)?;
    let mut matched = Vec::new();
    // Depth first; `next` is the index of the first part the path has not matched yet, and
    // `inside` the directories the current `**` descended through to reach the path.
    let mut pending = vec![(base.to_path_buf(), 0usize, Vec::new())];
    while let Some((path, next, inside)) = pending.pop() {
        match parts.get(next) {
            None => {
                if path.is_file() {
                    matched.push(path);
                }
            }
            Some(Part::Literal(name)) => {
                let is_last = next + 1 == parts.len();
                if !is_last || guard.visit_directory(&path)? {
                    pending.push((path.join(name), next + 1, Vec::new()));
                }
            }
            Some(Part::Glob(glob)) => {
                for entry in list_directory(&path, guard)? {
                    if matches(glob, &entry) {
                        pending.push((entry, next + 1, Vec::new()));
                    }
                }
            }
            Some(Part::AnyDirectories) => {
                pending.push((path.clone(), next + 1, Vec::new()));
                let entries = list_directory(&path, guard)?;
                let directories: Vec<PathBuf> =
                    entries.into_iter().filter(|entry| is_directory(entry)).collect();
                if directories.is_empty() {
                    continue;
                }
                let inside = descend(pattern, &path, inside)?;
                for entry in directories {
                    pending.push((entry, next, inside.clone()));
                }
            }
        }
    }
    matched.sort();
    Ok(matched)
}

/// `inside` with `directory` added, before a `**` descends into its subdirectories; refused
/// when `directory` is one of them already (a loop) or the descent is too deep.
fn descend(
    pattern: &str,
    directory: &Path,
    mut inside: Vec<DirectoryId>,
) -> Result<Vec<DirectoryId>, RecordIoError> {
    let listed = if directory.as_os_str().is_empty() { Path::new(".") } else { directory };
    // A directory gone since it was listed has nothing to descend into.
    let Ok(metadata) = fs::metadata(listed) else { return Ok(inside) };
    let id = (metadata.dev(), metadata.ino());
    let pattern = pattern.to_owned();
    if inside.contains(&id) {
        return Err(RecordIoError::new(directory, 0, ErrorKind::DirectoryLoop { pattern }));
    }
    if inside.len() >= GLOB_DEPTH_MAX {
        let kind = ErrorKind::TooDeep { pattern, limit: GLOB_DEPTH_MAX };
        return Err(RecordIoError::new(directory, 0, kind));
    }
    inside.push(id);
    Ok(inside)
}

/// One component of a pattern.
enum Part {
    /// Matched by name (a root, `.`, `..`, or a name without glob characters).
    Literal(PathBuf),
    /// Matched against each entry's name.
    Glob(Pattern),
    /// `**`: this directory and every directory below it.
    AnyDirectories,
}

/// Splits a pattern into its parts; consecutive `**` are one.
fn parse(pattern: &str) -> Result<Vec<Part>, RecordIoError> {
    let mut parts = Vec::new();
    for component in Path::new(pattern).components() {
        let text = match component {
            Component::Normal(name) => name.to_str(),
            _ => None,
        };
        let part = match text {
            Some("**") if matches!(parts.last(), Some(Part::AnyDirectories)) => continue,
            Some("**") => Part::AnyDirectories,
            Some(text) if text.contains(['*', '?', '[']) => {
                let glob = Pattern::new(text).map_err(|error| {
                    let reason = error.to_string();
                    let kind = ErrorKind::BadPattern { pattern: pattern.to_owned(), reason };
                    RecordIoError::new(pattern, 0, kind)
                })?;
                Part::Glob(glob)
            }
            _ => Part::Literal(PathBuf::from(component.as_os_str())),
        };
        parts.push(part);
    }
    Ok(parts)
}

/// The entries of `directory`, sorted; none if the guard skips it or it does not exist (or is
/// not a directory). Any other failure to list it is an error naming it.
fn list_directory<G: ExpandGuard>(
    directory: &Path,
    guard: &mut G,
) -> Result<Vec<PathBuf>, G::Error> {
    if !guard.visit_directory(directory)? {
        return Ok(Vec::new());
    }
    // An empty path is the working directory (a relative pattern without a base).
    let listed = if directory.as_os_str().is_empty() { Path::new(".") } else { directory };
    let io_error = |error| RecordIoError::new(directory, 0, ErrorKind::Io(error));
    let entries = match fs::read_dir(listed) {
        Ok(entries) => entries,
        Err(error) if is_absent(&error) => return Ok(Vec::new()),
        Err(error) => return Err(io_error(error).into()),
    };
    let mut paths = Vec::new();
    for entry in entries {
        let path = directory.join(entry.map_err(io_error)?.file_name());
        guard.visit_entry(&path)?;
        paths.push(path);
    }
    paths.sort();
    Ok(paths)
}

/// Whether listing failed only because there is no such directory.
fn is_absent(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory)
}

/// Whether the entry's name matches: `*` and `?` match a leading dot too, as in `glob::glob`.
fn matches(glob: &Pattern, entry: &Path) -> bool {
    let name = entry.file_name().and_then(|name| name.to_str());
    name.is_some_and(|name| glob.matches_with(name, MatchOptions::new()))
}

/// A directory, or a symbolic link to one (followed, as `glob::glob` follows them).
fn is_directory(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|metadata| metadata.is_dir())
}

/// The directory holding `path` (the empty path for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().unwrap_or(Path::new(""))
}
