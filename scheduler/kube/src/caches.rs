//! Watch caches (edge): one reflector per kind the scheduler reads (Nodes, Pods, PodGroups, and
//! Queues, whose names say which Queue objects may get a status),
//! each listing once and then following the watch, relisting by itself after a `410 Gone` or a
//! broken connection (kube-runtime's watcher with its default backoff).
//!
//! A cycle takes [`Caches::objects`]: a copy of every store at that moment. The stores are
//! updated by their own tasks, so the three kinds are each consistent but read one after the
//! other; a pod bound between two reads is seen either pending or bound, never half, and the
//! next cycle sees it as it is.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinSet;

use crate::crd::{PodGroup, Queue};
use crate::snapshot::Objects;

/// The stores, filled by tasks that run until the caches are dropped.
pub struct Caches {
    nodes: Store<Node>,
    pods: Store<Pod>,
    groups: Store<PodGroup>,
    queues: Store<Queue>,
    _tasks: JoinSet<()>,
}

fn follow<K>(api: Api<K>, kind: &'static str, tasks: &mut JoinSet<()>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    use futures::StreamExt;
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    tasks.spawn(async move {
        futures::pin_mut!(stream);
        // Errors are retried by the backoff; the store keeps the last good state meanwhile.
        // The first error of a run is a warning, its repeats are debug, the recovery is info,
        // so an API server away for a minute makes two lines, not one per retry.
        let mut failing = false;
        while let Some(item) = stream.next().await {
            match item {
                Err(e) if !failing => {
                    tracing::warn!("the {kind} watch failed, retrying with backoff: {e}");
                    failing = true;
                }
                Err(e) => tracing::debug!("the {kind} watch failed again: {e}"),
                Ok(_) if failing => {
                    tracing::info!("the {kind} watch is back");
                    failing = false;
                }
                Ok(_) => {}
            }
        }
    });
    reader
}

impl Caches {
    /// Starts following Nodes, Pods and PodGroups cluster-wide.
    pub fn start(client: kube::Client) -> Caches {
        let mut tasks = JoinSet::new();
        Caches {
            nodes: follow(Api::all(client.clone()), "Node", &mut tasks),
            pods: follow(Api::all(client.clone()), "Pod", &mut tasks),
            groups: follow(Api::all(client.clone()), "PodGroup", &mut tasks),
            queues: follow(Api::all(client), "Queue", &mut tasks),
            _tasks: tasks,
        }
    }

    /// Waits until every cache has listed once (what `/readyz` waits for). The future owns
    /// handles on the stores, so it can run as its own task.
    pub fn synced(&self) -> impl Future<Output = Result<(), String>> + Send + 'static {
        let (nodes, pods, groups) = (self.nodes.clone(), self.pods.clone(), self.groups.clone());
        async move {
            let wait = |r: Result<(), reflector::store::WriterDropped>, kind: &str| {
                r.map_err(|_| format!("the {kind} watch stopped before its first list"))
            };
            wait(nodes.wait_until_ready().await, "Node")?;
            wait(pods.wait_until_ready().await, "Pod")?;
            wait(groups.wait_until_ready().await, "PodGroup")
        }
    }

    /// The names of the Queue objects in the cluster now. Empty until the Queue watch has
    /// listed (and for good where KAI's Queue CRD is not installed): readiness does not wait
    /// for it, as the scheduler reads queues from its policy, not from the cluster.
    pub fn queue_names(&self) -> std::collections::BTreeSet<String> {
        self.queues
            .state()
            .iter()
            .filter_map(|q| q.metadata.name.clone())
            .collect()
    }

    /// A copy of every store now.
    pub fn objects(&self) -> Objects {
        Objects {
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            groups: self.groups.state(),
        }
    }
}
