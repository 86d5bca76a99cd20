//! The masters' StatefulSet scales: its start script (run here in `sh`, with `raftrain`
//! replaced by `echo`) gives the three first ordinals the same `--peers` and every later one
//! `--join` to those three with its own stable name as `--advertise` and `--leave-on-stop`
//! (scaled back down, it leaves the group), and the flags it gives are the binary's. Scaling back deletes a scaled-away member's volume, so a later scale-up
//! joins afresh.

use std::collections::BTreeMap;
use std::process::Command;

use crate::manifests::{containers, documents, kind, name, raftrain_flags};

const DOMAIN: &str = "raftrain-master.raftrain.svc.cluster.local";

/// The masters' StatefulSet.
fn masters() -> serde_yaml::Value {
    let documents = documents();
    let found = documents.into_iter().find(|(_, document)| {
        kind(document) == "StatefulSet" && name(document) == "raftrain-master"
    });
    found.expect("masters.yaml has the masters' StatefulSet").1
}

/// The words `raftrain` is started with in pod `hostname`.
fn started_with(script: &str, hostname: &str) -> Vec<String> {
    let script = script.replace("exec raftrain", "echo raftrain");
    let output = Command::new("sh")
        .args(["-c", &script])
        .env("HOSTNAME", hostname)
        .output()
        .expect("run sh");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_first_three_masters_seed_the_group_and_later_ones_join_it() {
    let masters = masters();
    let container = containers(&masters)[0];
    let script = container["args"][0].as_str().expect("a start script");
    let help = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["master", "--help"])
        .output()
        .expect("run raftrain master --help");
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let seeds: Vec<String> =
        (0..3).map(|ordinal| format!("raftrain-master-{ordinal}.{DOMAIN}:7000")).collect();
    for ordinal in 0..5 {
        let hostname = format!("raftrain-master-{ordinal}");
        let words = started_with(script, &hostname);
        let (subcommand, flags) = raftrain_flags(&words).expect("starts raftrain");
        assert_eq!(subcommand, "master");
        for flag in flags.keys() {
            let listed = [" ", "\n"].iter().any(|end| help.contains(&format!("{flag}{end}")));
            assert!(listed, "raftrain master has no {flag}");
        }
        assert_eq!(flags["--id"], (ordinal + 1).to_string(), "{words:?}");
        if ordinal < 3 {
            let peers: BTreeMap<u64, String> =
                consensus::parse_peers(&flags["--peers"]).expect("--peers parses");
            assert_eq!(peers.values().cloned().collect::<Vec<_>>(), seeds, "{words:?}");
            assert!(!flags.contains_key("--join"), "{words:?}");
            assert!(!flags.contains_key("--leave-on-stop"), "a founder stays: {words:?}");
        } else {
            assert_eq!(flags["--join"], seeds.join(","), "{words:?}");
            assert_eq!(flags["--advertise"], format!("{hostname}.{DOMAIN}:7000"), "{words:?}");
            assert!(!flags.contains_key("--peers"), "{words:?}");
            assert!(flags.contains_key("--leave-on-stop"), "a scaled pod leaves: {words:?}");
        }
    }
    let retention = &masters["spec"]["persistentVolumeClaimRetentionPolicy"];
    assert_eq!(retention["whenScaled"].as_str(), Some("Delete"), "a removed member's volume goes");
    assert_eq!(retention["whenDeleted"].as_str(), Some("Retain"), "the group's data stays");
}

#[test]
fn a_cron_job_saves_and_checks_backups_of_the_group() {
    let documents = documents();
    let (_, cron) = documents
        .iter()
        .find(|(_, document)| kind(document) == "CronJob")
        .expect("backups.yaml has a CronJob");
    let container = containers(cron)[0];
    let script = container["args"][0].as_str().expect("a backup script");
    assert!(script.contains("raftrain snapshot save \"$file\""), "{script}");
    assert!(script.contains("raftrain snapshot status \"$file\""), "{script}");
    assert_eq!(cron["spec"]["concurrencyPolicy"].as_str(), Some("Forbid"));
}
