//! Turning the file arguments of a dataset (paths and globs) into the list of files to read.

use std::path::{Path, PathBuf};

use super::{ErrorKind, RecordIoError};

/// Expands each pattern, in the order given, into the files it names: an existing file is
/// taken as is (even if its name contains glob characters); anything else is a glob whose
/// matching files come in sorted order. Directories are skipped. A pattern that names no file
/// is an error naming the pattern.
pub fn expand_patterns(patterns: &[String]) -> Result<Vec<PathBuf>, RecordIoError> {
    let mut paths = Vec::new();
    for pattern in patterns {
        let matched = expand_pattern(pattern)?;
        if matched.is_empty() {
            let kind = ErrorKind::NoMatch { pattern: pattern.clone() };
            return Err(RecordIoError::new(pattern, 0, kind));
        }
        paths.extend(matched);
    }
    Ok(paths)
}

/// The files one pattern names, sorted.
fn expand_pattern(pattern: &str) -> Result<Vec<PathBuf>, RecordIoError> {
    if Path::new(pattern).is_file() {
        return Ok(vec![PathBuf::from(pattern)]);
    }
    let entries = glob::glob(pattern).map_err(|error| {
        let kind = ErrorKind::BadPattern { pattern: pattern.to_owned(), reason: error.to_string() };
        RecordIoError::new(pattern, 0, kind)
    })?;
    let mut matched = Vec::new();
    for entry in entries {
        let path = entry.map_err(|error| {
            let path = error.path().to_owned();
            RecordIoError::new(path, 0, ErrorKind::Io(error.into()))
        })?;
        if path.is_file() {
            matched.push(path);
        }
    }
    matched.sort();
    Ok(matched)
}
