//! Dropping a file's pages from the page cache, so that the next read comes from the disk (as
//! a dataset larger than memory, or a checkpoint read after a reboot, would).

use std::path::Path;

use anyhow::Context as _;

/// Syncs the file at `path` (so its pages are clean) and drops them with
/// `posix_fadvise(DONTNEED)`, which needs no privilege; the kernel keeps pages another process
/// maps.
pub(crate) fn evict(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    file.sync_all().with_context(|| format!("fsync {}", path.display()))?;
    nix::fcntl::posix_fadvise(&file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED)
        .with_context(|| format!("posix_fadvise(DONTNEED) {}", path.display()))?;
    Ok(())
}
