//! The backend the daemon drives: connect, take a snapshot each cycle, apply the cycle's
//! decisions. Leader election runs beside it as its own task ([`KubeBackend::elect`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kai_scheduler::decision::Decision;
use kai_scheduler::dra::ClaimStatus;
use kai_scheduler::ingest::Options;
use kube::api::{DynamicObject, ListParams};
use tokio::sync::watch;

use crate::apply::{self, Desired, Listed};
use crate::caches::Caches;
use crate::calls::{self, Call, Context, Managed, QueueNumbers, Reported};
use crate::client::{Limits, Outcome, Sender, Sent};
use crate::crd::{PodGroup, PodGroupStatus};
use crate::grouper;
use crate::lease::{self, Election, Leading};
use crate::snapshot::{self, Assumed, Read};

/// How to reach the cluster and who we are in it.
#[derive(Debug, Clone)]
pub struct Config {
    /// A kubeconfig file; `None`: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster service
    /// account, in kube-rs's order.
    pub kubeconfig: Option<PathBuf>,
    /// How to read pods (the policy's queue label and scheduler name).
    pub options: Options,
    /// This replica's name (events' reporting instance, the Lease holder).
    pub instance: String,
    /// How hard to press on the API server.
    pub limits: Limits,
    /// NUMA alignment (`--numa`): `Some` with the resources it leaves out (`--numa-ignore`)
    /// follows NodeResourceTopology objects and records bound pods' predicted zones.
    pub numa: Option<std::collections::BTreeSet<String>>,
}

/// Why the backend cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig cannot be read.
    #[error("cannot read the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No configuration was found or it is unusable.
    #[error(
        "no Kubernetes configuration: {0} (give --kubeconfig, set KUBECONFIG, or run in a pod with a service account)"
    )]
    Infer(String),
    /// The client cannot be built from the configuration.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

/// What one [`KubeBackend::apply_policy`] did.
#[derive(Debug, Default)]
pub struct PolicyApplied {
    /// Every call and its outcome (applies, deletions).
    pub sent: Vec<Sent>,
    /// What stopped part of it, in words (a list that failed; pruning held back).
    pub problems: Vec<String>,
    /// Every object applied and everything pruned: nothing to try again.
    pub complete: bool,
}

/// The Kubernetes backend.
pub struct KubeBackend {
    client: kube::Client,
    caches: Caches,
    sender: Sender,
    config: Config,
    assumed: Assumed,
    reported: Reported,
    last: Read,
    group_status: BTreeMap<String, PodGroupStatus>,
    /// Marks to write on their PodGroups with the next calls (and again after a call that
    /// failed): `(namespace/name, annotation)` and the time, seconds since the epoch (`None`:
    /// remove it).
    marks: BTreeMap<(String, &'static str), Option<u64>>,
    /// PodGroups this scheduler made that the caches may not show yet (`namespace/name`, when),
    /// and those whose creation failed, with when (tried again a minute later, not every
    /// cycle). Both forget an entry after [`GROUP_MEMORY_SECONDS`] (an object made and deleted
    /// before the caches saw it is made again), so neither grows without bound.
    made_groups: BTreeMap<String, Timestamp>,
    failed_groups: BTreeMap<String, Timestamp>,
    /// The spec (as JSON) of each PodGroup this scheduler made, as the caches show it.
    made_specs: BTreeMap<String, serde_json::Value>,
    /// Spec updates sent, with when: the same one is not sent again within a minute, while the
    /// caches catch up.
    spec_updates: BTreeMap<String, (serde_json::Value, Timestamp)>,
    /// The DRA claims the next cycle's binds write (`CycleResult::claims`), and the objects
    /// their patches start from, as the last snapshot's caches held them: claims by
    /// `(namespace, name)`, DeviceClasses by name, pods' uids by `namespace/name`.
    claims: Vec<ClaimStatus>,
    dra_claims: BTreeMap<(String, String), serde_json::Value>,
    dra_classes: BTreeMap<String, serde_json::Value>,
    pod_uids: BTreeMap<String, String>,
    /// The NUMA placements the next cycle's binds record (`CycleResult::numa_zones`).
    numa_zones: BTreeMap<String, Vec<kai_scheduler::numa::ZoneAmount>>,
}

/// `namespace/name` of a PodGroup object, as decisions and calls name groups.
fn group_key(group: &PodGroup) -> String {
    format!(
        "{}/{}",
        group.metadata.namespace.as_deref().unwrap_or("default"),
        group.metadata.name.as_deref().unwrap_or("")
    )
}

/// How long a PodGroup whose creation failed waits before it is tried again.
const GROUP_RETRY_SECONDS: i64 = 60;

/// How long a PodGroup made is assumed to exist before the caches show it.
const GROUP_MEMORY_SECONDS: i64 = 300;

impl KubeBackend {
    /// Connects and starts the watch caches (they fill in the background; see
    /// [`KubeBackend::synced`]).
    pub async fn connect(config: Config) -> Result<KubeBackend, ConnectError> {
        let kube_config = match &config.kubeconfig {
            Some(path) => {
                let file = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                    ConnectError::Kubeconfig {
                        path: path.clone(),
                        source,
                    }
                })?;
                kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .map_err(|source| ConnectError::Kubeconfig {
                        path: path.clone(),
                        source,
                    })?
            }
            None => kube::Config::infer()
                .await
                .map_err(|e| ConnectError::Infer(e.to_string()))?,
        };
        let client = kube::Client::try_from(kube_config)?;
        Ok(KubeBackend::with_client(client, config))
    }

    /// A backend over an existing client (tests give one over a mock service).
    pub fn with_client(client: kube::Client, config: Config) -> KubeBackend {
        KubeBackend {
            caches: Caches::start(client.clone(), config.numa.is_some()),
            sender: Sender::new(client.clone(), config.limits),
            client,
            config,
            assumed: Assumed::default(),
            reported: Reported::default(),
            last: Read::default(),
            group_status: BTreeMap::new(),
            marks: BTreeMap::new(),
            made_groups: BTreeMap::new(),
            failed_groups: BTreeMap::new(),
            made_specs: BTreeMap::new(),
            spec_updates: BTreeMap::new(),
            claims: Vec::new(),
            dra_claims: BTreeMap::new(),
            dra_classes: BTreeMap::new(),
            pod_uids: BTreeMap::new(),
            numa_zones: BTreeMap::new(),
        }
    }

    /// Keeps a cycle's predicted NUMA placements (`CycleResult::numa_zones`): the next
    /// [`KubeBackend::apply`] records each on its pod before binding it.
    pub fn cycle_numa(&mut self, zones: &[kai_scheduler::numa::PodZones]) {
        self.numa_zones = zones.iter().cloned().collect();
    }

    /// Puts into each bind the record of its pod's predicted NUMA placement, or, for a pod
    /// with no prediction that carries one (a bind that failed left it), its removal: a stale
    /// record would be charged on whatever node the pod is bound to.
    fn give_numa(&mut self, planned: &mut [Call]) {
        if self.config.numa.is_none() {
            return;
        }
        let stale: BTreeSet<String> = self
            .last
            .snapshot
            .pods
            .iter()
            .filter(|p| p.node.is_none() && p.numa_zones.is_some())
            .map(|p| p.key())
            .collect();
        for call in planned {
            if let Call::Bind {
                namespace,
                pod,
                numa,
                ..
            } = call
            {
                let key = format!("{namespace}/{pod}");
                *numa = match self.numa_zones.get(&key) {
                    Some(zones) => Some(kai_scheduler::numa::record_json(zones).into()),
                    None if stale.contains(&key) => Some(serde_json::Value::Null),
                    None => None,
                };
            }
        }
    }

    /// Keeps a cycle's changed DRA claims (`CycleResult::claims`): the next
    /// [`KubeBackend::apply`] writes those of the pods it binds before binding them.
    pub fn cycle_claims(&mut self, claims: &[ClaimStatus]) {
        self.claims = claims.to_vec();
    }

    /// Puts into each bind the status patches of its pod's DRA claims; a bind whose claims
    /// cannot be written is not sent (the pod waits for a later cycle) and says why in the log.
    fn give_claims(&mut self, planned: &mut Vec<Call>) {
        let pods: BTreeMap<String, &kai_scheduler::cluster::Pod> = self
            .last
            .snapshot
            .pods
            .iter()
            .filter(|p| !p.constraints.claims.is_empty())
            .map(|p| (p.key(), p))
            .collect();
        if pods.is_empty() {
            return;
        }
        // Per claim, the pods bound to it in this cycle, in the order of their binds.
        let mut users: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
        for call in planned.iter() {
            let Call::Bind { namespace, pod, .. } = call else {
                continue;
            };
            let key = format!("{namespace}/{pod}");
            let (Some(p), Some(uid)) = (pods.get(&key), self.pod_uids.get(&key)) else {
                continue;
            };
            for name in p.constraints.claims.iter().filter_map(|c| c.claim.clone()) {
                users
                    .entry((namespace.clone(), name))
                    .or_default()
                    .push((pod.clone(), uid.clone()));
            }
        }
        planned.retain_mut(|call| {
            let Call::Bind {
                namespace,
                pod,
                claims,
                ..
            } = call
            else {
                return true;
            };
            let key = format!("{namespace}/{pod}");
            let Some(p) = pods.get(&key) else {
                return true;
            };
            let written = match self.pod_uids.get(&key) {
                None => Err("its uid is not in the caches".to_string()),
                Some(_) => calls::claim_writes(
                    p,
                    &users,
                    &self.claims,
                    &self.dra_claims,
                    &self.dra_classes,
                ),
            };
            match written {
                Ok(writes) => {
                    *claims = writes;
                    true
                }
                Err(why) => {
                    tracing::warn!("not binding {key} now: {why}");
                    false
                }
            }
        });
    }

    /// Queues a cycle's stale-mark changes (`CycleResult::stale_marks`, on this backend's
    /// clock) to be written as KAI's annotation with the next [`KubeBackend::apply`].
    pub fn mark_stale(&mut self, marks: &[(String, Option<u64>)]) {
        for (key, since) in marks {
            self.marks.insert(
                (key.clone(), kai_scheduler::ingest::STALE_ANNOTATION),
                *since,
            );
        }
    }

    /// Queues the groups a cycle started and those it evicted pods of
    /// (`CycleResult::started`, `CycleResult::evicted`), at `now` on this backend's clock, to be
    /// written as KAI's annotations with the next [`KubeBackend::apply`].
    pub fn mark_started_and_evicted(&mut self, started: &[String], evicted: &[String], now: u64) {
        use kai_scheduler::ingest::{LAST_EVICTION_ANNOTATION, LAST_START_ANNOTATION};
        let marks = (started.iter().map(|k| (k, LAST_START_ANNOTATION)))
            .chain(evicted.iter().map(|k| (k, LAST_EVICTION_ANNOTATION)));
        for (key, annotation) in marks {
            self.marks.insert((key.clone(), annotation), Some(now));
        }
    }

    /// Waits until every watch cache has listed once; the future can run as its own task.
    pub fn synced(&self) -> impl Future<Output = Result<(), String>> + Send + 'static {
        self.caches.synced()
    }

    /// How to read pods from now on (a new policy may name another queue label or scheduler).
    pub fn set_options(&mut self, options: Options) {
        self.config.options = options;
    }

    /// The cluster now, with accepted binds and evictions the caches do not show yet laid
    /// over it. `problems` lists objects that could not be read.
    pub fn snapshot(&mut self, now: Timestamp) -> &Read {
        let objects = self.caches.objects();
        self.group_status = objects
            .groups
            .iter()
            .map(|g| (group_key(g), g.status.clone().unwrap_or_default()))
            .collect();
        self.made_specs = objects
            .groups
            .iter()
            .filter(|g| {
                g.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(grouper::MANAGED_BY.0))
                    .is_some_and(|v| v == grouper::MANAGED_BY.1)
            })
            .map(|g| {
                (
                    group_key(g),
                    serde_json::to_value(&g.spec).unwrap_or_default(),
                )
            })
            .collect();
        let status = &self.group_status;
        let age = |at: &Timestamp| now.as_second() - at.as_second();
        self.spec_updates
            .retain(|_, (_, at)| age(at) < GROUP_RETRY_SECONDS);
        self.made_groups
            .retain(|key, at| !status.contains_key(key) && age(at) < GROUP_MEMORY_SECONDS);
        self.failed_groups
            .retain(|_, at| age(at) < GROUP_RETRY_SECONDS);
        self.dra_claims.clear();
        self.dra_classes.clear();
        for object in &objects.dra {
            let value = serde_json::to_value(object.as_ref()).unwrap_or_default();
            let name = object.metadata.name.clone().unwrap_or_default();
            match object.types.as_ref().map(|t| t.kind.as_str()) {
                Some("ResourceClaim") => {
                    let namespace = object.metadata.namespace.clone().unwrap_or_default();
                    self.dra_claims.insert((namespace, name), value);
                }
                Some("DeviceClass") => {
                    self.dra_classes.insert(name, value);
                }
                _ => {}
            }
        }
        self.pod_uids = objects
            .pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.resource_claims.is_some()))
            .filter_map(|p| {
                let m = &p.metadata;
                Some((
                    format!("{}/{}", m.namespace.as_deref()?, m.name.as_deref()?),
                    m.uid.clone()?,
                ))
            })
            .collect();
        let mut read = snapshot::read(&objects, &self.config.options);
        if let Some(ignore) = &self.config.numa {
            read.snapshot.numa_ignore = ignore.clone();
        }
        self.assumed
            .overlay(&mut read.snapshot, snapshot::clock(now));
        if !read.snapshot.dra.is_empty() {
            kai_scheduler::dra::recount_gpus(&mut read.snapshot);
        }
        self.last = read;
        &self.last
    }

    /// Sends the calls for a cycle's decisions (taken on the last [`KubeBackend::snapshot`]) and
    /// the queues' status; returns every call's outcome. Call it only while leading.
    pub async fn apply(
        &mut self,
        decisions: &[Decision],
        queues: &[QueueNumbers],
        now: Timestamp,
    ) -> Vec<Sent> {
        self.apply_while(decisions, queues, now, || true).await
    }

    /// [`KubeBackend::apply`], sending the calls a second's worth (`limits.per_second`) at a
    /// time and asking `leads` before each batch: once it says no, the rest are not sent (their
    /// outcome is `Failed(0, "not sent: …")`, so they are neither assumed nor remembered as
    /// told). A replica that loses its Lease in the middle of a long cycle stops within about a
    /// second.
    pub async fn apply_while(
        &mut self,
        decisions: &[Decision],
        queues: &[QueueNumbers],
        now: Timestamp,
        leads: impl Fn() -> bool,
    ) -> Vec<Sent> {
        let scheduler_name = self
            .config
            .options
            .scheduler_name
            .clone()
            .unwrap_or_default();
        let cx = Context {
            snapshot: &self.last.snapshot,
            group_status: &self.group_status,
            scheduler_name: &scheduler_name,
            instance: &self.config.instance,
            now,
        };
        let mut planned = calls::plan(decisions, &cx, &mut self.reported);
        self.give_claims(&mut planned);
        self.give_numa(&mut planned);
        // Status only for Queue objects that exist: the policy's queues may not be applied yet
        // (the status of a missing object is a 404 every cycle).
        let existing = self.caches.queue_names();
        let queues: Vec<QueueNumbers> = queues
            .iter()
            .filter(|q| existing.contains(&q.name))
            .cloned()
            .collect();
        planned.extend(calls::queue_calls(&queues, &mut self.reported));
        let (made, failed) = (&self.made_groups, &self.failed_groups);
        planned.extend(grouper::plan(&self.last.snapshot, &|key| {
            // `failed` holds only the failures of the last minute (pruned above).
            self.group_status.contains_key(key)
                || made.contains_key(key)
                || failed.contains_key(key)
        }));
        for call in grouper::updates(&self.last.owner_groups, &self.made_specs) {
            let Call::PodGroupSpec {
                namespace,
                name,
                patch,
            } = &call
            else {
                continue;
            };
            let key = format!("{namespace}/{name}");
            if self
                .spec_updates
                .get(&key)
                .is_some_and(|(sent, _)| sent == patch)
            {
                continue;
            }
            self.spec_updates.insert(key, (patch.clone(), now));
            planned.push(call);
        }
        let marks: Vec<calls::Mark> = std::mem::take(&mut self.marks).into_iter().collect();
        planned.extend(calls::mark_calls(&marks));
        let batch = (self.config.limits.per_second.max(1) as usize).max(1);
        let mut sent = Vec::with_capacity(planned.len());
        let mut planned = planned.into_iter();
        loop {
            let chunk: Vec<_> = planned.by_ref().take(batch).collect();
            if chunk.is_empty() {
                break;
            }
            if !leads() {
                sent.extend(chunk.into_iter().chain(planned.by_ref()).map(|call| Sent {
                    call,
                    outcome: Outcome::Failed(
                        0,
                        "not sent: this replica stopped leading".to_string(),
                    ),
                }));
                break;
            }
            sent.extend(self.sender.send(chunk).await);
        }
        self.assumed.record(&sent);
        self.reported.forget_failed(&sent);
        for s in &sent {
            if let Call::CreatePodGroup {
                namespace, name, ..
            } = &s.call
            {
                let key = format!("{namespace}/{name}");
                // 409: it exists already (made by another replica, or by hand).
                if matches!(s.outcome, Outcome::Done | Outcome::Conflict(_)) {
                    self.failed_groups.remove(&key);
                    self.made_groups.insert(key, now);
                } else {
                    self.failed_groups.insert(key, now);
                }
            }
        }
        // A mark that could not be written is tried again next cycle, unless its group is gone.
        for (s, (key, since)) in sent
            .iter()
            .filter(|s| matches!(s.call, Call::PodGroupAnnotation { .. }))
            .zip(&marks)
        {
            if !matches!(s.outcome, Outcome::Done | Outcome::Gone(_)) {
                self.marks.entry(key.clone()).or_insert(*since);
            }
        }
        sent
    }

    /// Applies the policy's Queues and PriorityClasses (`--apply-queues`, [`crate::apply`]) and
    /// prunes the ones this scheduler applied that the policy no longer has. Call it only while
    /// leading.
    pub async fn apply_policy(&mut self, desired: &Desired) -> PolicyApplied {
        let mut out = PolicyApplied::default();
        let listed = match self.list_managed().await {
            Ok(listed) => Some(listed),
            Err(why) => {
                out.problems.push(why);
                None
            }
        };
        for wave in desired.waves() {
            let sent = self.sender.send(wave).await;
            // A PriorityClass of ours whose value changed: the API server refuses the update
            // (422); delete it and apply it again.
            for s in sent {
                let ours = |name: &str| {
                    listed.as_ref().is_some_and(|l| {
                        l.iter()
                            .any(|o| o.kind == Managed::PriorityClass && o.name == name)
                    })
                };
                match (&s.call, &s.outcome) {
                    (
                        Call::Apply {
                            kind: Managed::PriorityClass,
                            name,
                            ..
                        },
                        Outcome::Failed(422, _),
                    ) if ours(name) => {
                        let delete = self
                            .sender
                            .send_one(Call::Prune {
                                kind: Managed::PriorityClass,
                                name: name.clone(),
                            })
                            .await;
                        let deleted = matches!(delete.outcome, Outcome::Done | Outcome::Gone(_));
                        out.sent.push(delete);
                        out.sent.push(if deleted {
                            self.sender.send_one(s.call.clone()).await
                        } else {
                            s
                        });
                    }
                    _ => out.sent.push(s),
                }
            }
        }
        let applied = out
            .sent
            .iter()
            .filter(|s| matches!(s.call, Call::Apply { .. }))
            .all(|s| s.outcome == Outcome::Done);
        match (&listed, applied) {
            (Some(listed), true) if desired.count(Managed::Queue) > 0 => {
                for wave in desired.prune(listed) {
                    out.sent.extend(self.sender.send(wave).await);
                }
            }
            (Some(_), true) => out
                .problems
                .push("the policy has no queues: nothing is pruned".to_string()),
            (_, false) => out.problems.push(
                "not every object could be applied: nothing is pruned until they are".to_string(),
            ),
            (None, true) => {}
        }
        out.complete = out.problems.is_empty()
            && out
                .sent
                .iter()
                .all(|s| matches!(s.outcome, Outcome::Done | Outcome::Gone(_)));
        out
    }

    /// The Queues and PriorityClasses the cluster holds with the managed-by label.
    async fn list_managed(&self) -> Result<Vec<Listed>, String> {
        let mut out = Vec::new();
        let params = ListParams::default().labels(&apply::managed_selector());
        for kind in [Managed::Queue, Managed::PriorityClass] {
            let api: kube::Api<DynamicObject> =
                kube::Api::all_with(self.client.clone(), &kind.api_resource());
            let list = api.list(&params).await.map_err(|e| {
                format!(
                    "cannot list the {}s this scheduler applied, so none is pruned: {e}",
                    kind.kind()
                )
            })?;
            out.extend(list.items.into_iter().map(|o| Listed {
                kind,
                parent: o.data["spec"]["parentQueue"].as_str().map(str::to_string),
                name: o.metadata.name.unwrap_or_default(),
            }));
        }
        Ok(out)
    }

    /// Gives up the Lease if this replica holds it (at shutdown), so another replica takes over
    /// at once.
    pub async fn release(&self, election: &Election) -> Result<bool, crate::client::Outcome> {
        let api: kube::Api<Lease> = kube::Api::namespaced(self.client.clone(), &election.namespace);
        lease::release(&api, election).await
    }

    /// The leader election task: run it beside the scheduling loop (`tokio::spawn`); the loop
    /// calls [`KubeBackend::apply`] only while the receiver says [`Leading::leads`].
    pub fn elect(
        &self,
        election: Election,
    ) -> (
        impl Future<Output = ()> + Send + 'static,
        watch::Receiver<Leading>,
    ) {
        let api: kube::Api<Lease> = kube::Api::namespaced(self.client.clone(), &election.namespace);
        let (tx, rx) = watch::channel(Leading::No {
            holder: String::new(),
        });
        (lease::run(api, election, tx), rx)
    }
}
