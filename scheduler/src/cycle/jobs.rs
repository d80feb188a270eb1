//! Jobs: pods grouped into gangs, each resolved to its leaf queue and its priority.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap as HashMap;

use kai_policy_compiler::model::{Policy, PriorityClass};

use super::gang::Gang;
use crate::cluster::{Amounts, Pod, PodGroup, Snapshot, Time};
use crate::decision::Reason;
use crate::prefetch;

/// A gang: the pods of one pod group (or one pod without a group), placed all or none.
#[derive(Debug, Clone)]
pub struct Job {
    /// The pod whose namespace and group (or own name) name the job: see [`Job::key`], made
    /// only for what the cycle reports (a cycle makes a hundred thousand jobs and names few).
    pub named_by: usize,
    /// Indexes into `Snapshot::pods`.
    pub pods: Vec<usize>,
    /// Pods that must run together (`minMember`; 1 for a lone pod).
    pub min_member: u32,
    /// The leaf queue (index into `Policy::queues`), or why it has none (boxed: a cycle's
    /// jobs are read again and again, and most have a queue).
    pub queue: Result<usize, Box<Reason>>,
    /// Priority value (0 without a priority class).
    pub priority: i32,
    /// Whether it may be preempted or reclaimed.
    pub preemptible: bool,
    /// A priority class the policy does not declare.
    pub unknown_priority_class: Option<String>,
    /// Creation time: the pod group's, or the earliest pod's.
    pub created: Time,
    /// Pods running on nodes that are not in the snapshot: charged to the queue, never placed.
    pub elsewhere: Vec<usize>,
    /// Pods of the group that finished with phase `Succeeded`.
    pub succeeded: u32,
    /// `spec.stalenessGracePeriod` in seconds (negative: never stale).
    pub staleness_grace: Option<i64>,
    /// When KAI marked the group stale (`kai.scheduler/stale-podgroup-timestamp`).
    pub stale_since: Option<Time>,
    /// When the scheduler last started it (`kai.scheduler/last-start-timestamp`).
    pub last_start: Option<Time>,
    /// Whether a PodGroup object stands for it: where the marks KAI keeps in annotations go.
    pub pod_group: bool,
    /// When the job may first trigger evictions ([`PodGroup::evicts_from`]).
    pub evicts_from: Option<Time>,
    /// The topology constraint its PodGroup (or top owner) sets, if any.
    pub topology: Option<Box<JobTopology>>,
    /// The PodGroup's sub-groups, with the pods in them; `None`: one gang of `min_member`.
    pub gang: Option<Box<Gang>>,
    /// Pending pods that name a sub-group the PodGroup does not have, with the name: never
    /// placed (KAI's `InvalidSubGroupTasks`).
    pub stray: Vec<(usize, String)>,
}

impl Job {
    /// `namespace/name` of the pod group, or of the single pod: how decisions name the job.
    pub fn key(&self, snapshot: &Snapshot) -> String {
        let (namespace, name) = job_name(&snapshot.pods[self.named_by]);
        format!("{namespace}/{name}")
    }
}

/// The namespace and name of a pod's job: its pod group's, or its own without one.
fn job_name(pod: &Pod) -> (&str, &str) {
    let name = pod.group.as_deref().unwrap_or(&pod.name);
    (&pod.namespace, name)
}

/// A job's own topology constraint, as its PodGroup sets it (something of it is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobTopology {
    /// The PodGroup's `spec.topologyConstraint.requiredTopologyLevel` (or its owner's
    /// `kai.scheduler/topology-required-placement`): the node label the whole gang must share.
    pub required: Option<String>,
    /// The KAI `Topology` whose levels its constraint names.
    pub topology: Option<String>,
    /// The preferred level: the node label the gang should share.
    pub preferred: Option<String>,
}

/// The queue a pod lands in when nothing names one and its namespace is no queue's default
/// (KAI's pod-grouper, `constants.DefaultQueueName`).
pub const DEFAULT_QUEUE: &str = "default-queue";

/// The priority class KAI's pod-grouper falls back to (`constants.TrainPriorityClass`).
pub const TRAIN_CLASS: &str = "train";

/// A job's (namespace, pod group or pod name, whether it is a pod group).
pub(crate) type JobKey<'s> = (&'s str, &'s str, bool);

/// The snapshot's pod group objects (indexes into `Snapshot::groups`) by (namespace, name).
pub(crate) type Objects<'s> = HashMap<(&'s str, &'s str), usize>;

/// The snapshot's pod group objects by (namespace, name): of two objects with one name, the
/// later one counts.
pub(crate) fn objects(snapshot: &Snapshot) -> Objects<'_> {
    let mut objects = Objects::default();
    objects.reserve(snapshot.groups.len());
    for (i, g) in snapshot.groups.iter().enumerate() {
        objects.insert((g.namespace.as_str(), g.name.as_str()), i);
    }
    objects
}

/// Groups the snapshot's pods into jobs, in a stable order (namespace, then name). Pods of
/// other schedulers are no job: they only hold their node's resources.
/// `slots` are the bound pods' slots ([`super::state::ClusterState::new`]).
pub fn jobs(
    snapshot: &Snapshot,
    policy: &Policy,
    slots: &[Option<super::state::Slot>],
) -> Vec<Job> {
    let by_key = group(snapshot);
    let mut jobs = Vec::with_capacity(by_key.len());
    build(
        snapshot,
        policy,
        &objects(snapshot),
        slots,
        by_key,
        &mut jobs,
    );
    jobs
}

/// KAI's pod label that orders the pods of one job (`constants/labels: TaskOrderLabelKey`).
pub const TASK_PRIORITY_LABEL: &str = "kai.scheduler/task-priority";

/// Where [`task_rank`] puts a pod: without a task priority?, then the priority, highest first.
pub(crate) type TaskRank = (bool, std::cmp::Reverse<i64>);

/// A pod's place in KAI's task order before its creation time (`taskorder.TaskOrderFn`): pods
/// with a task priority first, the highest first, then pods without one (or with one that is
/// not a number).
pub(crate) fn task_rank(pod: &crate::cluster::Pod) -> TaskRank {
    let priority = if pod.labels.is_empty() {
        None
    } else {
        pod.labels
            .get(TASK_PRIORITY_LABEL)
            .and_then(|v| v.parse::<i64>().ok())
    };
    (priority.is_none(), std::cmp::Reverse(priority.unwrap_or(0)))
}

/// Pod `p`'s key in KAI's task order (`Session.TaskOrderFn`): [`task_rank`], then the oldest
/// first, then the snapshot's order (KAI's last tie-break, the UID).
pub(crate) fn task_order(snapshot: &Snapshot, p: usize) -> (TaskRank, Time, usize) {
    let pod = &snapshot.pods[p];
    (task_rank(pod), pod.created, p)
}

/// The snapshot's pods sorted into their jobs' runs, in the jobs' order: the first half of
/// [`jobs`], which [`build`] finishes (on any slice of it, so that a large cluster's jobs are
/// built on two threads).
pub(crate) fn group(snapshot: &Snapshot) -> Vec<(JobKey<'_>, Vec<usize>)> {
    // The pods sorted by their job's key, in pod order within a job: the jobs come in
    // (namespace, name) order, each a run of pods. A pod group without pods is no job. The
    // sort compares each namespace's rank and the name's first 16 bytes as numbers, and the
    // strings only where those tie: most comparisons of a large cluster's sort then read no
    // string (the ranks and the bytes order as the strings do).
    let mut ids: rustc_hash::FxHashMap<&str, u32> = rustc_hash::FxHashMap::default();
    let first_seen: Vec<u32> = snapshot
        .pods
        .iter()
        .map(|p| {
            let next = ids.len() as u32;
            *ids.entry(p.namespace.as_str()).or_insert(next)
        })
        .collect();
    let mut namespaces: Vec<(&str, u32)> = ids.into_iter().collect();
    namespaces.sort_unstable();
    let mut rank = vec![0; namespaces.len()];
    for (r, &(_, id)) in namespaces.iter().enumerate() {
        rank[id as usize] = r as u32;
    }
    let prefix = |name: &str| {
        let mut bytes = [0u8; 16];
        let head = &name.as_bytes()[..name.len().min(16)];
        bytes[..head.len()].copy_from_slice(head);
        u128::from_be_bytes(bytes)
    };
    let mut keyed: Vec<(u32, u128, JobKey, usize)> = Vec::with_capacity(snapshot.pods.len());
    keyed.extend(
        snapshot
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| !p.foreign)
            .map(|(i, pod)| {
                let (namespace, name) = job_name(pod);
                let key = (namespace, name, pod.group.is_some());
                (rank[first_seen[i] as usize], prefix(key.1), key, i)
            }),
    );
    keyed.sort_unstable();
    let mut by_key: Vec<(JobKey, Vec<usize>)> = Vec::new();
    let mut last_sort_key = None;
    for (r, head, key, i) in keyed {
        // The numbers tell most jobs apart before the strings are compared.
        let same =
            last_sort_key == Some((r, head)) && by_key.last().is_some_and(|(k, _)| *k == key);
        last_sort_key = Some((r, head));
        match by_key.last_mut() {
            Some((_, pods)) if same => pods.push(i),
            _ => by_key.push((key, vec![i])),
        }
    }
    // Inside a job, KAI's task order: pods labelled with a task priority first, the highest
    // first (`plugins/taskorder`), then the snapshot's order. Sorted only where a pod has one.
    for (_, pods) in by_key.iter_mut().filter(|(_, pods)| pods.len() > 1) {
        if pods.iter().any(|&p| !task_rank(&snapshot.pods[p]).0) {
            pods.sort_by_cached_key(|&p| task_rank(&snapshot.pods[p]));
        }
    }
    by_key
}

/// Makes the jobs of some of [`group`]'s runs, in their order, at the end of `into`: each
/// with its pod group object (from `objects`), resolved to its queue and priority, its pods on
/// nodes outside the snapshot (bound, with no slot in `slots`) set apart.
pub(crate) fn build(
    snapshot: &Snapshot,
    policy: &Policy,
    objects: &Objects<'_>,
    slots: &[Option<super::state::Slot>],
    by_key: Vec<(JobKey<'_>, Vec<usize>)>,
    into: &mut Vec<Job>,
) {
    let names = QueueNames::new(policy);
    // Looked up in a loop of their own: the processor overlaps many lookups' cache misses
    // there, fewer when each comes amid the rest of a job's making.
    let found: Vec<Option<usize>> = by_key
        .iter()
        .enumerate()
        .map(|(i, &((namespace, name, grouped), _))| {
            if let Some(&((namespace, name, _), _)) = by_key.get(i + prefetch::AHEAD) {
                prefetch::text(namespace);
                prefetch::text(name);
            }
            grouped
                .then(|| objects.get(&(namespace, name)).copied())
                .flatten()
        })
        .collect();
    let mut runs = by_key;
    let count = runs.len();
    into.extend((0..count).map(|i| {
        ask_ahead(snapshot, slots, &runs, &found, i);
        let ((namespace, name, _), all) = (runs[i].0, std::mem::take(&mut runs[i].1));
        let g = found[i];
        let group = g.map(|g| &snapshot.groups[g]);
        let all_first = all[0];
        let first = &snapshot.pods[all_first];
        let named_queue = group
            .and_then(|g| g.queue.as_deref())
            .or(first.queue.as_deref());
        let queue = resolve_queue(policy, &names, namespace, named_queue);
        let (class, declared) =
            priority_class(policy, &snapshot.priority_classes, group, first, &queue);
        // A class the policy does not declare takes the cluster's value, as KAI takes it.
        let cluster_value = class
            .filter(|_| declared.is_none())
            .and_then(|c| snapshot.priority_classes.get(c).copied());
        let priority = declared.map_or(cluster_value.unwrap_or(0), |c| c.value);
        let created = match group {
            Some(g) if g.kind_priority.is_none() => g.created,
            _ => all
                .iter()
                .map(|&p| snapshot.pods[p].created)
                .min()
                .unwrap_or(0),
        };
        // A pod bound to a node of the snapshot has its slot there.
        let off_snapshot = |&p: &usize| slots[p].is_none() && snapshot.pods[p].node.is_some();
        // Almost every job has all its pods on known nodes: no second vector then.
        let (elsewhere, mut pods): (Vec<usize>, Vec<usize>) = if all.iter().any(off_snapshot) {
            all.into_iter().partition(off_snapshot)
        } else {
            (Vec::new(), all)
        };
        let (gang, stray) = match group.and_then(|g| Gang::build(g, snapshot, &pods, &elsewhere)) {
            Some((gang, stray)) => (Some(Box::new(gang)), stray),
            None => (None, Vec::new()),
        };
        // A stray pod that runs stays with its job (it holds what it holds); one that
        // waits is set apart, to be told why it never starts.
        let stray: Vec<(usize, String)> = stray
            .into_iter()
            .filter(|&(p, _)| snapshot.pods[p].node.is_none())
            .collect();
        if !stray.is_empty() {
            pods.retain(|p| !stray.iter().any(|(s, _)| s == p));
        }
        let min_member = group.map_or(1, |g| g.min_member);
        // KAI's rule where the class is not declared: below 100 is preemptible; the group's
        // `spec.preemptibility`, then the `kai.scheduler/preemptibility` label, override it.
        let by_class = declared.map_or(priority < 100, |c| c.preemptible);
        let preemptible = group
            .and_then(|g| g.preemptible)
            .or(first.preemptibility)
            .unwrap_or(by_class);
        debug_assert_eq!(
            (namespace, name),
            job_name(first),
            "a job is named by its first pod"
        );
        Job {
            named_by: all_first,
            // Pods on nodes outside the snapshot run; the rest of the gang needs fewer.
            min_member: min_member.saturating_sub(elsewhere.len() as u32),
            queue: queue.map_err(Box::new),
            priority,
            preemptible,
            unknown_priority_class: class
                .filter(|_| declared.is_none() && cluster_value.is_none())
                .map(str::to_string),
            created,
            pods,
            elsewhere,
            succeeded: group.map_or(0, |g| g.succeeded),
            staleness_grace: group.and_then(|g| g.staleness_grace),
            stale_since: group.and_then(|g| g.stale_since),
            last_start: group.and_then(|g| g.last_start),
            pod_group: group.is_some(),
            evicts_from: group.and_then(PodGroup::evicts_from),
            topology: group
                .filter(|g| {
                    g.topology.is_some()
                        || g.topology_required.is_some()
                        || g.topology_preferred.is_some()
                })
                .map(|g| {
                    Box::new(JobTopology {
                        required: g.topology_required.clone(),
                        topology: g.topology.clone(),
                        preferred: g.topology_preferred.clone(),
                    })
                }),
            gang,
            stray,
        }
    }));
}

/// Asks for the memory [`build`] reads to make the jobs after the `i`th of `runs` (whose
/// objects are `found`): the first pod, the PodGroup object and the pods' slots of the job two
/// steps ahead, and the strings the pod and object point to one step ahead, whose pointers
/// have arrived by then.
fn ask_ahead(
    snapshot: &Snapshot,
    slots: &[Option<super::state::Slot>],
    runs: &[(JobKey<'_>, Vec<usize>)],
    found: &[Option<usize>],
    i: usize,
) {
    let ask = |i: usize| {
        let (_, pods) = runs.get(i)?;
        Some((pods, found[i].map(|g| &snapshot.groups[g])))
    };
    if let Some((pods, group)) = ask(i + 2 * prefetch::AHEAD) {
        prefetch::value(&snapshot.pods[pods[0]]);
        for &p in pods {
            prefetch::value(&slots[p]);
        }
        if let Some(g) = group {
            prefetch::value(g);
        }
    }
    if let Some((pods, group)) = ask(i + prefetch::AHEAD) {
        let pod = &snapshot.pods[pods[0]];
        prefetch::some_text(&pod.queue);
        prefetch::some_text(&pod.priority_class);
        prefetch::some_text(&pod.priority_label);
        if let Some(g) = group {
            prefetch::some_text(&g.queue);
            prefetch::some_text(&g.priority_class);
            prefetch::some_text(&g.kind_priority);
        }
    }
}

/// A job's priority class, and the policy's declaration of it. A PodGroup object's
/// `priorityClassName` wins; otherwise KAI's pod-grouper order
/// (`default_grouper.go: calcPriorityClassWithDefaults`): the `priorityClassName` label (top
/// owner, else pod) when the policy declares it, the pod's `spec.priorityClassName`, the queue's
/// default class, then the kind's default (`inference` for Deployments) and `train` when
/// declared. A class is declared by the policy or by a PriorityClass object of the cluster
/// (`cluster`); the declaration returned is the policy's. A `spec.priorityClassName` declared
/// by neither is kept (and reported): Kubernetes only admits pods whose class exists.
fn priority_class<'a>(
    policy: &'a Policy,
    cluster: &BTreeMap<String, i32>,
    group: Option<&'a PodGroup>,
    first: &'a Pod,
    queue: &Result<usize, Reason>,
) -> (Option<&'a str>, Option<&'a PriorityClass>) {
    let declared = |c: &str| policy.priority_class(c).is_some() || cluster.contains_key(c);
    let explicit = group.is_some_and(|g| g.kind_priority.is_none());
    let class = group
        .and_then(|g| g.priority_class.as_deref())
        .or_else(|| {
            first
                .priority_label
                .as_deref()
                .filter(|c| !explicit && declared(c))
        })
        .or(first.priority_class.as_deref())
        .or_else(|| {
            queue
                .as_ref()
                .ok()
                .and_then(|&q| policy.queues[q].default_priority_class.as_deref())
        })
        .or_else(|| {
            let kind = group.and_then(|g| g.kind_priority.as_deref());
            [kind, (!explicit).then_some(TRAIN_CLASS)]
                .into_iter()
                .flatten()
                .find(|c| declared(c))
        });
    let declaration = class.and_then(|c| policy.priority_class(c));
    (class, declaration)
}

/// The leaf queue a job lands in: the queue it names, or its namespace's default.
/// The policy's queues by name and by default namespace, looked up once per job.
struct QueueNames<'p> {
    by_name: HashMap<&'p str, usize>,
    /// The first queue that lists the namespace among its defaults.
    by_namespace: HashMap<&'p str, usize>,
}

impl<'p> QueueNames<'p> {
    fn new(policy: &'p Policy) -> Self {
        let mut by_namespace = HashMap::default();
        for (i, q) in policy.queues.iter().enumerate() {
            for n in &q.namespaces.defaults {
                by_namespace.entry(n.as_str()).or_insert(i);
            }
        }
        QueueNames {
            by_name: policy
                .queues
                .iter()
                .enumerate()
                .map(|(i, q)| (q.name.as_str(), i))
                .collect(),
            by_namespace,
        }
    }
}

fn resolve_queue(
    policy: &Policy,
    names: &QueueNames,
    namespace: &str,
    named: Option<&str>,
) -> Result<usize, Reason> {
    let index = match named {
        Some(name) => *names
            .by_name
            .get(name)
            .ok_or_else(|| Reason::UnknownQueue {
                queue: name.to_string(),
                suggestion: closest(policy, name),
            })?,
        None => *names
            .by_namespace
            .get(namespace)
            .or_else(|| names.by_name.get(DEFAULT_QUEUE))
            .ok_or_else(|| Reason::NoQueue {
                namespace: namespace.to_string(),
            })?,
    };
    let queue = &policy.queues[index];
    if !queue.is_leaf() {
        return Err(Reason::NotALeaf {
            queue: queue.name.clone(),
        });
    }
    if !queue.namespaces.open_to_all && !queue.namespaces.defaults.iter().any(|n| n == namespace) {
        return Err(Reason::NamespaceNotAllowed {
            queue: queue.name.clone(),
            namespace: namespace.to_string(),
        });
    }
    Ok(index)
}

fn closest(policy: &Policy, name: &str) -> Option<String> {
    let leaves = policy
        .queues
        .iter()
        .filter(|q| q.is_leaf())
        .map(|q| q.name.as_str());
    kai_policy_compiler::check::did_you_mean(name, leaves).map(str::to_string)
}

/// Sum of requests of some pods as queues count them: GPU includes MIG instances
/// ([`crate::cluster::mig_gpus`]). What they take from nodes' devices is [`room_of`].
pub fn request_of(snapshot: &Snapshot, pods: &[usize]) -> Amounts {
    sum_requests(snapshot, pods.iter().copied())
}

/// [`request_of`] over an iterator (no vector needed on hot paths).
pub fn sum_requests(snapshot: &Snapshot, pods: impl Iterator<Item = usize>) -> Amounts {
    let mut total = Amounts::default();
    for p in pods {
        let pod = &snapshot.pods[p];
        let r = &pod.request;
        total.gpu += r.gpu;
        if !pod.extended.is_empty() {
            total.gpu += crate::cluster::mig_gpus(&pod.extended);
        }
        total.cpu += r.cpu;
        total.memory += r.memory;
    }
    total
}

/// What some pods take of nodes' CPU, memory and GPU devices (MIG instances are other
/// resources there): compare it with free room, not with quotas.
pub fn room_of(snapshot: &Snapshot, pods: &[usize]) -> Amounts {
    let mut total = Amounts::default();
    for &p in pods {
        let r = &snapshot.pods[p].request;
        total.gpu += r.gpu;
        total.cpu += r.cpu;
        total.memory += r.memory;
    }
    total
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{Job, JobKey, group};
    use crate::cluster::{Pod, Snapshot};

    /// A cycle makes a job for each of a large cluster's 125,000 gangs and reads them again and
    /// again: 176 bytes more per job made the 4,000-node steady cycle 20 ms slower (prepare
    /// 74.7 -> 88.4 ms), and boxing what few jobs have (a queue error, a topology
    /// constraint: 360 -> 240 bytes) made it 7.5 ms faster. What most jobs leave empty is
    /// boxed, and the job's name is made only when reported (`Job::key`: 240 -> 224 bytes).
    #[test]
    fn a_job_stays_small() {
        assert!(
            std::mem::size_of::<Job>() <= 224,
            "a job takes {} bytes",
            std::mem::size_of::<Job>()
        );
    }

    /// Names that tie in their first 16 bytes, differ in length or by a byte past the 16th,
    /// and carry multi-byte characters: the cases where the sort's numbers tie.
    fn name() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-c]{0,3}",
            "team-[ab]{0,2}",
            "averyverylongprefix-[ab]{0,3}",
            "averyverylongprefi[xé]{0,2}",
            "é[a-b]{0,20}",
        ]
    }

    proptest! {
        /// Pods come out in runs by their job's (namespace, name, whether a pod group), in
        /// that key's string order, each run in pod order: what sorting the keys as strings
        /// gives.
        #[test]
        fn jobs_come_in_the_order_of_their_keys_as_strings(
            pods in prop::collection::vec((name(), name(), prop::option::of(name())), 0..60),
        ) {
            let snapshot = Snapshot {
                pods: pods
                    .iter()
                    .map(|(namespace, pod, group)| Pod {
                        namespace: namespace.clone(),
                        name: pod.clone(),
                        group: group.clone(),
                        ..Pod::default()
                    })
                    .collect(),
                ..Snapshot::default()
            };
            let mut expected: Vec<(JobKey, Vec<usize>)> = Vec::new();
            let mut keyed: Vec<(JobKey, usize)> = pods
                .iter()
                .enumerate()
                .map(|(i, (namespace, pod, group))| match group {
                    Some(g) => ((namespace.as_str(), g.as_str(), true), i),
                    None => ((namespace.as_str(), pod.as_str(), false), i),
                })
                .collect();
            keyed.sort();
            for (key, i) in keyed {
                match expected.last_mut() {
                    Some((last, run)) if *last == key => run.push(i),
                    _ => expected.push((key, vec![i])),
                }
            }
            prop_assert_eq!(group(&snapshot), expected);
        }
    }
}
