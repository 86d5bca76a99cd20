//! `DurableFile`: a file that appears whole or not at all. It is written under a temporary
//! name, flushed and fsynced, renamed into place, and the directory fsynced, so a crash at any
//! point leaves either the old state or the new file, never a torn one. A file dropped before
//! it is committed (a write that failed: a full disk) removes its temporary file, so failed
//! attempts do not keep the space they took; temporary files a crash left behind are removed
//! with [`remove_temp_files`].
//!
//! A write replaces only a regular file (or nothing): a symbolic link, a device, a fifo or a
//! directory under the final name is refused naming the path ([`check_target`]), and the
//! temporary file is created exclusively, so a link planted under its name is not followed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The suffix of a file still being written.
pub const TEMP_SUFFIX: &str = ".tmp";
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// A file being written; [`DurableFile::commit`] makes it durable under its final name.
#[derive(Debug)]
pub struct DurableFile {
    dir: PathBuf,
    path: PathBuf,
    temp: PathBuf,
    /// `None` once [`DurableFile::commit`] or [`DurableFile::commit_new`] took it.
    writer: Option<BufWriter<File>>,
    /// Whether the temporary file is gone (renamed, linked or removed by a commit).
    committed: bool,
}

impl DurableFile {
    /// Starts `<dir>/<name>` (written as `<name>.tmp` until committed).
    pub fn create(dir: &Path, name: &str) -> io::Result<Self> {
        Self::create_as(dir, name, name)
    }

    /// Starts `<dir>/<name>`, written as `<temp_stem>.tmp` until committed (a stem of a
    /// writer's own where several may write `name` at once).
    pub fn create_as(dir: &Path, name: &str, temp_stem: &str) -> io::Result<Self> {
        let path = dir.join(name);
        check_target(&path)?;
        let temp = dir.join(format!("{temp_stem}{TEMP_SUFFIX}"));
        // What a crash left under the temporary name (or someone planted there) goes first.
        match fs::remove_file(&temp) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => {
                return Err(io::Error::new(error.kind(), format!("{}: {error}", temp.display())))
            }
            _ => {}
        }
        let file = OpenOptions::new().write(true).create_new(true).open(&temp)?;
        let writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
        let writer = Some(writer);
        Ok(Self { dir: dir.to_path_buf(), path, temp, writer, committed: false })
    }

    /// Where the file lands once committed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes, fsyncs, renames into place and fsyncs the directory.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        self.sync_temp()?;
        // Checked again: something may have appeared under the name while this was written.
        check_target(&self.path)?;
        fs::rename(&self.temp, &self.path)?;
        self.committed = true;
        File::open(&self.dir)?.sync_all()?;
        Ok(self.path.clone())
    }

    /// Flushes the buffer and fsyncs the temporary file, closing it.
    fn sync_temp(&mut self) -> io::Result<()> {
        let writer = self.writer.take().ok_or_else(closed)?;
        let file = writer.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()
    }

    fn writer(&mut self) -> io::Result<&mut BufWriter<File>> {
        self.writer.as_mut().ok_or_else(closed)
    }
}

impl DurableFile {
    /// Like [`DurableFile::commit`], but never replaces a file already under the final name:
    /// that fails with `AlreadyExists` and removes the temporary file. The final name is a
    /// hard link made while the name is free (`link` fails if it is taken; `rename` would
    /// replace it), then the temporary name goes.
    pub fn commit_new(mut self) -> io::Result<PathBuf> {
        self.sync_temp()?;
        // A failed link leaves the temporary file to `drop`, which removes it.
        fs::hard_link(&self.temp, &self.path)?;
        fs::remove_file(&self.temp)?;
        self.committed = true;
        File::open(&self.dir)?.sync_all()?;
        Ok(self.path.clone())
    }
}

impl Drop for DurableFile {
    /// An uncommitted file's temporary file goes (a failed write's partial file would keep
    /// the space it took, on a disk that is likely full).
    fn drop(&mut self) {
        if !self.committed {
            drop(self.writer.take());
            let _ = fs::remove_file(&self.temp);
        }
    }
}

fn closed() -> io::Error {
    io::Error::other("the durable file was already committed")
}

impl Write for DurableFile {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.writer()?.write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer()?.write_all(bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer()?.flush()
    }
}

/// Refuses a write to `path` when something other than a regular file is there: a symbolic
/// link, a device, a fifo, a socket or a directory would be replaced by the written file (or,
/// opened, written through). The error names the path and what is there.
pub fn check_target(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let file_type = match fs::symlink_metadata(path) {
        Ok(metadata) => metadata.file_type(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(io::Error::new(error.kind(), format!("{}: {error}", path.display())))
        }
    };
    let what = match () {
        _ if file_type.is_file() => return Ok(()),
        _ if file_type.is_symlink() => "a symbolic link",
        _ if file_type.is_dir() => "a directory",
        _ if file_type.is_fifo() => "a fifo",
        _ if file_type.is_char_device() || file_type.is_block_device() => "a device",
        _ if file_type.is_socket() => "a socket",
        _ => "not a regular file",
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {what} is there; refused to replace it with a regular file", path.display()),
    ))
}

/// Writes `bytes` durably as `<dir>/<name>`.
pub fn write_durably(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    let mut file = DurableFile::create(dir, name)?;
    file.write_all(bytes)?;
    file.commit()
}

/// Removes the temporary files (`<prefix>*.tmp`) a crash mid-write left in `dir`.
pub fn remove_temp_files(dir: &Path, prefix: &str) -> io::Result<Vec<PathBuf>> {
    remove_stale_temp_files(dir, prefix, Duration::ZERO)
}

/// Removes the temporary files (`<prefix>*.tmp`) in `dir` that nobody has written to for
/// `idle`: in a directory other processes write to as well, a younger one may be another
/// writer's file in progress.
pub fn remove_stale_temp_files(
    dir: &Path,
    prefix: &str,
    idle: Duration,
) -> io::Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let now = SystemTime::now();
    for item in fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name();
        let name = name.to_string_lossy();
        let written = item.metadata().and_then(|metadata| metadata.modified());
        // A file that vanished meanwhile, or whose time is in the future, is not stale.
        let stale =
            written.is_ok_and(|written| now.duration_since(written).is_ok_and(|age| age >= idle));
        if name.starts_with(prefix) && name.ends_with(TEMP_SUFFIX) && stale {
            let path = dir.join(name.as_ref());
            match fs::remove_file(&path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => removed.push(path),
            }
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_committed_file_appears_and_leftovers_are_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut file = DurableFile::create(dir.path(), "a.bin").expect("create");
        file.write_all(b"half").expect("write");
        assert!(!dir.path().join("a.bin").exists(), "not visible before commit");
        // A crash mid-write: the process dies and nothing runs.
        std::mem::forget(file);
        let removed = remove_temp_files(dir.path(), "a").expect("clean");
        assert_eq!(removed, vec![dir.path().join("a.bin.tmp")]);
        let path = write_durably(dir.path(), "a.bin", b"whole").expect("write");
        assert_eq!(fs::read(path).expect("read"), b"whole");
        assert!(remove_temp_files(dir.path(), "a").expect("clean").is_empty());
    }

    /// A file dropped before its commit (its write failed) leaves nothing behind; a commit
    /// that could not take its name (`commit_new`) neither.
    #[test]
    fn an_uncommitted_file_takes_its_temporary_file_with_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut file = DurableFile::create(dir.path(), "a.bin").expect("create");
        file.write_all(b"half").expect("write");
        drop(file);
        assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 0);
        write_durably(dir.path(), "a.bin", b"first").expect("write");
        let mut second = DurableFile::create(dir.path(), "a.bin").expect("create");
        second.write_all(b"second").expect("write");
        let taken = second.commit_new().expect_err("the name is taken");
        assert_eq!(taken.kind(), io::ErrorKind::AlreadyExists);
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .map(|item| item.file_name())
            .collect();
        assert_eq!(names, ["a.bin"]);
        assert_eq!(fs::read(dir.path().join("a.bin")).expect("read"), b"first");
    }

    /// Writes through `DurableFile` into `<dir>/target` after `prepare` made it; `None`
    /// when the write succeeds, else the error's text.
    fn write_over(prepare: impl Fn(&Path)) -> Option<String> {
        let dir = tempfile::tempdir().expect("temp dir");
        let target = dir.path().join("target");
        prepare(&target);
        let write = || -> io::Result<()> {
            let mut file = DurableFile::create(dir.path(), "target")?;
            file.write_all(b"records")?;
            file.commit().map(drop)
        };
        write().err().map(|error| error.to_string())
    }

    /// Only nothing or a regular file is replaced: a symbolic link (even to a regular file),
    /// a directory, a fifo or a device under the name is refused naming the path and what
    /// is there, and left as it was.
    #[test]
    fn only_regular_files_are_replaced() {
        let check = |what: &str, prepare: &dyn Fn(&Path), expected: Option<&str>| {
            let outcome = write_over(prepare);
            match (&outcome, expected) {
                (None, None) => {}
                (Some(error), Some(expected)) => assert!(
                    error.contains("target: ") && error.contains(expected),
                    "{what}: {error}"
                ),
                _ => panic!("{what}: {outcome:?}, expected {expected:?}"),
            }
        };
        check("nothing", &|_| {}, None);
        check("a file", &|path| fs::write(path, b"old").expect("write"), None);
        let link = |path: &Path| {
            let aimed = path.with_file_name("aimed");
            fs::write(&aimed, b"kept").expect("write");
            std::os::unix::fs::symlink(aimed, path).expect("symlink");
        };
        check("a symbolic link", &link, Some("a symbolic link is there"));
        check(
            "a dangling link",
            &|path| std::os::unix::fs::symlink("/nonexistent", path).expect("symlink"),
            Some("a symbolic link is there"),
        );
        check("a directory", &|path| fs::create_dir(path).expect("dir"), Some("a directory"));
        check("a fifo", &|path| mkfifo(path), Some("a fifo is there"));
        let error = check_target(Path::new("/dev/null")).expect_err("a device");
        assert!(error.to_string().contains("/dev/null: a device is there"), "{error}");
    }

    /// A temporary name taken by a symbolic link (planted, or a crash's leftover) is not
    /// followed: the link goes, the file it aimed at is untouched.
    #[test]
    fn a_link_under_the_temporary_name_is_not_followed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let aimed = dir.path().join("aimed");
        fs::write(&aimed, b"kept").expect("write");
        std::os::unix::fs::symlink(&aimed, dir.path().join("a.bin.tmp")).expect("symlink");
        write_durably(dir.path(), "a.bin", b"new").expect("write");
        assert_eq!(fs::read(&aimed).expect("read"), b"kept");
        assert_eq!(fs::read(dir.path().join("a.bin")).expect("read"), b"new");
    }

    /// Makes a fifo at `path` with mkfifo(1) (storage links no libc crate).
    fn mkfifo(path: &Path) {
        let made = std::process::Command::new("mkfifo").arg(path).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo {}", path.display());
    }

    /// A temporary file written to recently (another writer's, in a shared directory) is
    /// kept; one idle for longer than the bound is removed.
    #[test]
    fn only_idle_temp_files_are_stale() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut file = DurableFile::create(dir.path(), "a.bin").expect("create");
        file.write_all(b"in progress").expect("write");
        file.flush().expect("flush");
        let idle = Duration::from_secs(600);
        assert!(remove_stale_temp_files(dir.path(), "a", idle).expect("clean").is_empty());
        let removed = remove_stale_temp_files(dir.path(), "a", Duration::ZERO).expect("clean");
        assert_eq!(removed, vec![dir.path().join("a.bin.tmp")]);
    }
}
