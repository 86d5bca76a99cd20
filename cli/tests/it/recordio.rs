//! `raftrain recordio`: write, cat, index, stat and convert, through the real binary.

use crate::command::{raftrain, raftrain_ok};

fn path_text(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// `write` of hex lines and `cat --hex` copy a file record for record, for every compressor,
/// and small chunks produce the expected chunk table.
#[test]
fn write_then_cat_round_trips_for_every_compressor() {
    let dir = tempfile::tempdir().unwrap();
    let input = "00\n\n48656c6c6f\nffee\n0102030405060708\n";
    for compressor in ["none", "snappy", "gzip"] {
        let file = path_text(&dir.path().join(format!("{compressor}.recordio")));
        let args = [
            "recordio",
            "write",
            "--out",
            &file,
            "--compressor",
            compressor,
            "--max-chunk-bytes",
            "8",
        ];
        raftrain_ok(&args, input.as_bytes());
        assert_eq!(raftrain_ok(&["recordio", "cat", "--hex", &file], b""), input, "{compressor}");
        let index = raftrain_ok(&["recordio", "index", &file], b"");
        let chunk_lines: Vec<&str> = index.lines().skip(1).collect();
        assert!(chunk_lines.len() >= 3, "{compressor}: chunks of at most 8 bytes:\n{index}");
        assert!(chunk_lines.iter().all(|line| line.ends_with(compressor)), "{index}");
        let stat = raftrain_ok(&["recordio", "stat", &file], b"");
        assert!(stat.lines().last().unwrap().contains(" 5 "), "five records in total:\n{stat}");
    }
}

/// `write --text` takes lines as they are and plain `cat` prints them back; globs expand in
/// sorted order.
#[test]
fn text_records_and_globs() {
    let dir = tempfile::tempdir().unwrap();
    let first = path_text(&dir.path().join("a.recordio"));
    let second = path_text(&dir.path().join("b.recordio"));
    raftrain_ok(&["recordio", "write", "--text", "--out", &first], b"hello\nworld\n");
    raftrain_ok(&["recordio", "write", "--text", "--out", &second], b"again\n");
    let pattern = path_text(&dir.path().join("*.recordio"));
    assert_eq!(raftrain_ok(&["recordio", "cat", &pattern], b""), "hello\nworld\nagain\n");
}

/// A bad hex line fails with its line number and leaves no output file behind.
#[test]
fn bad_hex_line_names_the_line_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.recordio");
    let output = raftrain(&["recordio", "write", "--out", &path_text(&file)], b"00\nzz\n");
    assert!(!output.success);
    assert!(output.stderr.contains("line 2"), "{}", output.stderr);
    assert!(!file.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no temporary file is left");
}

/// A corrupt file is reported with the file name and the byte offset, with a non-zero exit.
#[test]
fn corrupt_file_names_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.recordio");
    let name = path_text(&file);
    raftrain_ok(&["recordio", "write", "--out", &name, "--max-chunk-bytes", "1"], b"0102\n0304\n");
    let mut bytes = std::fs::read(&file).unwrap();
    let second_chunk = bytes.len() / 2; // two chunks of one record each
    bytes[second_chunk] ^= 0xff; // the second chunk's magic
    std::fs::write(&file, bytes).unwrap();
    for command in ["cat", "index", "stat"] {
        let output = raftrain(&["recordio", command, &name], b"");
        assert!(!output.success, "{command}");
        assert!(output.stderr.contains(&name), "{command}: {}", output.stderr);
        assert!(
            output.stderr.contains(&format!("byte {second_chunk}")),
            "{command}: {}",
            output.stderr
        );
    }
    let missing =
        raftrain(&["recordio", "cat", &path_text(&dir.path().join("none-*.recordio"))], b"");
    assert!(!missing.success && missing.stderr.contains("none-*"), "{}", missing.stderr);
}

/// CSV converts into Examples (label last or chosen), LibSVM into sparse Examples.
#[test]
fn convert_csv_and_libsvm() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "x,y,label\n1,2,0\n3.5,4,1\n\n").unwrap();
    let out = path_text(&dir.path().join("csv.recordio"));
    raftrain_ok(
        &["recordio", "convert", "--from", "csv", "--skip-header", &path_text(&csv), "--out", &out],
        b"",
    );
    assert_eq!(
        raftrain_ok(&["recordio", "cat", "--example", &out], b""),
        "{\"dense\":[1.0,2.0],\"label\":0.0,\"sparse_index\":[],\"sparse_value\":[]}\n\
         {\"dense\":[3.5,4.0],\"label\":1.0,\"sparse_index\":[],\"sparse_value\":[]}\n"
    );
    let args = ["recordio", "convert", "--from", "csv", "--label-column", "1", "-", "--out", &out];
    raftrain_ok(&args, b"9,1,2\n");
    let line = raftrain_ok(&["recordio", "cat", "--example", &out], b"");
    assert!(line.starts_with("{\"dense\":[1.0,2.0],\"label\":9.0"), "{line}");
    raftrain_ok(&["recordio", "convert", "--from", "libsvm", "-", "--out", &out], b"1 2:0.5 7:1\n");
    let line = raftrain_ok(&["recordio", "cat", "--example", &out], b"");
    assert!(line.contains("\"sparse_index\":[2,7],\"sparse_value\":[0.5,1.0]"), "{line}");
}

/// A malformed line fails the conversion with file and line number, and leaves no output.
#[test]
fn convert_malformed_line_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("in.csv");
    std::fs::write(&csv, "1,2\n3,oops\n").unwrap();
    let out = dir.path().join("out.recordio");
    let args =
        ["recordio", "convert", "--from", "csv", &path_text(&csv), "--out", &path_text(&out)];
    let output = raftrain(&args, b"");
    assert!(!output.success);
    assert!(output.stderr.contains("in.csv:2: column 2"), "{}", output.stderr);
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the input remains");
}

/// Input that would store a non-finite number or mix row shapes is refused with file, line
/// and column, and leaves no output: LibSVM `nan`/`inf` in a label or a value (CSV already
/// refused them), and a CSV row with more or fewer columns than the first.
#[test]
fn convert_refuses_non_finite_libsvm_and_ragged_csv() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.recordio");
    let cases: [(&str, &str, &str, &str); 5] = [
        ("libsvm", "a.svm", "1 2:0.5\n1 3:nan\n", "a.svm:2: column 2"),
        ("libsvm", "b.svm", "1 2:0.5\ninf 3:1\n", "b.svm:2: column 1"),
        ("libsvm", "c.svm", "1 2:-inf 4:1\n", "c.svm:1: column 2"),
        ("csv", "d.csv", "1,2,3\n4,5,6\n7,8,9,10\n", "d.csv:3: column 4"),
        ("csv", "e.csv", "1,2,3\n4,5\n", "e.csv:2: column 3"),
    ];
    for (format, name, text, expected) in cases {
        let input = dir.path().join(name);
        std::fs::write(&input, text).unwrap();
        let args = [
            "recordio",
            "convert",
            "--from",
            format,
            &path_text(&input),
            "--out",
            &path_text(&out),
        ];
        let output = raftrain(&args, b"");
        assert!(!output.success, "{name} converted");
        assert!(output.stderr.contains(expected), "{name}: {}", output.stderr);
        assert!(!out.exists(), "{name} left output");
    }
}

/// A spreadsheet's export converts as written: a byte-order mark, CRLF line ends, a header,
/// quoted fields, and text labels mapped to class ids with the mapping written beside the
/// output; an evaluation split reuses that mapping, and a label outside it fails the
/// conversion naming file, line and column, leaving neither file behind.
#[test]
fn convert_csv_with_text_labels_writes_the_class_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let train = dir.path().join("train.csv");
    let text = "\u{feff}\"width\",\"height\",species\r\n1.5,\"2\",setosa\r\n3,4,\"virginica, tall\"\r\n5,6,setosa\r\n";
    std::fs::write(&train, text).unwrap();
    let out = dir.path().join("train.recordio");
    let args = ["recordio", "convert", "--from", "csv", "--header", "--text-labels"];
    let paths = [&path_text(&train), "--out", &path_text(&out)];
    let all: Vec<&str> = args.iter().chain(paths.iter()).copied().collect();
    raftrain_ok(&all, b"");
    let labels: Vec<String> = raftrain_ok(&["recordio", "cat", "--example", &path_text(&out)], b"")
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["label"].to_string())
        .collect();
    assert_eq!(labels, ["0.0", "1.0", "0.0"]);
    let classes = dir.path().join("train.recordio.classes.json");
    let mapping: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&classes).unwrap()).unwrap();
    assert_eq!(mapping, serde_json::json!({"classes": ["setosa", "virginica, tall"]}));

    let eval = dir.path().join("eval.csv");
    std::fs::write(&eval, "width,height,species\n1,2,virginica, tall\n").unwrap();
    let eval_out = dir.path().join("eval.recordio");
    let classes_from = path_text(&classes);
    let args =
        ["recordio", "convert", "--from", "csv", "--header", "--classes-from", &classes_from];
    let paths = [&path_text(&eval), "--out", &path_text(&eval_out)];
    let all: Vec<&str> = args.iter().chain(paths.iter()).copied().collect();
    let output = raftrain(&all, b"");
    assert!(!output.success, "an unquoted comma makes a fourth column");
    assert!(output.stderr.contains("eval.csv:2: column 4"), "{}", output.stderr);
    std::fs::write(&eval, "width,height,species\n1,2,\"virginica, tall\"\n3,4,rosa\n").unwrap();
    let output = raftrain(&all, b"");
    assert!(!output.success);
    let expected = "eval.csv:3: column 3 (\"species\"): label \"rosa\" is not one of the --classes-from classes";
    assert!(output.stderr.contains(expected), "{}", output.stderr);
    assert!(!eval_out.exists() && !dir.path().join("eval.recordio.classes.json").exists());
}
