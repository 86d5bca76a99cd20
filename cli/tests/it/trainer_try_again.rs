//! A real `raftrain trainer` that the masters tell "try again later" (every session for
//! strangers in use) keeps asking, at the pace the master asks for, instead of exiting: a
//! fake master that leads, and refuses every registration that way.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use proto::master::master_service_server::{MasterService, MasterServiceServer};
use proto::master::*;
use proto::raft::{ClusterInfoReply, ClusterInfoRequest};
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};

use crate::training::synth;

/// Registrations the trainer must have retried before the test believes it keeps trying.
const REGISTRATIONS_MIN: u64 = 3;
/// What the fake master asks the trainer to wait between asks.
const RETRY_AFTER_MS: u64 = 1_000;

/// A master that says it leads, and answers every registration "try again later".
struct FakeMaster {
    addr: String,
    registrations: Arc<AtomicU64>,
}

/// The fake master's service: the listed calls are UNIMPLEMENTED, the block's are written
/// out (one `async_trait` impl, so the generated methods are rewritten like the written ones).
macro_rules! fake_master_service {
    ($($name:ident($request:ty) -> $reply:ty;)* { $($answered:tt)* }) => {
        #[tonic::async_trait]
        impl MasterService for FakeMaster {
            $(
                async fn $name(&self, _: Request<$request>) -> Result<Response<$reply>, Status> {
                    Err(Status::unimplemented(concat!("the fake does not answer ", stringify!($name))))
                }
            )*
            $($answered)*
        }
    };
}

fake_master_service! {
    report_index_dataset(ReportIndexDatasetRequest) -> ReportDatasetReply;
    heartbeat(HeartbeatRequest) -> HeartbeatReply;
    get_task(GetTaskRequest) -> GetTaskReply;
    get_tasks(GetTasksRequest) -> GetTasksReply;
    task_finished(TaskFinishedRequest) -> TaskReportReply;
    task_failed(TaskFailedRequest) -> TaskReportReply;
    claim_p_server_slot(ClaimPServerSlotRequest) -> ClaimPServerSlotReply;
    p_server_heartbeat(PServerHeartbeatRequest) -> PServerHeartbeatReply;
    list_p_servers(ListPServersRequest) -> ListPServersReply;
    record_checkpoint(RecordCheckpointRequest) -> RecordCheckpointReply;
    record_eval(RecordEvalRequest) -> RecordEvalReply;
    submit_job(SubmitJobRequest) -> ReportDatasetReply;
    list_jobs(ListJobsRequest) -> ListJobsReply;
    cancel_job(CancelJobRequest) -> CancelJobReply;
    members(MembersRequest) -> MembersReply;
    change_member(ChangeMemberRequest) -> MembersReply;
    checkpoint_job(CheckpointJobRequest) -> CheckpointJobReply;
    restore_job(RestoreJobRequest) -> RestoreJobReply;
    report_reloaded(ReportReloadedRequest) -> ReportReloadedReply;
    release_p_server_slot(ReleasePServerSlotRequest) -> ReleasePServerSlotReply;
    leave_job(LeaveJobRequest) -> LeaveJobReply;
    task_progress(TaskProgressRequest) -> TaskProgressReply;
    rendezvous_write(RendezvousWriteRequest) -> RendezvousWriteReply;
    rendezvous_read(RendezvousReadRequest) -> RendezvousReadReply;
    list_rendezvous(ListRendezvousRequest) -> ListRendezvousReply;
    delete_rendezvous(DeleteRendezvousRequest) -> DeleteRendezvousReply;
    {
        // The trainer asks whether its job was submitted: no job yet.
        async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
            Ok(Response::new(StatusReply::default()))
        }

        // The trainer reports its dataset then (that submits its job): accepted.
        async fn report_dataset(
            &self,
            _: Request<ReportDatasetRequest>,
        ) -> Result<Response<ReportDatasetReply>, Status> {
            Ok(Response::new(ReportDatasetReply { task_count: 1, chunk_count: 1, record_count: 1 }))
        }

        type WatchPServersStream =
            tonic::codegen::tokio_stream::Empty<Result<ListPServersReply, Status>>;

        async fn watch_p_servers(
            &self,
            _: Request<ListPServersRequest>,
        ) -> Result<Response<Self::WatchPServersStream>, Status> {
            Err(Status::unimplemented("the fake does not answer watch_p_servers"))
        }

        type GetTaskStreamStream =
            tonic::codegen::tokio_stream::Empty<Result<GetTaskAnswer, Status>>;

        async fn get_task_stream(
            &self,
            _: Request<tonic::Streaming<GetTaskRequest>>,
        ) -> Result<Response<Self::GetTaskStreamStream>, Status> {
            Err(Status::unimplemented("the fake does not answer get_task_stream"))
        }

        type SaveSnapshotStream =
            tonic::codegen::tokio_stream::Empty<Result<proto::master::SnapshotChunk, Status>>;

        async fn save_snapshot(
            &self,
            _: Request<proto::master::SaveSnapshotRequest>,
        ) -> Result<Response<Self::SaveSnapshotStream>, Status> {
            Err(Status::unimplemented("the fake does not answer save_snapshot"))
        }

        async fn register_trainer(
            &self,
            _: Request<RegisterTrainerRequest>,
        ) -> Result<Response<RegisterTrainerReply>, Status> {
            self.registrations.fetch_add(1, Ordering::SeqCst);
            let mut status = Status::resource_exhausted(
                "RegisterTrainer: too many clients; nothing changed, try again in 1 s",
            );
            let metadata = status.metadata_mut();
            metadata.insert("x-raftrain-refusal", MetadataValue::from_static("try-again-later"));
            metadata.insert("x-raftrain-retry-after-ms", MetadataValue::from(RETRY_AFTER_MS));
            Err(status)
        }

        async fn cluster_info(
            &self,
            _: Request<ClusterInfoRequest>,
        ) -> Result<Response<ClusterInfoReply>, Status> {
            Ok(Response::new(ClusterInfoReply {
                node_id: 1,
                leader_id: 1,
                leader_addr: self.addr.clone(),
                term: 1,
                ..ClusterInfoReply::default()
            }))
        }
    }
}

/// Serves a fake master on a loopback port; its address and its count of registrations.
async fn fake_master() -> (String, Arc<AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let addr = listener.local_addr().expect("a bound address").to_string();
    let registrations = Arc::new(AtomicU64::new(0));
    let fake = FakeMaster { addr: addr.clone(), registrations: registrations.clone() };
    let server = tonic::transport::Server::builder()
        .add_service(MasterServiceServer::new(fake))
        .serve_with_incoming(platform::incoming(listener, &platform::PortLimits::default()));
    tokio::spawn(server);
    (addr, registrations)
}

/// A `raftrain trainer` process, killed when dropped; it logs to `log`.
struct Trainer {
    child: Child,
    log: PathBuf,
}

impl Trainer {
    fn spawn(masters: &str, dataset: &str, log: PathBuf) -> Self {
        let log_file = std::fs::File::create(&log).expect("create the log");
        let child = Command::new(env!("CARGO_BIN_EXE_raftrain"))
            .args(["trainer", "--masters", masters, "--dataset", dataset])
            .args(["--model", "softmax", "--classes", "3"])
            .env("RAFTRAIN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start raftrain trainer");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its exit status, if it exited.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll the trainer")
    }
}

impl Drop for Trainer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A trainer whose registration is answered "try again later" asks again (the log says so)
/// and is still running after several refusals; SIGTERM still stops it cleanly. (Before, it
/// exited at once: "register with the master: ... rejected by the master".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trainer_told_to_try_again_later_keeps_trying() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "blobs", "60", "2.5");
    let (addr, registrations) = fake_master().await;
    let mut trainer = Trainer::spawn(&addr, &train, dir.path().join("trainer.log"));

    tracing::info!("--- the trainer is refused, and asks again");
    for _ in 0..600 {
        if registrations.load(Ordering::SeqCst) >= REGISTRATIONS_MIN {
            break;
        }
        assert_eq!(trainer.exited(), None, "the trainer gave up\n{}", trainer.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = registrations.load(Ordering::SeqCst);
    assert!(seen >= REGISTRATIONS_MIN, "{seen} registrations\n{}", trainer.log());
    assert_eq!(trainer.exited(), None, "the trainer gave up\n{}", trainer.log());
    assert!(trainer.log().contains("trying again"), "the wait is logged\n{}", trainer.log());

    tracing::info!("--- SIGTERM still stops it cleanly");
    let pid = nix::unistd::Pid::from_raw(trainer.child.id() as i32);
    nix::sys::signal::kill(pid, Signal::SIGTERM).expect("signal the trainer");
    for _ in 0..600 {
        if let Some(status) = trainer.exited() {
            assert!(status.success(), "a clean stop while waiting ({status})\n{}", trainer.log());
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the trainer did not stop on SIGTERM\n{}", trainer.log());
}
