//! `raftrain status`: asks any reachable master for the job and cluster state and prints it for
//! a person, or as one JSON object with `--json` (the contract scripts and tests rely on).

use clap::Args;
use master::client::{ClientOptions, MasterClient};
use proto::master::StatusReply;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Master addresses (any subset of the group), comma-separated.
    #[arg(long, env = "RAFTRAIN_MASTERS", value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// Print one JSON object instead of the human view.
    #[arg(long)]
    json: bool,
    /// Give up if no leader answers within this many milliseconds.
    #[arg(long, default_value_t = 5_000)]
    timeout_ms: u64,
}

pub(crate) fn run(args: &StatusArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let reply = runtime.block_on(fetch(args))?;
    if args.json {
        println!("{}", to_json(&reply));
    } else {
        print!("{}", to_text(&reply));
    }
    Ok(())
}

async fn fetch(args: &StatusArgs) -> anyhow::Result<StatusReply> {
    let options = ClientOptions {
        call_deadline: Duration::from_millis(args.timeout_ms),
        ..ClientOptions::default()
    };
    let client = MasterClient::new(&args.masters, options)?;
    Ok(client.status().await?)
}

/// The `--json` contract: every key is always present; absent values are `null`.
pub(crate) fn to_json(reply: &StatusReply) -> Value {
    let cluster = reply.cluster.clone().unwrap_or_default();
    let members: Vec<Value> = cluster
        .members
        .iter()
        .map(|member| json!({"id": member.id, "addr": member.addr, "role": member.role}))
        .collect();
    let trainers: Vec<Value> = reply
        .trainers
        .iter()
        .map(|trainer| json!({"id": trainer.id, "name": trainer.name}))
        .collect();
    let pservers: Vec<Value> = reply
        .pservers
        .iter()
        .map(|pserver| json!({"index": pserver.index, "addr": pserver.addr}))
        .collect();
    let failed_tasks: Vec<Value> = reply
        .failed_tasks
        .iter()
        .map(|task| json!({"task": task.task_id, "reason": task.reason}))
        .collect();
    let eval = reply.eval.as_ref().map_or(
        Value::Null,
        |eval| json!({"pass": eval.pass, "loss": eval.loss, "accuracy": eval.accuracy}),
    );
    json!({
        "leader": (cluster.leader_id != 0).then_some(cluster.leader_id),
        "leader_addr": (!cluster.leader_addr.is_empty()).then_some(cluster.leader_addr.clone()),
        "term": cluster.term,
        "members": members,
        "job": (!reply.job.is_empty()).then_some(reply.job.clone()),
        "pass": reply.pass,
        "passes": reply.passes,
        "todo": reply.todo,
        "pending": reply.pending,
        "done": reply.done,
        "failed": reply.failed,
        "failed_tasks": failed_tasks,
        "trainers": trainers,
        "pservers_desired": reply.pservers_desired,
        "pservers": pservers,
        "eval": eval,
        "job_finished": reply.job_finished,
    })
}

fn to_text(reply: &StatusReply) -> String {
    let cluster = reply.cluster.clone().unwrap_or_default();
    let mut out = String::new();
    let leader = match cluster.leader_id {
        0 => "none".to_string(),
        id => format!("{id} ({})", cluster.leader_addr),
    };
    out += &format!("leader {leader}, term {}\n", cluster.term);
    for member in &cluster.members {
        out += &format!("  master {} {} {}\n", member.id, member.addr, member.role);
    }
    let job = if reply.job.is_empty() { "(no dataset reported yet)" } else { &reply.job };
    out += &format!(
        "job {job}: pass {} of {}{}\n",
        reply.pass + 1,
        reply.passes.max(1),
        finished(reply)
    );
    out += &format!(
        "tasks: {} todo, {} pending, {} done, {} failed\n",
        reply.todo, reply.pending, reply.done, reply.failed
    );
    for task in &reply.failed_tasks {
        out += &format!("  failed task {}: {}\n", task.task_id, task.reason);
    }
    out += &format!("trainers: {}\n", reply.trainers.len());
    out += &format!("pservers: {} of {}\n", reply.pservers.len(), reply.pservers_desired);
    for pserver in &reply.pservers {
        out += &format!("  pserver {} {}\n", pserver.index, pserver.addr);
    }
    if let Some(eval) = &reply.eval {
        out += &format!(
            "eval after pass {}: loss {:.4}, accuracy {:.4}\n",
            eval.pass, eval.loss, eval.accuracy
        );
    }
    out
}

fn finished(reply: &StatusReply) -> &'static str {
    if reply.job_finished {
        " (job finished)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::raft::{ClusterInfoReply, Member};

    /// The JSON view has every contract key, with null for what is unknown.
    #[test]
    fn json_has_every_contract_key() {
        let empty = to_json(&StatusReply::default());
        for key in [
            "leader",
            "term",
            "members",
            "pass",
            "todo",
            "pending",
            "done",
            "failed",
            "trainers",
            "pservers",
            "eval",
            "job_finished",
        ] {
            assert!(empty.get(key).is_some(), "missing {key}");
        }
        assert_eq!(empty["leader"], Value::Null);
        assert_eq!(empty["eval"], Value::Null);
        let member = Member { id: 2, addr: "127.0.0.1:7002".into(), role: "leader".into() };
        let cluster =
            ClusterInfoReply { leader_id: 2, term: 5, members: vec![member], ..Default::default() };
        let full = to_json(&StatusReply { cluster: Some(cluster), todo: 3, ..Default::default() });
        assert_eq!(full["leader"], json!(2));
        assert_eq!(full["members"][0]["role"], json!("leader"));
        assert_eq!(full["todo"], json!(3));
    }
}
