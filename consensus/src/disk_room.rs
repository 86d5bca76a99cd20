//! Room on the disk before the Raft log is opened. sled 0.34 writes while it opens a log (it
//! recovers its segments and writes a new snapshot of its page table); run out of room there
//! and the log can be left unreadable for good ("Read corrupted data" at the next open, found
//! by restarting a master on a full disk as a supervisor would, then freeing the disk). So a
//! node refuses to open its log on a disk without [`LOG_OPEN_FREE_BYTES_MIN`] free, saying
//! what to do, and touches nothing. (A disk that fills while the node runs fails a write or a
//! flush: the Raft core stops, the server exits, and the log opens again once there is room.)

use std::path::Path;

use nix::sys::statvfs::statvfs;

/// The free space a node needs to open its log: sled's segment (512 KiB) and page-table
/// snapshot many times over, and a state snapshot's room.
pub const LOG_OPEN_FREE_BYTES_MIN: u64 = 64 * 1024 * 1024;

/// `Ok` if the disk that holds `dir` (or its nearest existing ancestor, for a directory not
/// made yet) has at least `min_bytes` free for this user; else why not, with the figures.
pub fn check_room(dir: &Path, min_bytes: u64) -> Result<(), String> {
    let existing = dir.ancestors().find(|path| path.exists()).unwrap_or(Path::new("."));
    let stats = statvfs(existing).map_err(|error| {
        format!("cannot read the free space of {}: {error}", existing.display())
    })?;
    let free = stats.blocks_available().saturating_mul(stats.fragment_size());
    if free >= min_bytes {
        return Ok(());
    }
    Err(format!(
        "the disk holding it has {} free, under the {} a node needs to open its log safely \
         (sled can leave a log unreadable when it runs out of room while opening it); free \
         space on that disk and start again",
        mib(free),
        mib(min_bytes)
    ))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A disk is checked against the floor it is given: none is refused for nothing, none has
    /// the whole address space free; the refusal gives the figures and the remedy.
    #[test]
    fn room_is_measured_on_the_disk_that_holds_the_directory() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let not_yet_made = dir.path().join("node-1").join("sled");
        assert_eq!(check_room(&not_yet_made, 0), Ok(()));
        let refused = check_room(&not_yet_made, u64::MAX).expect_err("no disk has 16 EiB free");
        assert!(refused.contains("MiB free, under the"), "{refused}");
        assert!(refused.contains("free space on that disk"), "{refused}");
    }
}
