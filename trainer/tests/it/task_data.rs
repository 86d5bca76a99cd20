//! A task's chunks are checked against what the master recorded, and bad records are refused
//! naming the file, the chunk and the record.

use client::{ChunkRef, Fault};
use proto::example::Example;
use proto::Message as _;
use storage::recordio::{FileIndex, Writer, WriterOptions};
use trainer::model::{ModelConfig, ModelKind};
use trainer::task_data::{read_shuffled_task, read_task};

const MODEL: ModelConfig =
    ModelConfig { kind: ModelKind::Softmax, features: 2, classes: 3, hidden: 1 };

/// A file of `examples`, two per chunk; the task naming all its chunks.
fn dataset(dir: &std::path::Path, examples: &[Example]) -> (std::path::PathBuf, Vec<ChunkRef>) {
    let path = dir.join("data.recordio");
    let mut bytes = Vec::new();
    let mut writer =
        Writer::new(&mut bytes, WriterOptions { max_chunk_bytes: 20, ..WriterOptions::default() });
    for example in examples {
        writer.write_record(&example.encode_to_vec()).expect("write");
    }
    writer.finish().expect("finish");
    std::fs::write(&path, bytes).expect("save");
    let index = FileIndex::build(&path).expect("index");
    let chunks = index
        .chunks()
        .iter()
        .map(|meta| ChunkRef {
            path: path.display().to_string(),
            offset: meta.offset,
            compressed_size: meta.compressed_size,
            record_count: meta.record_count,
        })
        .collect();
    (path, chunks)
}

fn example(dense: Vec<f32>, label: f32) -> Example {
    Example { dense, label, ..Example::default() }
}

#[test]
fn good_records_make_batches() {
    let temp = tempfile::tempdir().expect("temp");
    let examples: Vec<Example> =
        (0..7).map(|i| example(vec![i as f32, 1.0], (i % 3) as f32)).collect();
    let (_, chunks) = dataset(temp.path(), &examples);
    assert!(chunks.len() > 1, "several chunks");
    let batches = read_task(&MODEL, &chunks, 3).expect("read");
    assert_eq!(batches.iter().map(|batch| batch.len()).collect::<Vec<_>>(), vec![3, 3, 1]);
}

/// A shuffled job's task is read whole, in `client::shuffle::sample_order`'s order of its
/// records (what the Python package reads too), cut into the same batch sizes.
#[test]
fn a_shuffled_task_reads_its_records_in_the_seeded_order() {
    let temp = tempfile::tempdir().expect("temp");
    let examples: Vec<Example> = (0..7).map(|i| example(vec![i as f32, 1.0], 0.0)).collect();
    let (_, chunks) = dataset(temp.path(), &examples);
    let batches = read_shuffled_task(&MODEL, &chunks, 3, (9, 1, 4)).expect("read");
    assert_eq!(batches.iter().map(|batch| batch.len()).collect::<Vec<_>>(), vec![3, 3, 1]);
    let plain = read_task(&MODEL, &chunks, 7).expect("read");
    let order = client::shuffle::sample_order(9, 1, 4, 7).expect("small");
    let shuffled = read_shuffled_task(&MODEL, &chunks, 7, (9, 1, 4)).expect("read");
    let first_feature = |batch: &trainer::batch::Batch, row: usize| match &batch.inputs {
        trainer::batch::Inputs::Dense(dense) => dense[[row, 0]],
        other => panic!("dense inputs, not {other:?}"),
    };
    let read: Vec<f32> = (0..7).map(|row| first_feature(&shuffled[0], row)).collect();
    let expected: Vec<f32> =
        order.iter().map(|offset| first_feature(&plain[0], *offset as usize)).collect();
    assert_eq!(read, expected);
    assert_ne!(read, (0..7).map(|i| i as f32).collect::<Vec<_>>(), "shuffled");
}

#[test]
fn bad_data_is_refused_naming_where() {
    let temp = tempfile::tempdir().expect("temp");
    let examples =
        vec![example(vec![1.0, 2.0], 0.0), example(vec![1.0, 2.0], 1.0), example(vec![1.0], 2.0)];
    let (path, chunks) = dataset(temp.path(), &examples);
    let error = read_task(&MODEL, &chunks, 8).expect_err("refused").to_string();
    assert!(
        error.contains("record 0 of the chunk at byte")
            && error.contains("dense has 1 features, the model expects 2"),
        "{error}"
    );
    assert!(error.contains(&path.display().to_string()), "{error}");

    let bad_label = vec![example(vec![1.0, 2.0], 3.0)];
    let (_, chunks) = dataset(temp.path(), &bad_label);
    let error = read_task(&MODEL, &chunks, 8).expect_err("refused").to_string();
    assert!(error.contains("label 3 is not a class in 0..3"), "{error}");

    let fine = vec![example(vec![1.0, 2.0], 0.0)];
    let (_, mut chunks) = dataset(temp.path(), &fine);
    chunks[0].record_count += 1;
    let error = read_task(&MODEL, &chunks, 8).expect_err("refused").to_string();
    assert!(error.contains("record count"), "a file changed since the master indexed it: {error}");
}

/// Bytes this trainer cannot reach are its own fault (`Local`); bytes that are there but wrong
/// are the data's (`Content`): a truncated or missing file, or a header that no longer matches
/// the master's record, against a flipped payload byte or a record wrong in itself; a record
/// beyond this trainer's model is its own too.
#[test]
fn read_errors_say_whose_fault_they_are() {
    let temp = tempfile::tempdir().expect("temp");
    let examples: Vec<Example> = (0..4).map(|i| example(vec![i as f32, 1.0], 0.0)).collect();
    let (path, chunks) = dataset(temp.path(), &examples);
    let original = std::fs::read(&path).expect("read");
    let last = chunks.last().expect("a chunk").clone();
    let payload_end = (last.offset + 20 + u64::from(last.compressed_size)) as usize;
    // (name, the file's bytes, a change to the task's chunk records, the fault)
    let cases: [ReadCase; 5] = [
        ("truncated header", original[..10].to_vec(), |_| {}, Fault::Local),
        ("truncated payload", original[..payload_end - 1].to_vec(), |_| {}, Fault::Local),
        (
            "size differs from the record",
            original.clone(),
            |chunk| chunk.record_count += 1,
            Fault::Local,
        ),
        ("flipped payload byte", flip(&original, payload_end - 1), |_| {}, Fault::Content),
        ("missing file", Vec::new(), |chunk| chunk.path.push_str(".gone"), Fault::Local),
    ];
    for (name, bytes, change, want) in cases {
        std::fs::write(&path, &bytes).expect("write");
        let mut task = vec![last.clone()];
        change(&mut task[0]);
        let error = read_task(&MODEL, &task, 8).expect_err(name);
        assert_eq!(error.fault(), want, "{name}: {error}");
    }
    // Records wrong in themselves are the data's; records beyond the model (another feature
    // count, a label at or above its classes) are this trainer's: its model does not fit.
    let records = [
        ("a NaN feature", example(vec![f32::NAN, 1.0], 0.0), Fault::Content),
        ("a negative label", example(vec![1.0, 1.0], -1.0), Fault::Content),
        ("a fractional label", example(vec![1.0, 1.0], 1.5), Fault::Content),
        ("one feature for a model of two", example(vec![1.0], 0.0), Fault::Local),
        ("label 3 for a model of 3 classes", example(vec![1.0, 1.0], 3.0), Fault::Local),
    ];
    for (name, record, want) in records {
        let (_, chunks) = dataset(temp.path(), &[record]);
        let error = read_task(&MODEL, &chunks, 8).expect_err(name);
        assert_eq!(error.fault(), want, "{name}: {error}");
        assert_eq!(error.is_model_mismatch(), want == Fault::Local, "{name}: {error}");
    }
}

/// A case of `read_errors_say_whose_fault_they_are`.
type ReadCase = (&'static str, Vec<u8>, fn(&mut ChunkRef), Fault);

fn flip(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut flipped = bytes.to_vec();
    flipped[at] ^= 0xff;
    flipped
}
