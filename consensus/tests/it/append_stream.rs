//! How a leader's connection sends AppendEntries, against a stand-in peer that counts what
//! arrives: on one stream while the peer has it; again on a new stream, with no error, when
//! the peer ended the last one (its body deadline); as unary calls, asking only once, when the
//! peer's build has no stream (`UNIMPLEMENTED`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use consensus::network::Network;
use consensus::TypeConfig;
use openraft::error::RaftError;
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::{BasicNode, Vote};
use platform::security::Security;
use proto::raft::raft_service_server::{RaftService, RaftServiceServer};
use proto::raft::{ClusterInfoReply, ClusterInfoRequest, RaftReply, RaftRequest};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::{Request, Response, Status, Streaming};

/// What the stand-in peer offers, and what reached it.
#[derive(Default)]
struct Peer {
    /// Its build has the stream.
    streams: bool,
    /// It ends each stream after this many appends (0: never).
    appends_per_stream: usize,
    streams_refused: AtomicUsize,
    streams_opened: AtomicUsize,
    streamed: AtomicUsize,
    unary: AtomicUsize,
}

fn success() -> RaftReply {
    let answer: Result<AppendEntriesResponse<u64>, RaftError<u64>> =
        Ok(AppendEntriesResponse::Success);
    let payload = bincode::serialize(&answer).expect("an answer encodes");
    RaftReply { payload: payload.into() }
}

#[derive(Clone)]
struct PeerService(Arc<Peer>);

#[tonic::async_trait]
impl RaftService for PeerService {
    async fn append_entries(&self, _: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        self.0.unary.fetch_add(1, Ordering::SeqCst);
        Ok(Response::new(success()))
    }

    type AppendEntriesStreamStream = ReceiverStream<Result<RaftReply, Status>>;

    async fn append_entries_stream(
        &self,
        request: Request<Streaming<RaftRequest>>,
    ) -> Result<Response<Self::AppendEntriesStreamStream>, Status> {
        let peer = Arc::clone(&self.0);
        if !peer.streams {
            peer.streams_refused.fetch_add(1, Ordering::SeqCst);
            return Err(Status::unimplemented("an older build"));
        }
        peer.streams_opened.fetch_add(1, Ordering::SeqCst);
        let (replies, receiver) = mpsc::channel(1);
        let mut requests = request.into_inner();
        tokio::spawn(async move {
            let mut answered = 0;
            while let Ok(Some(_)) = requests.message().await {
                peer.streamed.fetch_add(1, Ordering::SeqCst);
                if replies.send(Ok(success())).await.is_err() {
                    return;
                }
                answered += 1;
                if answered == peer.appends_per_stream {
                    return;
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(receiver)))
    }

    async fn vote(&self, _: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn install_snapshot(
        &self,
        _: Request<RaftRequest>,
    ) -> Result<Response<RaftReply>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn timeout_now(&self, _: Request<RaftRequest>) -> Result<Response<RaftReply>, Status> {
        Err(Status::unimplemented("not in this test"))
    }

    async fn cluster_info(
        &self,
        _: Request<ClusterInfoRequest>,
    ) -> Result<Response<ClusterInfoReply>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

/// Sends `count` appends to a stand-in peer through a leader's connection; all must succeed.
async fn send_appends(peer: Peer, count: usize) -> anyhow::Result<Arc<Peer>> {
    let peer = Arc::new(peer);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RaftServiceServer::new(PeerService(Arc::clone(&peer))))
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                let _ = stopped.await;
            }),
    );
    let mut network = Network::new(Duration::from_millis(100), Security::default(), [].into());
    let mut connection = network.new_client(2, &BasicNode::new(&addr)).await;
    for _ in 0..count {
        let request = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries: Vec::new(),
            leader_commit: None,
        };
        let answer =
            connection.append_entries(request, RPCOption::new(Duration::from_secs(5))).await?;
        assert_eq!(answer, AppendEntriesResponse::Success);
    }
    // The server's graceful stop waits for the open stream, which the connection holds.
    drop(connection);
    let _ = stop.send(());
    server.await??;
    Ok(peer)
}

#[tokio::test]
async fn appends_go_on_one_stream_while_the_peer_has_it() -> anyhow::Result<()> {
    crate::init_tracing();
    let peer = send_appends(Peer { streams: true, ..Peer::default() }, 5).await?;
    assert_eq!(peer.streams_opened.load(Ordering::SeqCst), 1, "one stream");
    assert_eq!(peer.streamed.load(Ordering::SeqCst), 5, "every append on it");
    assert_eq!(peer.unary.load(Ordering::SeqCst), 0, "no unary call");
    Ok(())
}

#[tokio::test]
async fn an_ended_stream_is_replaced_without_an_error() -> anyhow::Result<()> {
    crate::init_tracing();
    let peer = Peer { streams: true, appends_per_stream: 2, ..Peer::default() };
    let peer = send_appends(peer, 5).await?;
    assert_eq!(peer.streams_opened.load(Ordering::SeqCst), 3, "a new stream per two appends");
    assert_eq!(peer.streamed.load(Ordering::SeqCst), 5, "each append answered once");
    assert_eq!(peer.unary.load(Ordering::SeqCst), 0, "no unary call");
    Ok(())
}

#[tokio::test]
async fn a_peer_without_the_stream_gets_unary_appends() -> anyhow::Result<()> {
    crate::init_tracing();
    let peer = send_appends(Peer::default(), 5).await?;
    assert_eq!(peer.unary.load(Ordering::SeqCst), 5, "every append unary");
    assert_eq!(peer.streams_refused.load(Ordering::SeqCst), 1, "the stream asked for once");
    assert_eq!(peer.streams_opened.load(Ordering::SeqCst), 0);
    assert_eq!(peer.streamed.load(Ordering::SeqCst), 0);
    Ok(())
}
