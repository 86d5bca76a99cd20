//! `raftrain status` against real masters: each member's own progress (asked of one master, the
//! others it knows too); without a quorum the members' own views, marked not linearizable; exit
//! code 3 when no master answers.

use crate::command::raftrain;
use crate::master_group::MasterGroup;

fn status_json(group: &MasterGroup) -> (bool, Option<i32>, serde_json::Value) {
    status_json_of(&group.addrs.join(","))
}

/// `raftrain status --json` asked of `masters` (comma-separated).
fn status_json_of(masters: &str) -> (bool, Option<i32>, serde_json::Value) {
    let output = raftrain(&["status", "--masters", masters, "--json", "--timeout-ms", "1500"], b"");
    let value = serde_json::from_slice(&output.stdout).unwrap_or(serde_json::Value::Null);
    (output.success, output.code, value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_members_and_survives_a_lost_quorum() {
    let mut group = MasterGroup::start(3, &[]);
    let leader = group.leader_index().await;
    let (ok, _, healthy) = status_json(&group);
    assert!(ok && healthy["linearizable"] == true, "{healthy}");
    let members = healthy["members"].as_array().expect("members");
    assert_eq!(members.len(), 3);
    assert!(
        members.iter().all(|member| member["reachable"] == true
            && member["last_applied_index"].as_u64() >= Some(1)),
        "{healthy}"
    );
    // Asked of one follower alone, status asks the members it learns of too: none of the
    // healthy ones shows as unreachable.
    let (ok, _, one_asked) = status_json_of(&group.addrs[(leader + 1) % 3]);
    let members = one_asked["members"].as_array().expect("members");
    assert!(ok && members.len() == 3, "{one_asked}");
    assert!(members.iter().all(|member| member["reachable"] == true), "{one_asked}");

    tracing::info!("--- two of three gone: no quorum, the survivor's own view");
    let survivor = (leader + 1) % 3;
    for index in (0..3).filter(|&index| index != survivor) {
        group.kill(index);
    }
    let (ok, _, degraded) = status_json(&group);
    assert!(ok, "status still answers: {degraded}");
    assert_eq!(degraded["linearizable"], false, "{degraded}");
    let reachable: Vec<_> = degraded["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter(|member| member["reachable"] == true)
        .collect();
    assert_eq!(reachable.len(), 1, "{degraded}");

    tracing::info!("--- none left: a distinct exit code");
    group.kill(survivor);
    let (ok, code, _) = status_json(&group);
    assert!(!ok && code == Some(3), "exit code {code:?}");
}

/// A trainer name with ESC, an OSC title sequence, CR, NUL, a newline and a bidi override
/// reaches the operator's terminal escaped: `raftrain status` prints no raw control
/// character and no forged line, while `--json` keeps the name exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_text_escapes_control_characters_in_names() {
    let group = MasterGroup::start(1, &[]);
    group.leader_index().await;
    let hostile = "x\u{1b}[2J\u{1b}]0;owned\u{7}\r\0\ntrainer 9 forged\u{202e}";
    group.client().register_trainer(hostile).await.expect("the name is within the limits");
    let masters = group.addrs.join(",");
    let text = raftrain(&["status", "--masters", &masters, "--timeout-ms", "5000"], b"");
    assert!(text.success, "{}", text.stderr);
    let text = String::from_utf8(text.stdout).expect("status prints UTF-8");
    let raw = |c: char| (c.is_control() && c != '\n') || c == '\u{202e}';
    assert!(!text.chars().any(raw), "{text:?}");
    assert!(!text.lines().any(|line| line.starts_with("trainer 9")), "{text}");
    assert!(text.contains(r"x\x1b[2J\x1b]0;owned\x07\r\0\ntrainer 9 forged\u{202e}"), "{text}");
    let (_, _, json) = status_json(&group);
    assert_eq!(json["trainers"][0]["name"], serde_json::json!(hostile), "{json}");
}
