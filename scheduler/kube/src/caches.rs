//! Watch caches (edge): one reflector per kind the scheduler reads (Nodes, Pods, PodGroups,
//! Queues, whose names say which Queue objects may get a status, and the kinds that own pods,
//! [`access::OWNER_KINDS`], for grouping), each listing once and then following the watch,
//! relisting by itself after a `410 Gone` or a broken connection (kube-runtime's watcher with
//! its default backoff).
//!
//! An owner kind the cluster does not serve (its CRD is not installed: the list answers 404) or
//! does not let us read (403) is *absent*: readiness does not wait for it, its pods are grouped
//! without it, and its watch keeps trying quietly, so a CRD installed later is followed.
//!
//! A cycle takes [`Caches::objects`]: a copy of every store at that moment. The stores are
//! updated by their own tasks, so the three kinds are each consistent but read one after the
//! other; a pod bound between two reads is seen either pending or bound, never half, and the
//! next cycle sees it as it is.

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, TypeMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::access::{self, OwnerKind};
use crate::crd::{PodGroup, Queue};
use crate::snapshot::Objects;

/// The stores, filled by tasks that run until the caches are dropped.
pub struct Caches {
    nodes: Store<Node>,
    pods: Store<Pod>,
    groups: Store<PodGroup>,
    queues: Store<Queue>,
    owners: Vec<OwnerCache>,
    _tasks: JoinSet<()>,
}

/// Where a watch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Not listed yet.
    Pending,
    /// Listed: the store holds every object of the kind.
    Listed,
    /// The kind is not served (404) or not readable (403).
    Absent,
}

/// The cache of one owner kind.
struct OwnerCache {
    kind: &'static OwnerKind,
    store: Store<DynamicObject>,
    listing: watch::Receiver<Listing>,
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
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer);
    let (listing, _) = watch::channel(Listing::Pending);
    tasks.spawn(drive(stream, kind.to_string(), listing));
    reader
}

/// Follows one owner kind, keeping of each object only what grouping reads (metadata, and the
/// spec for kinds whose size is in it), so the cache of every ReplicaSet in a big cluster stays
/// small.
fn follow_owner(
    client: kube::Client,
    kind: &'static OwnerKind,
    tasks: &mut JoinSet<()>,
) -> OwnerCache {
    let api_version = format!("{}/{}", kind.group, kind.version);
    let resource = ApiResource {
        group: kind.group.into(),
        version: kind.version.into(),
        api_version: api_version.clone(),
        kind: kind.kind.into(),
        plural: kind.plural.into(),
    };
    let writer = reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let types = TypeMeta {
        api_version,
        kind: kind.kind.into(),
    };
    let keep_spec = kind.spec;
    let stream = watcher(
        Api::<DynamicObject>::all_with(client, &resource),
        watcher::Config::default(),
    )
    .default_backoff()
    .modify(move |object: &mut DynamicObject| {
        // List items come without their type; ingest reads the kind from it.
        object.types = Some(types.clone());
        object.metadata.managed_fields = None;
        let spec = keep_spec
            .then(|| object.data.get_mut("spec").map(serde_json::Value::take))
            .flatten();
        object.data = match spec {
            Some(spec) => serde_json::json!({ "spec": spec }),
            None => serde_json::json!({}),
        };
    })
    .reflect(writer);
    let (listing, receiver) = watch::channel(Listing::Pending);
    let name = format!("{} ({}/{})", kind.kind, kind.group, kind.version);
    tasks.spawn(drive(stream, name, listing));
    OwnerCache {
        kind,
        store: reader,
        listing: receiver,
    }
}

/// Runs one watch to the end, logging its failures and saying where its listing stands.
async fn drive<K>(
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    kind: String,
    listing: watch::Sender<Listing>,
) {
    futures::pin_mut!(stream);
    // Errors are retried by the backoff; the store keeps the last good state meanwhile.
    // The first error of a run is a warning, its repeats are debug, the recovery is info,
    // so an API server away for a minute makes two lines, not one per retry.
    let mut failing = false;
    while let Some(item) = stream.next().await {
        match item {
            Err(e) => {
                let refused = match &e {
                    watcher::Error::InitialListFailed(kube::Error::Api(s)) => Some(s.code),
                    _ => None,
                };
                match refused {
                    Some(code @ (403 | 404)) => {
                        if *listing.borrow() != Listing::Absent {
                            let why = if code == 404 {
                                "is not served by this cluster (its CRD is not installed)"
                            } else {
                                "may not be listed (403: the scheduler's ClusterRole lacks list and watch on it)"
                            };
                            tracing::info!(
                                "{kind} {why}: pods it owns are grouped without it; checking again with backoff"
                            );
                        }
                        listing.send_replace(Listing::Absent);
                    }
                    _ if !failing => {
                        tracing::warn!("the {kind} watch failed, retrying with backoff: {e}")
                    }
                    _ => tracing::debug!("the {kind} watch failed again: {e}"),
                }
                failing = true;
            }
            Ok(event) => {
                if failing {
                    tracing::info!("the {kind} watch is back");
                    failing = false;
                }
                if matches!(event, watcher::Event::InitDone) {
                    listing.send_replace(Listing::Listed);
                }
            }
        }
    }
}

impl Caches {
    /// Starts following Nodes, Pods, PodGroups, Queues and the owner kinds cluster-wide.
    pub fn start(client: kube::Client) -> Caches {
        let mut tasks = JoinSet::new();
        Caches {
            nodes: follow(Api::all(client.clone()), "Node", &mut tasks),
            pods: follow(Api::all(client.clone()), "Pod", &mut tasks),
            groups: follow(Api::all(client.clone()), "PodGroup", &mut tasks),
            queues: follow(Api::all(client.clone()), "Queue", &mut tasks),
            owners: access::OWNER_KINDS
                .iter()
                .map(|kind| follow_owner(client.clone(), kind, &mut tasks))
                .collect(),
            _tasks: tasks,
        }
    }

    /// Waits until every cache has listed once, or found its owner kind absent (what
    /// `/readyz` waits for): a first cycle before the owners are read would group a gang's pods
    /// one by one. The future owns handles on the stores, so it can run as its own task.
    pub fn synced(&self) -> impl Future<Output = Result<(), String>> + Send + 'static {
        let (nodes, pods, groups) = (self.nodes.clone(), self.pods.clone(), self.groups.clone());
        let owners: Vec<_> = self
            .owners
            .iter()
            .map(|o| (o.kind.kind, o.listing.clone()))
            .collect();
        async move {
            let wait = |r: Result<(), reflector::store::WriterDropped>, kind: &str| {
                r.map_err(|_| format!("the {kind} watch stopped before its first list"))
            };
            wait(nodes.wait_until_ready().await, "Node")?;
            wait(pods.wait_until_ready().await, "Pod")?;
            wait(groups.wait_until_ready().await, "PodGroup")?;
            for (kind, mut listing) in owners {
                listing
                    .wait_for(|l| *l != Listing::Pending)
                    .await
                    .map_err(|_| format!("the {kind} watch stopped before its first list"))?;
            }
            Ok(())
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

    /// A copy of every store now, with the owner kinds whose caches hold every object.
    pub fn objects(&self) -> Objects {
        let mut owners = Vec::new();
        let mut complete_owner_kinds: Vec<String> = Vec::new();
        for cache in &self.owners {
            if *cache.listing.borrow() == Listing::Absent {
                continue;
            }
            owners.extend(cache.store.state());
            if *cache.listing.borrow() == Listing::Listed
                && !complete_owner_kinds.iter().any(|k| k == cache.kind.kind)
            {
                complete_owner_kinds.push(cache.kind.kind.to_string());
            }
        }
        Objects {
            nodes: self.nodes.state(),
            pods: self.pods.state(),
            groups: self.groups.state(),
            owners,
            complete_owner_kinds,
        }
    }
}
