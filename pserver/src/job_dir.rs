//! Where a pserver keeps its job's checkpoints: `--checkpoint-dir` itself for the group's only
//! job (no `--job`, as before jobs had names), and a directory of its own per named job inside
//! it. Checkpoint files are named by slot, step and generation, and generations are counted per
//! job, so two jobs' pservers sharing one directory (one shared volume for every job) would
//! otherwise name the same files and prune each other's.

use std::path::{Path, PathBuf};

use crate::placement::fnv1a;

/// The most characters of a job's name kept in its directory's name (the rest is the hash).
const NAME_CHARS_KEPT: usize = 40;

/// The directory of job `job`'s checkpoints under `root`.
pub fn job_checkpoint_dir(root: &Path, job: &str) -> PathBuf {
    if job.is_empty() {
        return root.to_path_buf();
    }
    // Readable where the name allows it, unique by the hash of the whole name.
    let readable: String = job
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(NAME_CHARS_KEPT)
        .collect();
    root.join(format!("job-{readable}-{:016x}", fnv1a(job.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only job keeps the directory; named jobs get distinct, filesystem-safe ones.
    #[test]
    fn each_named_job_has_a_directory_of_its_own() {
        let root = Path::new("/ckpt");
        assert_eq!(job_checkpoint_dir(root, ""), root);
        let mnist = job_checkpoint_dir(root, "mnist");
        assert!(mnist.starts_with(root) && mnist.to_string_lossy().contains("job-mnist-"));
        let hostile = job_checkpoint_dir(root, "../../etc/x y");
        assert_eq!(hostile.parent(), Some(root), "{hostile:?}");
        assert!(!hostile.to_string_lossy().contains(".."), "{hostile:?}");
        assert_ne!(job_checkpoint_dir(root, "a/b"), job_checkpoint_dir(root, "ab"));
    }
}
