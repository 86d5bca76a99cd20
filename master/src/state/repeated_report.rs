//! Answering a repeated `ReportDataset` without scanning the files again: every trainer reports
//! the dataset when it starts, and a scan reads every chunk header, so a million-chunk dataset
//! would cost the leader a full index per trainer. A repeat whose files (in order) end exactly
//! where the accepted chunks say they end, under the same job, passes and policy, gets the
//! accepted answer; anything else takes the full path (scan, then the state's own comparison).
//! Pure: the caller lists the files and their sizes.

use storage::recordio::HEADER_BYTES;

use super::chunk_list::ChunkList;
use super::dataset::{Dataset, DatasetKind, QueuePolicy};

/// A file a report names, after glob expansion, with its size in bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportedFile {
    pub path: String,
    pub bytes: u64,
}

/// What the accepted dataset holds, for the reply to a repeated report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceptedReport {
    pub task_count: u64,
    pub chunk_count: u64,
    pub record_count: u64,
}

/// The accepted answer if a report of `files` repeats `dataset`'s spec, as far as sizes tell.
pub(crate) fn repeated_report(
    dataset: &Dataset,
    job: &str,
    passes: u32,
    policy: &QueuePolicy,
    files: &[ReportedFile],
) -> Option<AcceptedReport> {
    // An index dataset is no repeat of any RecordIO report: the full path refuses it.
    let DatasetKind::RecordIo { chunks, .. } = &dataset.kind else { return None };
    let same_spec = dataset.job == job && dataset.passes == passes && dataset.policy == *policy;
    if !same_spec || !files_end_where_chunks_end(chunks, files) {
        return None;
    }
    Some(AcceptedReport {
        task_count: dataset.task_count(),
        chunk_count: chunks.len() as u64,
        record_count: chunks.record_count(),
    })
}

/// The same files in the same order, each with chunks back to back from offset 0 to its end.
fn files_end_where_chunks_end(chunks: &ChunkList, files: &[ReportedFile]) -> bool {
    let mut chunks = chunks.iter().peekable();
    for file in files {
        let mut end = 0u64;
        let mut any = false;
        while let Some((_, chunk)) = chunks.next_if(|(path, _)| *path == file.path) {
            if chunk.offset != end {
                return false;
            }
            end = chunk.offset + HEADER_BYTES as u64 + u64::from(chunk.compressed_size);
            any = true;
        }
        if !any || end != file.bytes {
            return false;
        }
    }
    chunks.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ChunkRef;

    fn chunk(path: &str, offset: u64, compressed_size: u32) -> ChunkRef {
        ChunkRef { path: path.to_string(), offset, compressed_size, record_count: 10 }
    }

    fn file(path: &str, bytes: u64) -> ReportedFile {
        ReportedFile { path: path.to_string(), bytes }
    }

    fn policy() -> QueuePolicy {
        QueuePolicy {
            chunks_per_task: 1,
            task_timeout_min_ms: 1000,
            timeout_factor: 3,
            max_task_failures: 2,
            retry_failed_next_pass: false,
        }
    }

    fn dataset() -> Dataset {
        let chunks = [chunk("a", 0, 80), chunk("a", 100, 30), chunk("b", 0, 5)];
        Dataset::recordio("job", ChunkList::from_refs(&chunks), 2, policy())
            .expect("a valid dataset")
    }

    /// The same files, ending where their chunks end, under the same spec: the accepted answer.
    #[test]
    fn same_files_and_spec_repeat_the_answer() {
        let files = [file("a", 150), file("b", 25)];
        let answer = repeated_report(&dataset(), "job", 2, &policy(), &files);
        let expected = AcceptedReport { task_count: 3, chunk_count: 3, record_count: 30 };
        assert_eq!(answer, Some(expected));
    }

    /// Anything that differs takes the full path.
    #[test]
    fn any_difference_takes_the_full_path() {
        let other_policy = QueuePolicy { max_task_failures: 99, ..policy() };
        let policy = policy();
        let good = [file("a", 150), file("b", 25)];
        let cases: [(&str, u32, &QueuePolicy, Vec<ReportedFile>); 8] = [
            ("other", 2, &policy, good.to_vec()),
            ("job", 3, &policy, good.to_vec()),
            ("job", 2, &other_policy, good.to_vec()),
            ("job", 2, &policy, vec![file("a", 151), file("b", 25)]),
            ("job", 2, &policy, vec![file("b", 25), file("a", 150)]),
            ("job", 2, &policy, vec![file("a", 150)]),
            ("job", 2, &policy, vec![file("a", 150), file("b", 25), file("c", 0)]),
            ("job", 2, &policy, vec![file("a", 150), file("c", 25)]),
        ];
        for (job, passes, policy, files) in cases {
            let answer = repeated_report(&dataset(), job, passes, policy, &files);
            assert_eq!(answer, None, "{job} {passes} {policy:?} {files:?}");
        }
    }

    /// A gap between chunks (bytes no header accounts for) is not a repeat.
    #[test]
    fn chunks_must_be_back_to_back() {
        let chunks = [chunk("a", 0, 80), chunk("a", 120, 10)];
        let gapped =
            Dataset::recordio("job", ChunkList::from_refs(&chunks), 1, policy()).expect("valid");
        let files = [file("a", 150)];
        assert_eq!(repeated_report(&gapped, "job", 1, &policy(), &files), None);
    }

    /// A RecordIO report is no repeat of an index dataset: it takes the full path (where the
    /// state refuses it, naming both kinds).
    #[test]
    fn an_index_dataset_is_never_repeated_by_files() {
        let index = Dataset::index_range("job", 150, 50, 2, policy()).expect("a valid dataset");
        let files = [file("a", 150)];
        assert_eq!(repeated_report(&index, "job", 2, &policy(), &files), None);
    }
}
