//! `grpc.health.v1` `Watch` streams need no token, so a stranger may open them: a real master
//! holds at most `WATCHES_PER_CONNECTION_MAX` of them per connection and `WATCHES_MAX` in all,
//! refusing more at once with RESOURCE_EXHAUSTED naming the bound (issue 35, item 12).

use std::time::Duration;

use platform::health_watches::{WATCHES_MAX, WATCHES_PER_CONNECTION_MAX};
use tonic::transport::Channel;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::master_group::MasterGroup;

/// One HTTP/2 connection to `addr`.
async fn connection(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("connect to the master")
}

type Watch = Result<tonic::Response<tonic::Streaming<HealthCheckResponse>>, tonic::Status>;

/// Opens `count` watches of the whole server on `channel` (one connection); each is answered
/// (opened or refused) before the next is asked for.
async fn watches(channel: &Channel, count: usize) -> Vec<Watch> {
    let mut client = HealthClient::new(channel.clone());
    let mut opened = Vec::with_capacity(count);
    for _ in 0..count {
        let request = HealthCheckRequest { service: String::new() };
        let watch = tokio::time::timeout(Duration::from_secs(30), client.watch(request));
        opened.push(watch.await.expect("every watch is answered at once"));
    }
    opened
}

/// The refusal among `opened`, checked to be the bound's: RESOURCE_EXHAUSTED naming `bound`.
fn refused_by(opened: &[Watch], bound: &str) -> usize {
    let refused: Vec<&tonic::Status> =
        opened.iter().filter_map(|watch| watch.as_ref().err()).collect();
    for status in &refused {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(status.message().contains(bound), "the refusal names {bound}: {status:?}");
    }
    refused.len()
}

/// One more watch than a connection may hold is refused on that connection (the others stay
/// open, and another connection still gets its own), and once the master holds `WATCHES_MAX`
/// watches over all its connections, a new connection's first watch is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_watches_are_bounded_per_connection_and_in_all() {
    let group = MasterGroup::start(1, &[]);
    group.status().await;
    let addr = group.addrs[0].clone();

    tracing::info!("--- one connection: the watch beyond its bound is refused");
    let first = connection(&addr).await;
    let opened = watches(&first, WATCHES_PER_CONNECTION_MAX + 1).await;
    let refused = refused_by(&opened, "WATCHES_PER_CONNECTION_MAX");
    assert_eq!(refused, 1, "{opened:?}");
    assert!(opened[..WATCHES_PER_CONNECTION_MAX].iter().all(Result::is_ok), "{opened:?}");
    let mut held = vec![opened];

    tracing::info!("--- connections up to the total bound, then one more");
    let connections_needed = WATCHES_MAX / WATCHES_PER_CONNECTION_MAX - 1;
    let mut channels = vec![first];
    for _ in 0..connections_needed {
        let channel = connection(&addr).await;
        let opened = watches(&channel, WATCHES_PER_CONNECTION_MAX).await;
        assert_eq!(refused_by(&opened, "WATCHES_MAX"), 0, "below the total bound: {opened:?}");
        held.push(opened);
        channels.push(channel);
    }
    let last = connection(&addr).await;
    let beyond = watches(&last, 1).await;
    assert_eq!(refused_by(&beyond, "WATCHES_MAX"), 1, "{beyond:?}\n{}", group.logs());

    tracing::info!("--- a watch closed gives its place back");
    drop(held.pop());
    let again = retry_watch(&last).await;
    assert!(again.is_ok(), "a freed place is taken again: {again:?}");
    group.status().await;
}

/// A watch on `channel`, asked again while the server has not yet seen the closed ones go.
async fn retry_watch(channel: &Channel) -> Watch {
    let mut last = watches(channel, 1).await.remove(0);
    for _ in 0..100 {
        if last.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = watches(channel, 1).await.remove(0);
    }
    last
}
