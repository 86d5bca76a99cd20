//! Clients reach the masters' services through the simulated network: `MasterClient` dials an
//! address with the [`Dialer`] this builds, and each call runs the node's production
//! `MasterServiceServer` in process, after a seeded delay, waiting while the node is paused,
//! lost (it then hangs until its deadline, outcome unknown) or refused when the node is down.
//! The call's `grpc-timeout` is enforced here, as tonic's channel does over a socket.

use std::time::Duration;

use client::Dialer;
use platform::security::RpcChannel;
use tonic::body::Body;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceExt as _};

use crate::network::SimNetwork;

/// The port every simulated master listens on; its address is `node-<id>:7000`.
pub const MASTER_PORT: u16 = 7000;

/// Node `id`'s master address, as its peers and clients know it.
pub fn master_addr(id: u64) -> String {
    format!("node-{id}:{MASTER_PORT}")
}

/// The node id an address names.
fn node_of(addr: &str) -> Option<u64> {
    addr.strip_prefix("node-")?.split(':').next()?.parse().ok()
}

impl SimNetwork {
    /// How the simulation's clients dial masters.
    pub fn dialer(&self) -> Dialer {
        let network = self.clone();
        Dialer(std::sync::Arc::new(move |addr: &str| {
            let (network, addr) = (network.clone(), addr.to_string());
            let service = tower::service_fn(move |request: http::Request<Body>| {
                let (network, addr) = (network.clone(), addr.clone());
                async move { network.master_call(&addr, request).await }
            });
            RpcChannel::in_process(BoxCloneSyncService::new(service))
        }))
    }

    async fn master_call(
        &self,
        addr: &str,
        request: http::Request<Body>,
    ) -> Result<http::Response<Body>, BoxError> {
        let Some(id) = node_of(addr) else {
            return Err(Box::new(tonic::Status::unavailable(format!("{addr}: unknown host"))));
        };
        let deadline = grpc_timeout(&request).unwrap_or(Duration::from_secs(3_600));
        match tokio::time::timeout(deadline, self.deliver(id, request)).await {
            Ok(result) => result,
            Err(_elapsed) => Err(Box::new(tonic::Status::deadline_exceeded(format!(
                "{addr}: no answer within {} ms",
                deadline.as_millis()
            )))),
        }
    }

    async fn deliver(
        &self,
        id: u64,
        request: http::Request<Body>,
    ) -> Result<http::Response<Body>, BoxError> {
        let plan = self.plan();
        let refused = |why: &str| Box::new(tonic::Status::unavailable(format!("node-{id}: {why}")));
        tokio::time::sleep(Duration::from_millis(plan.delay_ms)).await;
        self.wait_running(id, id).await;
        let member = self.member(id).ok_or_else(|| refused("connection refused"))?;
        if plan.request_lost {
            std::future::pending::<()>().await;
        }
        let response = member.master.oneshot(request).await?;
        tokio::time::sleep(Duration::from_millis(plan.reply_delay_ms)).await;
        self.wait_running(id, id).await;
        match self.member(id) {
            Some(now) if now.incarnation == member.incarnation => {}
            _ => return Err(refused("connection reset")),
        }
        if plan.reply_lost {
            std::future::pending::<()>().await;
        }
        Ok(response)
    }
}

/// The request's `grpc-timeout` header (`<digits><unit>`), as tonic writes it.
fn grpc_timeout(request: &http::Request<Body>) -> Option<Duration> {
    let value = request.headers().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3_600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}
