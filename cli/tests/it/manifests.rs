//! The deployment files cannot drift from the binary: every `raftrain` command in
//! `deploy/kubernetes/` is checked against that subcommand's own `--help` (flags and
//! `RAFTRAIN_*` variables), its ports against the container ports, Services and probes, the
//! masters' `--peers` against the StatefulSet's replicas and headless Service, and every file a
//! flag names against a mounted Secret or volume. The Dockerfile must build the binary in one
//! stage and run it as a non-root user in another.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

/// The ports raftrain's processes listen on (README, Operations): clear of the Prometheus
/// exporters' 9100-9999, node_exporter's 9100 first of all.
const PORT_RANGE: std::ops::RangeInclusive<u64> = 7000..=7299;

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// Every YAML document of every file under `deploy/kubernetes`, with its file name.
pub(crate) fn documents() -> Vec<(String, Value)> {
    let dir = workspace().join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/kubernetes is readable")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "found the manifests: {files:?}");
    let mut documents = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a readable manifest");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(document)
                .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
            documents.push((path.file_name().expect("a name").to_string_lossy().into(), value));
        }
    }
    documents
}

use serde::Deserialize as _;

/// `raftrain <subcommand> --help` (a nested one as "job submit"), run once per subcommand.
fn help(subcommand: &str, cache: &mut BTreeMap<String, String>) -> String {
    cache
        .entry(subcommand.to_string())
        .or_insert_with(|| {
            let output = Command::new(env!("CARGO_BIN_EXE_raftrain"))
                .args(subcommand.split_whitespace())
                .arg("--help")
                .output()
                .expect("run raftrain --help");
            assert!(output.status.success(), "raftrain {subcommand} --help failed");
            String::from_utf8_lossy(&output.stdout).into_owned()
        })
        .clone()
}

pub(crate) fn kind(document: &Value) -> &str {
    document["kind"].as_str().unwrap_or_default()
}

pub(crate) fn name(document: &Value) -> &str {
    document["metadata"]["name"].as_str().unwrap_or_default()
}

/// A workload's pod template (a CronJob's is in its job template); null for other kinds.
pub(crate) fn pod_template(document: &Value) -> &Value {
    match kind(document) {
        "CronJob" => &document["spec"]["jobTemplate"]["spec"]["template"],
        _ => &document["spec"]["template"],
    }
}

/// A workload's containers.
pub(crate) fn containers(document: &Value) -> Vec<&Value> {
    pod_template(document)["spec"]["containers"]
        .as_sequence()
        .map(|containers| containers.iter().collect())
        .unwrap_or_default()
}

/// The words of a container's command and arguments; a `sh -c` script is split into words
/// (quotes and a command's closing `;` left out).
pub(crate) fn words(container: &Value) -> Vec<String> {
    let strings = |key: &str| -> Vec<String> {
        container[key]
            .as_sequence()
            .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    let mut all = strings("command");
    all.extend(strings("args"));
    all.iter()
        .flat_map(|word| {
            word.split_whitespace()
                .map(|part| part.trim_end_matches(';').trim_matches('"').to_string())
        })
        .collect()
}

/// The flags given to `raftrain <subcommand>` with their values (the next word); a nested
/// subcommand (`job submit`) is the two words.
pub(crate) fn raftrain_flags(words: &[String]) -> Option<(String, BTreeMap<String, String>)> {
    let start = words.iter().position(|word| word == "raftrain").map_or(0, |at| at + 1);
    let mut subcommand = words.get(start)?.clone();
    if subcommand.starts_with('-') {
        return None;
    }
    let mut first_flag = start + 1;
    if let Some(nested) = words.get(start + 1).filter(|word| !word.starts_with('-')) {
        subcommand = format!("{subcommand} {nested}");
        first_flag += 1;
    }
    let mut flags = BTreeMap::new();
    for (index, word) in words.iter().enumerate().skip(first_flag) {
        if word.starts_with("--") {
            flags.insert(word.clone(), words.get(index + 1).cloned().unwrap_or_default());
        }
    }
    Some((subcommand, flags))
}

pub(crate) fn port_of(addr: &str) -> u64 {
    addr.rsplit(':')
        .next()
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

/// Named container ports: name -> number.
pub(crate) fn container_ports(container: &Value) -> BTreeMap<String, u64> {
    container["ports"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|port| {
            let name = port["name"].as_str().unwrap_or_default().to_string();
            (name, port["containerPort"].as_u64().expect("a containerPort number"))
        })
        .collect()
}

#[test]
fn every_command_flag_and_variable_is_one_the_binary_knows() {
    let mut cache = BTreeMap::new();
    let mut checked = 0;
    for (file, document) in documents() {
        for container in containers(&document) {
            let (subcommand, flags) = raftrain_flags(&words(container))
                .unwrap_or_else(|| panic!("{file}: a container that does not run raftrain"));
            let help = help(&subcommand, &mut cache);
            for flag in flags.keys() {
                assert!(
                    help.contains(&format!("{flag} ")),
                    "{file}: raftrain {subcommand} has no {flag}"
                );
            }
            for variable in container["env"].as_sequence().into_iter().flatten() {
                let variable = variable["name"].as_str().unwrap_or_default();
                if variable.starts_with("RAFTRAIN_") {
                    assert!(
                        help.contains(&format!("[env: {variable}=")),
                        "{file}: raftrain {subcommand} reads no {variable}"
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked >= 3, "masters, pservers and trainers were checked");
}

#[test]
fn ports_probes_and_mounts_agree() {
    let documents = documents();
    for (file, document) in &documents {
        for container in containers(document) {
            let (_, flags) = raftrain_flags(&words(container)).expect("runs raftrain");
            let ports = container_ports(container);
            for (port_name, port) in &ports {
                assert!(
                    PORT_RANGE.contains(port),
                    "{file}: port {port_name} {port} is outside raftrain's {PORT_RANGE:?}"
                );
            }
            for flag in ["--listen", "--metrics-listen"] {
                if let Some(addr) = flags.get(flag) {
                    assert!(
                        ports.values().any(|port| *port == port_of(addr)),
                        "{file}: {flag} {addr} is not a containerPort"
                    );
                }
            }
            check_probes(file, container, &flags, &ports);
            check_mounts(file, document, container, &flags);
        }
        if kind(document) == "Service" {
            check_service(file, document, &documents);
        }
    }
}

/// Subcommands that run to their end and serve nothing.
const ONE_SHOT: [&str; 2] = ["job submit", "snapshot save"];

/// The gRPC service whose health tells whether each subcommand is ready, where a `grpc:`
/// probe fits (the process serves gRPC); other subcommands are probed over HTTP.
const READY_SERVICES: [(&str, &str); 2] = [
    ("master", "raftrain.master.v1.MasterService"),
    ("pserver", "raftrain.pserver.v1.PServerService"),
];

/// Probes go to the metrics port (plain: kubelet's gRPC probes cannot speak the gRPC port's
/// TLS): `grpc:` probes where the process serves gRPC, readiness asking for its service,
/// liveness for the whole server; `/readyz` and `/healthz` elsewhere.
fn check_probes(
    file: &str,
    container: &Value,
    flags: &BTreeMap<String, String>,
    ports: &BTreeMap<String, u64>,
) {
    let (subcommand, _) = raftrain_flags(&words(container)).expect("runs raftrain");
    let metrics = flags.get("--metrics-listen").map(|addr| port_of(addr));
    // A one-shot tool (`job submit`) serves nothing and is not probed.
    if ONE_SHOT.contains(&subcommand.as_str()) {
        assert!(container["readinessProbe"].is_null() && metrics.is_none(), "{file}: probed");
        return;
    }
    let ready_service = READY_SERVICES.iter().find(|(name, _)| *name == subcommand);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let probe_spec = &container[probe];
        let port = match ready_service {
            Some((_, service)) => {
                let grpc = &probe_spec["grpc"];
                let asked = grpc["service"].as_str().unwrap_or_default();
                let expected = if probe == "readinessProbe" { *service } else { "" };
                assert_eq!(asked, expected, "{file}: {probe} asks for the wrong service");
                grpc["port"].as_u64()
            }
            None => {
                let get = &probe_spec["httpGet"];
                assert_eq!(get["path"].as_str(), Some(path), "{file}: {probe}");
                get["port"]
                    .as_str()
                    .and_then(|name| ports.get(name).copied())
                    .or(get["port"].as_u64())
            }
        };
        assert_eq!(port, metrics, "{file}: {probe} is not on the metrics port");
    }
}

/// Every file a flag names lies under a mount backed by a Secret or volume of the pod.
fn check_mounts(file: &str, document: &Value, container: &Value, flags: &BTreeMap<String, String>) {
    let volumes: BTreeMap<&str, &Value> = pod_template(document)["spec"]["volumes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|volume| (volume["name"].as_str().unwrap_or_default(), volume))
        .collect();
    let claims: Vec<&str> = document["spec"]["volumeClaimTemplates"]
        .as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|claim| claim["metadata"]["name"].as_str())
        .collect();
    let mounts: Vec<(&str, &str)> = container["volumeMounts"]
        .as_sequence()
        .into_iter()
        .flatten()
        .map(|mount| {
            (
                mount["name"].as_str().unwrap_or_default(),
                mount["mountPath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    for (name, _) in &mounts {
        assert!(
            volumes.contains_key(name) || claims.contains(name),
            "{file}: mount {name} has no volume"
        );
    }
    for flag in [
        "--tls-cert",
        "--tls-key",
        "--tls-ca",
        "--token-file",
        "--data-dir",
        "--checkpoint-dir",
        "--data-root",
        "--spec",
    ] {
        let Some(path) = flags.get(flag) else { continue };
        let mount = mounts.iter().find(|(_, at)| Path::new(path).starts_with(at));
        let (volume, at) =
            mount.unwrap_or_else(|| panic!("{file}: {flag} {path} is on no mounted volume"));
        let key = path.trim_start_matches(at).trim_start_matches('/');
        if let Some(map) =
            volumes.get(volume).and_then(|volume| volume["configMap"]["name"].as_str())
        {
            assert!(
                config_map_has_key(map, key),
                "{file}: {flag} {path}: config map {map} has no key {key}"
            );
        }
        if let Some(secret) =
            volumes.get(volume).and_then(|volume| volume["secret"]["secretName"].as_str())
        {
            assert!(
                secret_has_key(secret, key),
                "{file}: {flag} {path}: secret {secret} has no key {key}"
            );
        }
    }
}

fn config_map_has_key(map: &str, key: &str) -> bool {
    documents().iter().any(|(_, document)| {
        kind(document) == "ConfigMap" && name(document) == map && !document["data"][key].is_null()
    })
}

fn secret_has_key(secret: &str, key: &str) -> bool {
    documents().iter().any(|(_, document)| {
        kind(document) == "Secret"
            && name(document) == secret
            && !document["stringData"][key].is_null()
    })
}

/// A headless Service selects a StatefulSet whose `serviceName` it is, exposes its ports, and
/// (for the masters) `--peers` names every replica by its stable DNS name.
fn check_service(file: &str, service: &Value, documents: &[(String, Value)]) {
    let set = documents
        .iter()
        .map(|(_, document)| document)
        .find(|document| {
            kind(document) == "StatefulSet"
                && document["spec"]["serviceName"].as_str() == Some(name(service))
        })
        .unwrap_or_else(|| panic!("{file}: service {} fronts no StatefulSet", name(service)));
    assert_eq!(service["spec"]["clusterIP"].as_str(), Some("None"), "{file}: headless");
    let container = containers(set)[0];
    let ports = container_ports(container);
    for port in service["spec"]["ports"].as_sequence().into_iter().flatten() {
        let target = port["targetPort"].as_str().expect("a named targetPort");
        assert_eq!(
            ports.get(target).copied(),
            port["port"].as_u64(),
            "{file}: service port {target}"
        );
    }
    let (_, flags) = raftrain_flags(&words(container)).expect("runs raftrain");
    let Some(peers) = flags.get("--peers") else { return };
    let replicas = set["spec"]["replicas"].as_u64().expect("replicas");
    let namespace = set["metadata"]["namespace"].as_str().unwrap_or("default");
    let listen = port_of(&flags["--listen"]);
    let expected: Vec<String> = (0..replicas)
        .map(|ordinal| {
            format!(
                "{}={}-{ordinal}.{}.{namespace}.svc.cluster.local:{listen}",
                ordinal + 1,
                name(set),
                name(service)
            )
        })
        .collect();
    assert_eq!(peers, &expected.join(","), "{file}: --peers must name every replica");
}

#[test]
fn the_dockerfile_builds_the_binary_and_runs_it_unprivileged() {
    let text = std::fs::read_to_string(workspace().join("Dockerfile")).expect("a Dockerfile");
    let stages = text.lines().filter(|line| line.starts_with("FROM ")).count();
    assert!(stages >= 2, "multi-stage: {stages} FROM lines");
    assert!(
        text.contains("cargo build --release --locked -p cli --bin raftrain"),
        "builds raftrain"
    );
    let user = text.lines().rfind(|line| line.starts_with("USER ")).expect("a USER line");
    assert!(!user.contains("root") && !user.contains(" 0"), "runs as non-root: {user}");
    assert!(text.contains(r#"ENTRYPOINT ["raftrain"]"#), "the binary is the entrypoint");
}

/// Trainers are an Indexed Job whose pod failure policy tells the trainer's exit statuses
/// apart (`cli/src/exit_code.rs`): 2 fails the Job, 75 is retried without counting, and each
/// trainer is named after its completion index.
#[test]
fn trainers_are_an_indexed_job_that_reads_exit_statuses() {
    let documents = documents();
    let (_, job) = documents
        .iter()
        .find(|(file, _)| file == "trainers.yaml")
        .expect("trainers.yaml has a document");
    assert_eq!((kind(job), job["apiVersion"].as_str()), ("Job", Some("batch/v1")));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    assert!(spec["completions"].as_u64() >= Some(1) && spec["parallelism"].as_u64() >= Some(1));
    assert_eq!(
        spec["template"]["spec"]["restartPolicy"].as_str(),
        Some("Never"),
        "the policy needs it"
    );
    let container = containers(job)[0];
    let rule_for = |code: u64| {
        let rules =
            spec["podFailurePolicy"]["rules"].as_sequence().expect("podFailurePolicy rules");
        rules.iter().find_map(|rule| {
            let codes = &rule["onExitCodes"];
            let listed =
                codes["values"].as_sequence()?.iter().any(|value| value.as_u64() == Some(code));
            let ours = codes["containerName"] == container["name"] && codes["operator"] == "In";
            (listed && ours).then(|| rule["action"].as_str().unwrap_or_default().to_string())
        })
    };
    assert_eq!(rule_for(2).as_deref(), Some("FailJob"), "a configuration error fails the Job");
    assert_eq!(rule_for(75).as_deref(), Some("Ignore"), "a retryable exit is retried freely");
    assert_eq!(rule_for(0), None);
    let (_, flags) = raftrain_flags(&words(container)).expect("runs raftrain");
    assert!(flags["--name"].contains("$(JOB_COMPLETION_INDEX)"), "named by index: {flags:?}");
    let declared = container["env"].as_sequence().into_iter().flatten().any(|variable| {
        variable["name"] == "JOB_COMPLETION_INDEX"
            && variable["valueFrom"]["fieldRef"]["fieldPath"]
                == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    });
    assert!(declared, "JOB_COMPLETION_INDEX comes from the Job's annotation");
}

/// `job.yaml` submits a spec the binary accepts, and the pservers and trainers join that job
/// by its name alone: the trainers take its dataset and passes from the masters, and a copy
/// of either in their flags would only be one more place to change.
#[test]
fn the_submitted_job_is_the_one_pservers_and_trainers_join() {
    let documents = documents();
    let spec_text = documents
        .iter()
        .find(|(_, document)| kind(document) == "ConfigMap" && name(document) == "raftrain-job")
        .and_then(|(_, document)| document["data"]["job.toml"].as_str().map(str::to_string))
        .expect("job.yaml holds the spec");
    let spec: toml::Table = toml::from_str(&spec_text).expect("the spec is TOML");
    let job_name = spec["name"].as_str().expect("the spec names its job").to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("job.toml");
    std::fs::write(&path, &spec_text).expect("write the spec");
    // Without masters the submit fails at connecting, after the spec was read and checked.
    let submitted = crate::command::raftrain(
        &[
            "job",
            "submit",
            "--masters",
            "127.0.0.1:1",
            "--timeout-ms",
            "200",
            "--spec",
            &path.display().to_string(),
        ],
        b"",
    );
    // Only a spec that read and checked whole gets as far as calling the masters.
    assert!(submitted.stderr.contains("SubmitJob: no master leader"), "{}", submitted.stderr);
    let mut joined = Vec::new();
    for (file, document) in &documents {
        for container in containers(document) {
            let Some((subcommand, flags)) = raftrain_flags(&words(container)) else { continue };
            if subcommand == "pserver" || subcommand == "trainer" {
                assert_eq!(flags.get("--job"), Some(&job_name), "{file}: joins another job");
                joined.push(subcommand.clone());
            }
            if subcommand == "trainer" {
                for repeated in ["--dataset", "--passes"] {
                    assert_eq!(flags.get(repeated), None, "{file}: repeats the job's {repeated}");
                }
            }
        }
    }
    joined.sort();
    assert_eq!(joined, ["pserver", "trainer"], "both join the submitted job");
}
