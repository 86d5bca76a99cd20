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
    check(|bytes| bytes.truncate(bytes.len() - 4), "outside the");
    check(|bytes| bytes.extend_from_slice(&[0; 4]), "bytes after the last tensor");
    check(|bytes| replace(bytes, "\"F32\"", "\"F16\""), "is not F32");
    check(|bytes| bytes[9] = b'!', "not a JSON object");
    check(|bytes| replace(bytes, "\"mlp\"", "\"xyz\""), "unknown model");
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
