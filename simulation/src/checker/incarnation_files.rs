//! Incarnation files: one job incarnation's checkpoint files are never another's. A pserver
//! keeps its files in the directory its claim's job id names (`pserver::job_dir`), so every
//! checkpoint path a node's state records for job #i must lie in a directory `job-i` or
//! `job-i-NAME`: a path in another incarnation's directory (a claim answered with another
//! job's id) would let one job's pserver prune or restore the other's files, and a path in no
//! incarnation's directory would share one among all jobs of that name.

use super::{NodeView, Violation};

/// Checks every slot checkpoint every node's state records.
pub fn check(nodes: &[NodeView]) -> Result<(), Violation> {
    for node in nodes {
        for (id, job) in node.state.jobs() {
            for slot in job.pservers() {
                let Some(meta) = &slot.checkpoint else { continue };
                if incarnation_of(&meta.path) != Some(id) {
                    return Err(Violation::new(
                        "incarnation files",
                        format!(
                            "node {} records slot {}'s checkpoint of job #{id} ({:?}) at {:?}, \
                             outside that incarnation's directory",
                            node.id,
                            slot.slot,
                            job.name(),
                            meta.path
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The job id of the incarnation directory (`job-ID` or `job-ID-NAME`) `path` lies in.
fn incarnation_of(path: &str) -> Option<u64> {
    path.split('/').find_map(|component| {
        let rest = component.strip_prefix("job-")?;
        let digits = rest.split('-').next()?;
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_its_incarnation() {
        assert_eq!(incarnation_of("ckpt/job-7-simulated/slot-0.ckpt"), Some(7));
        assert_eq!(incarnation_of("ckpt/job-12/slot-0.ckpt"), Some(12));
        assert_eq!(incarnation_of("ckpt/slot-0.ckpt"), None);
        assert_eq!(incarnation_of("ckpt/job-simulated-00ff/slot-0.ckpt"), None);
    }
}
