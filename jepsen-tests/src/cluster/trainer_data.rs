//! A trainer's view of its data, broken and mended mid-run: a truncated copy of its dataset
//! bind-mounted over the file inside the trainer's own mount namespace (`nsenter --mount`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Cluster;

/// A trainer given a broken view of its data sees the first this-many-parts of the file.
const BROKEN_DATA_FRACTION: u64 = 2;

impl Cluster {
    /// Breaks running trainer `index`'s view of its data mid-run: inside its own mount
    /// namespace (it must have been added with `private_mounts`), a truncated copy of its
    /// dataset file is bind-mounted over the file, as when a mount goes bad under a running
    /// job; everyone else still sees the whole file. Returns whether it was running.
    pub fn break_trainer_data(&mut self, index: usize) -> anyhow::Result<bool> {
        if !self.is_trainer_running(index) {
            return Ok(false);
        }
        let dataset = self.trainer_dataset(index)?;
        let broken = self.truncated_copy(Path::new(&dataset))?;
        let broken = broken.display().to_string();
        self.in_trainer_mounts(index, &["mount", "--bind", &broken, &dataset])?;
        Ok(true)
    }

    /// Gives trainer `index` its real data back: unmounts the broken copy if it still runs,
    /// starts it again if it stopped (it may give up on data it cannot read).
    pub fn mend_trainer_data(&mut self, index: usize) -> anyhow::Result<()> {
        if !self.is_trainer_running(index) {
            return self.restart_trainer(index);
        }
        let dataset = self.trainer_dataset(index)?;
        self.in_trainer_mounts(index, &["umount", &dataset])
    }

    fn trainer_dataset(&self, index: usize) -> anyhow::Result<String> {
        self.trainer_datasets[index].clone().context("the trainer has a --dataset")
    }

    /// Runs `command` in trainer `index`'s mount namespace (`nsenter --mount`).
    fn in_trainer_mounts(&self, index: usize, command: &[&str]) -> anyhow::Result<()> {
        let pid = self.processes.pid(self.trainers[index]).context("the trainer runs")?;
        let output = std::process::Command::new("nsenter")
            .args(["--target", &pid.to_string(), "--mount", "--"])
            .args(command)
            .output()
            .context("run nsenter")?;
        anyhow::ensure!(
            output.status.success(),
            "nsenter {}: {}",
            command.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(())
    }

    /// `<dir>/broken/<name>`: the first 1/[`BROKEN_DATA_FRACTION`] of `dataset`, cut
    /// mid-chunk.
    fn truncated_copy(&self, dataset: &Path) -> anyhow::Result<PathBuf> {
        let broken_dir = self.dir.join("broken");
        std::fs::create_dir_all(&broken_dir)?;
        let name = dataset.file_name().context("the dataset is a file")?;
        let broken = broken_dir.join(name);
        let bytes =
            std::fs::read(dataset).with_context(|| format!("read {}", dataset.display()))?;
        let kept = bytes.len() as u64 / BROKEN_DATA_FRACTION + 7;
        let kept = usize::try_from(kept.min(bytes.len() as u64)).context("a length fits")?;
        std::fs::write(&broken, &bytes[..kept])
            .with_context(|| format!("write {}", broken.display()))?;
        Ok(broken)
    }
}
