//! The `raftrain` binary: parses flags, sets up logging and the panic hook, and hands each
//! subcommand to the code that implements it. No logic of its own lives here.

mod bench;
mod certs;
mod demo;
mod eval_command;
mod exit_code;
mod job;
mod logging;
mod master_command;
mod member_command;
mod process_group;
mod pserver_command;
mod quiet_votes;
mod recordio;
mod rendezvous_command;
mod runtime_args;
mod shutdown;
mod snapshot;
mod status;
mod trainer_command;

use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's allocator: pservers and trainers allocate and free multi-MB
/// payload buffers on every push and pull, and glibc returns each to the kernel (mmap/munmap),
/// so every buffer was page-faulted in again (`bench pserver`, perf: page faults and memset
/// dominated).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// raftrain: fault-tolerant, elastic data-parallel training without an external etcd.
#[derive(Debug, Parser)]
#[command(name = "raftrain", version, propagate_version = true)]
struct Cli {
    /// How log lines (standard error) are written: text, or one JSON object per line.
    #[arg(long, global = true, env = "RAFTRAIN_LOG_FORMAT", value_enum, default_value = "text")]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The whole system in one command: a dataset, 3 masters, pservers and trainers on this
    /// machine, faults injected while they train, and the result against a single process.
    Demo(demo::DemoArgs),
    /// Run one replica of the master group (Raft + the task queue), until SIGINT or SIGTERM.
    Master(master_command::MasterArgs),
    /// Run one parameter server: claim a slot through the masters, serve its shard of the
    /// model, checkpoint it; exits when the slot is lost (status 3).
    Pserver(pserver_command::PServerArgs),
    /// Run one trainer: take tasks from the masters, train on them, push to the pservers;
    /// exits 0 when the job finishes, 2 on a configuration error, 75 when the masters or a
    /// pserver stayed out of reach past --master-wait-s or --pserver-wait-s.
    Trainer(trainer_command::TrainerArgs),
    /// Evaluate a saved model (safetensors) on a dataset, without a cluster.
    Eval(eval_command::EvalArgs),
    /// Show the cluster and a job's state (or a summary of every job), asked of any
    /// reachable master.
    Status(status::StatusArgs),
    /// Submit, list and cancel the group's jobs; record and restore a job's progress.
    Job(job::JobArgs),
    /// The master group's members: list them, add, promote and remove one (joint consensus).
    Member(member_command::MemberArgs),
    /// Backups of the master group: save the whole state online, check a saved file, seed a
    /// new group's members from it.
    Snapshot(snapshot::SnapshotArgs),
    /// List and delete the torchrun rendezvous runs the group holds (--rdzv-backend=raftrain).
    Rendezvous(rendezvous_command::RendezvousArgs),
    /// Write, read, index, convert and inspect RecordIO datasets (PaddlePaddle-compatible).
    Recordio(recordio::RecordioArgs),
    /// Write a throwaway CA, one certificate and key, and a cluster token, for a test or
    /// demo cluster's --tls-cert, --tls-key, --tls-ca and --token-file.
    Certs(certs::CertsArgs),
    /// Benchmark programs: fixed workloads that print a table against a same-run baseline.
    Bench(bench::BenchArgs),
}

impl Command {
    /// The process's role in the logs, and its name within the role when the flags give one.
    fn identity(&self) -> logging::ProcessIdentity {
        let (role, id) = match self {
            Command::Demo(_) => ("demo", None),
            Command::Master(args) => ("master", Some(args.id())),
            Command::Pserver(args) => ("pserver", Some(args.id())),
            Command::Trainer(args) => ("trainer", args.id()),
            Command::Eval(_) => ("eval", None),
            Command::Status(_) => ("status", None),
            Command::Job(_) => ("job", None),
            Command::Member(_) => ("member", None),
            Command::Snapshot(_) => ("snapshot", None),
            Command::Rendezvous(_) => ("rendezvous", None),
            Command::Recordio(_) => ("recordio", None),
            Command::Certs(_) => ("certs", None),
            Command::Bench(_) => ("bench", None),
        };
        logging::ProcessIdentity { role, id }
    }

    /// Whether the command is a server that stops gracefully on SIGTERM or Ctrl-C
    /// (`shutdown::server_shutdown`).
    fn stops_on_signal(&self) -> bool {
        matches!(self, Command::Master(_) | Command::Pserver(_) | Command::Trainer(_))
    }
}

fn main() {
    let cli = Cli::parse();
    logging::init(cli.log_format, &cli.command.identity());
    // A server holds its shutdown signals until it listens for them (`shutdown.rs`), and asks
    // for its parent's death as a SIGTERM only then; any other command at once (for them
    // SIGTERM keeps its default action: the process ends). Before any thread starts.
    if cli.command.stops_on_signal() {
        shutdown::hold_signals();
    } else {
        process_group::exit_with_parent();
    }
    let result = match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Master(args) => master_command::run(args),
        Command::Pserver(args) => pserver_command::run(args),
        Command::Trainer(args) => trainer_command::run(args),
        Command::Eval(args) => eval_command::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Job(args) => job::run(&args),
        Command::Member(args) => member_command::run(&args),
        Command::Snapshot(args) => snapshot::run(&args),
        Command::Rendezvous(args) => rendezvous_command::run(&args),
        Command::Recordio(args) => recordio::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Certs(args) => certs::run(&args),
    };
    if let Err(error) = result {
        eprintln!("error: {error:#}");
        std::process::exit(exit_code::exit_status(&error));
    }
}
