//! Saved models round-trip, every damaged file is refused naming what is wrong, and Python's
//! `safetensors.numpy` reads the same tensors (skipped only outside CI when the module is
//! missing; `.ci/run` installs it).

use std::collections::BTreeMap;
use std::process::Command;

use trainer::model::{ModelConfig, ModelKind};
use trainer::safetensors::read_safetensors;
use trainer::saved_model::{load, save};

fn saved(dir: &std::path::Path) -> (std::path::PathBuf, ModelConfig, BTreeMap<String, Vec<f32>>) {
    let config = ModelConfig { kind: ModelKind::Mlp, features: 5, classes: 3, hidden: 4 };
    let params = config.init(9);
    let path = dir.join("model.safetensors");
    save(&path, &config, &params).expect("saved");
    (path, config, params)
}

#[test]
fn a_saved_model_loads_back_with_its_configuration() {
    let temp = tempfile::tempdir().expect("temp");
    let (path, config, params) = saved(temp.path());
    assert_eq!(load(&path).expect("loads"), (config, params));
    let bytes = std::fs::read(&path).expect("read");
    let header = u64::from_le_bytes(bytes[..8].try_into().expect("8")) as usize;
    assert_eq!((8 + header) % 8, 0, "data starts 8-byte aligned");
}

/// Damages the saved file and expects `want` in the error.
fn check(damage: impl Fn(&mut Vec<u8>), want: &str) {
    let temp = tempfile::tempdir().expect("temp");
    let (path, _, _) = saved(temp.path());
    let mut bytes = std::fs::read(&path).expect("read");
    damage(&mut bytes);
    std::fs::write(&path, &bytes).expect("write");
    let error = format!("{:#}", load(&path).expect_err("refused"));
    assert!(error.contains(want) && error.contains("model.safetensors"), "{error} lacks {want}");
}

fn replace(bytes: &mut [u8], from: &str, to: &str) {
    assert_eq!(from.len(), to.len());
    let at =
        bytes.windows(from.len()).position(|window| window == from.as_bytes()).expect("present");
    bytes[at..at + to.len()].copy_from_slice(to.as_bytes());
}

#[test]
fn damaged_files_are_refused_naming_the_problem() {
    check(|bytes| bytes.truncate(4), "shorter than the 8-byte header length");
    check(|bytes| bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes()), "does not fit");
    check(|bytes| bytes.truncate(bytes.len() - 4), "do not cover the data section exactly");
    check(|bytes| bytes.extend_from_slice(&[0; 4]), "do not cover the data section exactly");
    check(|bytes| replace(bytes, "\"F32\"", "\"I32\""), "dtype I32 is not F32");
    check(|bytes| bytes[9] = b'!', "not a JSON object");
    check(|bytes| replace(bytes, "\"mlp\"", "\"xyz\""), "unknown model");
}

/// A file made of `header` (JSON text) and `data_bytes` zero bytes.
fn hostile(header: &str, data_bytes: usize) -> Vec<u8> {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data_bytes, 0);
    bytes
}

/// Headers written to attack the reader, not by any writer, are refused with their reason
/// and the file's name, never a panic or a huge allocation: lengths far past the file or the
/// format's limit, shapes whose size overflows, ranges that overlap or run past the data,
/// another dtype.
#[test]
fn hostile_headers_are_refused() {
    let temp = tempfile::tempdir().expect("temp");
    let path = temp.path().join("hostile.safetensors");
    let tensor = |name: &str, dtype: &str, shape: &str, offsets: &str| {
        format!(r#""{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}"#)
    };
    let mut huge_length = hostile("{}", 0);
    huge_length[..8].copy_from_slice(&(1_u64 << 40).to_le_bytes());
    let mut past_the_end = hostile("{}", 0);
    past_the_end[..8].copy_from_slice(&4096_u64.to_le_bytes());
    let overflow = tensor("w", "F32", "[4611686018427387904,4611686018427387904]", "[0,8]");
    let overlapping =
        [tensor("a", "F32", "[2]", "[0,8]"), tensor("b", "F32", "[2]", "[4,12]")].join(",");
    let past_the_data = tensor("w", "F32", "[4]", "[0,16]");
    let wrong_size = tensor("w", "F32", "[3]", "[0,8]");
    let wrong_dtype = tensor("w", "F64", "[1]", "[0,8]");
    let cases: [(Vec<u8>, &str); 8] = [
        (huge_length, "over the format's 100,000,000-byte limit"),
        (past_the_end, "past the end of the file"),
        (hostile(&format!("{{{overflow}}}"), 8), "shape overflows"),
        (hostile(&format!("{{{overlapping}}}"), 12), "tensor b: its data_offsets overlap"),
        (hostile(&format!("{{{past_the_data}}}"), 8), "do not cover the data section exactly"),
        (hostile(&format!("{{{wrong_size}}}"), 8), "not the size its shape and dtype make"),
        (hostile(&format!("{{{wrong_dtype}}}"), 8), "dtype F64 is not F32"),
        (hostile("[1,2,3]", 0), "not a JSON object of tensors"),
    ];
    for (bytes, want) in cases {
        std::fs::write(&path, &bytes).expect("write");
        let error = read_safetensors(&path).expect_err("refused").to_string();
        assert!(
            error.contains(want) && error.contains("hostile.safetensors"),
            "{error} lacks {want}"
        );
    }
}

#[test]
fn python_reads_the_same_tensors() {
    let temp = tempfile::tempdir().expect("temp");
    let (path, _, params) = saved(temp.path());
    let script = "import json,sys\nfrom safetensors.numpy import load_file\nprint(json.dumps({k: v.astype('float64').ravel().tolist() for k, v in load_file(sys.argv[1]).items()}))";
    let output = Command::new("python3").args(["-c", script, &path.display().to_string()]).output();
    let output = match output {
        Ok(output) if output.status.success() => output,
        other if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: python3 with safetensors and numpy is not installed here ({other:?}); .ci/run installs them");
            return;
        }
        other => panic!("python3 could not read the model: {other:?}"),
    };
    let read: BTreeMap<String, Vec<f64>> = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(read.len(), params.len());
    for (name, values) in &params {
        let python: Vec<f32> = read[name].iter().map(|&value| value as f32).collect();
        assert_eq!(&python, values, "{name}");
    }
    assert_eq!(read_safetensors(&path).expect("rust").params, params);
}
