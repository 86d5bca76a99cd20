//! `ClassNames`: text labels mapped to class ids for `recordio convert --text-labels`. Ids are
//! given in order of first appearance (0, 1, 2, ...), or taken from an earlier conversion's
//! mapping (`--classes-from`, so an evaluation split gets the training split's ids; a name it
//! does not hold is then an error). The mapping is written beside the output as
//! `<out>.classes.json`: `{"classes": ["name of class 0", "name of class 1", ...]}`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The most classes one conversion may name: every id is stored as an f32 label, exact up to
/// 2^24, and far more classes than any model here trains.
pub(crate) const CLASS_COUNT_MAX: usize = 1 << 16;
/// The longest class name, in bytes.
pub(crate) const CLASS_NAME_BYTES_MAX: usize = 1024;
/// The largest mapping file `--classes-from` reads.
const CLASSES_FILE_BYTES_MAX: u64 = 128 << 20;

/// Class names in id order, and whether new names may be added.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ClassNames {
    names: Vec<String>,
    ids: HashMap<String, usize>,
    frozen: bool,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ClassesFile {
    classes: Vec<String>,
}

impl ClassNames {
    /// The mapping an earlier conversion wrote; it admits no new name.
    pub(crate) fn read(path: &Path) -> anyhow::Result<Self> {
        let length = std::fs::metadata(path)
            .with_context(|| format!("--classes-from {}", path.display()))?
            .len();
        anyhow::ensure!(
            length <= CLASSES_FILE_BYTES_MAX,
            "--classes-from {}: {length} bytes, more than {CLASSES_FILE_BYTES_MAX}",
            path.display()
        );
        let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
        let file: ClassesFile = serde_json::from_slice(&bytes).with_context(|| {
            format!("{}: not a classes file ({{\"classes\": [names]}})", path.display())
        })?;
        let mut classes = Self::default();
        for name in file.classes {
            classes
                .id_of(&name)
                .map_err(|reason| anyhow::anyhow!("{}: {reason}", path.display()))?;
        }
        classes.frozen = true;
        Ok(classes)
    }

    /// `name`'s class id, given the next id if it is new (unless the mapping is frozen).
    pub(crate) fn id_of(&mut self, name: &str) -> Result<usize, String> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        if self.frozen {
            return Err(format!("label {name:?} is not one of the --classes-from classes"));
        }
        if name.is_empty() || name.len() > CLASS_NAME_BYTES_MAX {
            return Err(format!("a label must be 1 to {CLASS_NAME_BYTES_MAX} bytes: {name:?}"));
        }
        if self.names.len() == CLASS_COUNT_MAX {
            return Err(format!("label {name:?} would be class {CLASS_COUNT_MAX}, past the limit"));
        }
        let id = self.names.len();
        self.ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        Ok(id)
    }

    /// The JSON file's text: `{"classes": [...]}`, ids in order.
    pub(crate) fn to_json(&self) -> String {
        let file = ClassesFile { classes: self.names.clone() };
        serde_json::to_string(&file).expect("a list of strings serializes")
    }
}

/// Where the mapping of the output `out` is written: `<out>.classes.json`.
pub(crate) fn classes_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_os_string();
    name.push(".classes.json");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names get ids in order of first appearance and keep them; a frozen mapping refuses new
    /// names; empty and oversized names are refused; the file round-trips.
    #[test]
    fn ids_in_order_of_appearance() {
        let mut classes = ClassNames::default();
        let ids: Vec<usize> =
            ["cat", "dog", "cat", "bird"].iter().map(|name| classes.id_of(name).unwrap()).collect();
        assert_eq!(ids, [0, 1, 0, 2]);
        assert_eq!(classes.to_json(), r#"{"classes":["cat","dog","bird"]}"#);
        assert!(classes.id_of("").is_err());
        assert!(classes.id_of(&"x".repeat(CLASS_NAME_BYTES_MAX + 1)).is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("train.recordio.classes.json");
        std::fs::write(&path, classes.to_json()).unwrap();
        let mut read = ClassNames::read(&path).unwrap();
        assert_eq!(read.id_of("bird"), Ok(2));
        assert_eq!(
            read.id_of("fish"),
            Err("label \"fish\" is not one of the --classes-from classes".to_string())
        );
        assert_eq!(classes_path(Path::new("a/b.recordio")), Path::new("a/b.recordio.classes.json"));
    }
}
