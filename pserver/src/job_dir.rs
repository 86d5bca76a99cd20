//! Where a pserver keeps its job's checkpoints: a directory of its own per job incarnation
//! inside `--checkpoint-dir`, named by the incarnation id the masters gave the job (never
//! reused, not even for a later job of the same name) with the job's name after it for
//! people to read. Checkpoint files are named by slot, step and generation, and generations
//! are counted per job, so two jobs sharing one directory would name the same files and prune
//! each other's; a name (or a hash of it) is not an identity: a job submitted again under a
//! used name, or two names whose hashes collide, would share one.

use std::path::{Path, PathBuf};

use crate::placement::fnv1a;

/// The most characters of a job's name kept in its directory's name.
const NAME_CHARS_KEPT: usize = 40;

/// The directory of the checkpoints of job incarnation `job_id` (named `job`) under `root`.
/// Masters of before incarnation ids send 0: then the name and its hash, as they named it.
pub fn job_checkpoint_dir(root: &Path, job_id: u64, job: &str) -> PathBuf {
    let readable: String = job
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(NAME_CHARS_KEPT)
        .collect();
    match (job_id, job.is_empty()) {
        (0, true) => root.to_path_buf(),
        (0, false) => root.join(format!("job-{readable}-{:016x}", fnv1a(job.as_bytes()))),
        (id, _) if readable.is_empty() => root.join(format!("job-{id}")),
        (id, _) => root.join(format!("job-{id}-{readable}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each incarnation has a directory of its own, whatever its name: a name used again, two
    /// names that read alike, a hostile name all get distinct, filesystem-safe directories.
    #[test]
    fn each_job_incarnation_has_a_directory_of_its_own() {
        let root = Path::new("/ckpt");
        let mnist = job_checkpoint_dir(root, 3, "mnist");
        assert_eq!(mnist, root.join("job-3-mnist"));
        assert_ne!(job_checkpoint_dir(root, 4, "mnist"), mnist, "the name used again");
        assert_ne!(job_checkpoint_dir(root, 5, "a/b"), job_checkpoint_dir(root, 6, "ab"));
        assert_eq!(job_checkpoint_dir(root, 7, ""), root.join("job-7"), "the unnamed job");
        let hostile = job_checkpoint_dir(root, 8, "../../etc/x y");
        assert_eq!(hostile.parent(), Some(root), "{hostile:?}");
        assert!(!hostile.to_string_lossy().contains(".."), "{hostile:?}");
        assert_eq!(job_checkpoint_dir(root, 0, ""), root, "an older master's only job");
    }
}
