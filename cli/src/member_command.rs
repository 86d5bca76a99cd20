//! `raftrain member`: the master group's membership, as `etcdctl member` gives etcd's. `list`
//! shows each member's role and how far it has the log; `add` joins a master as a learner
//! (`--promote` makes it a voter once it caught up); `promote`; `remove` (a leader removing
//! itself hands leadership off first). Each change goes through Raft's joint consensus.

use anyhow::Context as _;
use clap::{Args, Subcommand};
use client::{MasterClient, MemberChange, Membership};

use crate::job::Connection;

#[derive(Debug, Args)]
pub(crate) struct MemberArgs {
    #[command(subcommand)]
    command: MemberCommand,
}

#[derive(Debug, Subcommand)]
enum MemberCommand {
    /// List the members: id, address, voter or learner, the last log index each holds and
    /// how far it lags the leader's log.
    List {
        #[command(flatten)]
        connection: Connection,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Add the master ID at ADDR (its --listen address as others reach it, host:port) as a
    /// learner: it receives the log (or a snapshot) but does not vote. Start it first
    /// (`raftrain master --id ID --join ...` also asks for this itself). The same ID and
    /// ADDR again changes nothing; an ID or ADDR of another member is refused.
    Add {
        id: u64,
        addr: String,
        /// Then make it a voter once it caught up (as `member promote`).
        #[arg(long)]
        promote: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// Make learner ID a voter once it holds the log up to where the leader's was when asked
    /// (waits up to a minute for it to catch up).
    Promote {
        id: u64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Remove member ID, voter or learner (a dead one too, while a majority of the voters
    /// runs). A removed master stops and refuses to serve. The leader removing itself hands
    /// leadership to a caught-up member first. The last voter cannot be removed.
    Remove {
        id: u64,
        #[command(flatten)]
        connection: Connection,
    },
}

pub(crate) fn run(args: &MemberArgs) -> anyhow::Result<()> {
    let connection = match &args.command {
        MemberCommand::List { connection, .. }
        | MemberCommand::Add { connection, .. }
        | MemberCommand::Promote { connection, .. }
        | MemberCommand::Remove { connection, .. } => connection,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async { execute(&connection.client()?, &args.command).await })
}

async fn execute(client: &MasterClient, command: &MemberCommand) -> anyhow::Result<()> {
    let membership = match command {
        MemberCommand::List { json: true, .. } => {
            println!("{}", serde_json::to_string_pretty(&client.members().await?)?);
            return Ok(());
        }
        MemberCommand::List { .. } => client.members().await?,
        MemberCommand::Add { id, addr, promote, .. } => {
            client::check_master_addr(addr)
                .map_err(|error| anyhow::anyhow!("ADDR {addr:?} {error}"))
                .context(crate::exit_code::Configuration)?;
            let change = MemberChange::Add { id: *id, addr: addr.clone() };
            let added = client.change_member(&change).await?;
            match promote {
                true => client.change_member(&MemberChange::Promote { id: *id }).await?,
                false => added,
            }
        }
        MemberCommand::Promote { id, .. } => {
            client.change_member(&MemberChange::Promote { id: *id }).await?
        }
        MemberCommand::Remove { id, .. } => {
            client.change_member(&MemberChange::Remove { id: *id }).await?
        }
    };
    print!("{}", members_table(&membership));
    Ok(())
}

/// The membership as a table, one member a line, the leader marked.
pub(crate) fn members_table(membership: &Membership) -> String {
    let mut out = format!(
        "leader {} in term {}, log at {}{}\n{:>6}  {:<28} {:<8} {:>10} {:>8}\n",
        membership.leader_id,
        membership.term,
        membership.last_log_index,
        if membership.joint { " (a membership change is half done)" } else { "" },
        "id",
        "address",
        "role",
        "matched",
        "lag"
    );
    for member in &membership.members {
        let role = match (member.id == membership.leader_id, member.voter) {
            (true, _) => "leader",
            (false, true) => "voter",
            (false, false) => "learner",
        };
        let known = |value: Option<u64>| value.map_or("-".to_string(), |value| value.to_string());
        let addr = crate::status::escaped(&member.addr);
        out += &format!(
            "{:>6}  {addr:<28} {role:<8} {:>10} {:>8}\n",
            member.id,
            known(member.matched),
            known(member.lag)
        );
    }
    out
}
