//! The manifests in `deploy/kubernetes/` stay hardened and their NetworkPolicies open exactly
//! what the processes use: every pod unprivileged, bounded and on the workspace's image tag;
//! each role's policy admitting the callers its peers' flags name, on the ports it listens on,
//! and letting it call only what its own flags name; everything else denied. Where the
//! validators `deploy/kubernetes/validate` runs are installed, the API schemas and checkov
//! accept the files too.

use std::collections::BTreeSet;
use std::process::Command;

use serde_yaml::Value;

use crate::manifests::{
    container_ports, containers, documents, kind, pod_template, port_of, raftrain_flags, words,
    workspace,
};

/// The label every pod and NetworkPolicy selector names a role by.
const ROLE_LABEL: &str = "app.kubernetes.io/name";

/// A caller the policy admits from anywhere (a rule without `from`), such as Prometheus.
const ANYWHERE: &str = "*";

/// Documents with a pod template: StatefulSets and Jobs.
fn workloads(documents: &[(String, Value)]) -> Vec<(&str, &Value)> {
    documents
        .iter()
        .filter(|(_, document)| pod_template(document)["spec"].is_mapping())
        .map(|(file, document)| (file.as_str(), document))
        .collect()
}

fn role(workload: &Value) -> String {
    let labels = &pod_template(workload)["metadata"]["labels"];
    labels[ROLE_LABEL].as_str().expect("pods carry their role label").to_string()
}

#[test]
fn every_pod_runs_unprivileged_and_bounded_on_the_workspace_image() {
    let image = format!("raftrain:{}", env!("CARGO_PKG_VERSION"));
    let documents = documents();
    let workloads = workloads(&documents);
    assert!(workloads.len() >= 4, "masters, pservers, trainers and the submit Job");
    for (file, workload) in workloads {
        let pod = &pod_template(workload)["spec"];
        assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false), "{file}: token");
        let security = &pod["securityContext"];
        assert_eq!(security["seccompProfile"]["type"].as_str(), Some("RuntimeDefault"), "{file}");
        assert_eq!(security["runAsNonRoot"].as_bool(), Some(true), "{file}: runAsNonRoot");
        for id in ["runAsUser", "runAsGroup"] {
            assert!(security[id].as_u64().is_some_and(|id| id > 0), "{file}: numeric {id}");
        }
        for container in containers(workload) {
            assert_eq!(container["image"].as_str(), Some(image.as_str()), "{file}: image tag");
            let security = &container["securityContext"];
            assert_eq!(security["readOnlyRootFilesystem"].as_bool(), Some(true), "{file}");
            assert_eq!(security["allowPrivilegeEscalation"].as_bool(), Some(false), "{file}");
            let dropped = security["capabilities"]["drop"].as_sequence();
            assert_eq!(dropped.map(Vec::as_slice), Some(&[Value::from("ALL")][..]), "{file}");
            for bound in ["requests", "limits"] {
                for resource in ["cpu", "memory"] {
                    let set = !container["resources"][bound][resource].is_null();
                    assert!(set, "{file}: no {resource} in {bound}");
                }
            }
        }
    }
}

/// The flags whose value lists masters to call.
const MASTER_LISTS: [&str; 3] = ["--masters", "--peers", "--join"];

/// Who calls whom on which port, read from the flags: a process with `--masters`, `--peers`
/// or `--join` calls the masters on that port, a trainer calls the pservers on their `--listen` port.
fn calls(documents: &[(String, Value)]) -> BTreeSet<(String, String, u64)> {
    let workloads = workloads(documents);
    let serving = |subcommand: &str| {
        workloads.iter().find_map(|(_, workload)| {
            let (found, flags) = raftrain_flags(&words(containers(workload)[0]))?;
            (found == subcommand).then(|| (role(workload), port_of(&flags["--listen"])))
        })
    };
    let (masters, _) = serving("master").expect("a master StatefulSet");
    let (pservers, pserver_port) = serving("pserver").expect("a pserver StatefulSet");
    let mut calls = BTreeSet::new();
    for (file, workload) in &workloads {
        let caller = role(workload);
        for container in containers(workload) {
            let words = words(container);
            let (subcommand, _) = raftrain_flags(&words).expect("runs raftrain");
            // Anywhere in a script: a master's --peers or --join may be set before `raftrain`.
            let lists = words.windows(2).filter(|pair| MASTER_LISTS.contains(&pair[0].as_str()));
            for address in lists.flat_map(|pair| pair[1].split(',')) {
                calls.insert((caller.clone(), masters.clone(), port_of(address)));
            }
            if subcommand == "trainer" {
                calls.insert((caller.clone(), pservers.clone(), pserver_port));
            }
            assert!(calls.iter().any(|(from, ..)| *from == caller), "{file}: calls nothing");
        }
    }
    calls
}

/// The (peer, port) pairs a policy's ingress `from` or egress `to` rules allow.
fn allowed(rules: &Value, peers: &str) -> BTreeSet<(String, u64)> {
    let mut allowed = BTreeSet::new();
    for rule in rules.as_sequence().into_iter().flatten() {
        let ports: Vec<u64> = rule["ports"]
            .as_sequence()
            .into_iter()
            .flatten()
            .map(|port| {
                assert_eq!(port["protocol"].as_str(), Some("TCP"), "raftrain speaks TCP");
                port["port"].as_u64().expect("a port number")
            })
            .collect();
        assert!(!ports.is_empty(), "a rule names its ports: {rule:?}");
        let names: Vec<String> = match rule[peers].as_sequence() {
            None => vec![ANYWHERE.to_string()],
            Some(selectors) => selectors
                .iter()
                .map(|selector| {
                    let label = &selector["podSelector"]["matchLabels"][ROLE_LABEL];
                    label.as_str().expect("peers named by role").to_string()
                })
                .collect(),
        };
        for name in &names {
            allowed.extend(ports.iter().map(|port| (name.clone(), *port)));
        }
    }
    allowed
}

fn policies(documents: &[(String, Value)]) -> Vec<&Value> {
    documents
        .iter()
        .map(|(_, document)| document)
        .filter(|document| kind(document) == "NetworkPolicy")
        .collect()
}

#[test]
fn each_role_accepts_and_calls_only_what_its_flags_use() {
    let documents = documents();
    let calls = calls(&documents);
    let policies = policies(&documents);
    for (file, workload) in workloads(&documents) {
        let role = role(workload);
        let selecting: Vec<&&Value> = policies
            .iter()
            .filter(|policy| policy["spec"]["podSelector"]["matchLabels"][ROLE_LABEL] == role)
            .collect();
        assert_eq!(selecting.len(), 1, "{file}: one NetworkPolicy for {role}");
        let spec = &selecting[0]["spec"];
        let types = spec["policyTypes"].as_sequence().expect("policyTypes");
        assert!(types.contains(&"Ingress".into()) && types.contains(&"Egress".into()), "{file}");
        let container = containers(workload)[0];
        let (_, flags) = raftrain_flags(&words(container)).expect("runs raftrain");
        let mut accepts: BTreeSet<(String, u64)> = calls
            .iter()
            .filter(|(_, callee, _)| *callee == role)
            .map(|(caller, _, port)| (caller.clone(), *port))
            .collect();
        if let Some(metrics) = flags.get("--metrics-listen") {
            accepts.insert((ANYWHERE.to_string(), port_of(metrics)));
        }
        assert_eq!(allowed(&spec["ingress"], "from"), accepts, "{file}: {role} accepts");
        let opened: BTreeSet<u64> = accepts.iter().map(|(_, port)| *port).collect();
        let listening: BTreeSet<u64> = container_ports(container).into_values().collect();
        assert_eq!(opened, listening, "{file}: {role} opens exactly its container ports");
        let calls_out: BTreeSet<(String, u64)> = calls
            .iter()
            .filter(|(caller, ..)| *caller == role)
            .map(|(_, callee, port)| (callee.clone(), *port))
            .collect();
        assert_eq!(allowed(&spec["egress"], "to"), calls_out, "{file}: {role} calls");
    }
}

#[test]
fn the_namespace_denies_everything_else_but_dns() {
    let documents = documents();
    let everyone: Vec<&Value> = policies(&documents)
        .into_iter()
        .filter(|policy| policy["spec"]["podSelector"].as_mapping().is_some_and(|m| m.is_empty()))
        .collect();
    let deny = everyone
        .iter()
        .find(|policy| policy["spec"]["ingress"].is_null() && policy["spec"]["egress"].is_null())
        .expect("a default-deny NetworkPolicy for every pod");
    let types = deny["spec"]["policyTypes"].as_sequence().expect("policyTypes");
    assert_eq!(types, &[Value::from("Ingress"), Value::from("Egress")], "denies both ways");
    let widened: Vec<&&Value> =
        everyone.iter().filter(|policy| !policy["spec"]["egress"].is_null()).collect();
    assert_eq!(widened.len(), 1, "one namespace-wide allowance: DNS");
    assert!(widened[0]["spec"]["ingress"].is_null(), "admits nothing");
    let rules = widened[0]["spec"]["egress"].as_sequence().expect("egress rules");
    for rule in rules {
        for port in rule["ports"].as_sequence().expect("ports") {
            assert_eq!(port["port"].as_u64(), Some(53), "DNS only: {port:?}");
        }
    }
}

/// `deploy/kubernetes/validate` (what CI runs) passes where its tools are installed, as
/// `bash deploy/kubernetes/validate --install` installs them; elsewhere this test says so and
/// checks nothing.
#[test]
fn the_api_schemas_and_checkov_accept_the_manifests_where_installed() {
    let venv = workspace().join("target/k8s-venv");
    let tools = ["bin/kubernetes-validate", "bin/checkov"];
    if !tools.iter().all(|tool| venv.join(tool).exists()) {
        eprintln!("skipped: no validators in {}", venv.display());
        eprintln!("install them with: bash deploy/kubernetes/validate --install");
        return;
    }
    let output = Command::new("bash")
        .arg(workspace().join("deploy/kubernetes/validate"))
        .env("K8S_VENV", &venv)
        .output()
        .expect("run deploy/kubernetes/validate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("Failed checks: 0"), "{stdout}");
}
