//! `kai-scheduler bench`: a deterministic synthetic cluster, timed full scheduling cycles, and
//! the floor we measure them against, a bare first-fit pass over the same pending pods.
//!
//! Two scenarios:
//! - **allocate** (default): `N` empty nodes with 8 GPUs each, a 3-level tree of `Q` queues, and
//!   `P` pending pods in gangs of 1–64 pods spread over the leaf queues (some CPU-only, some
//!   fractional-GPU, some with several GPUs). The figures of the speed goals.
//! - **reclaim**: `N` full nodes running preemptible pods of queues above their fair share, and
//!   one pending gang of `P` one-GPU pods in a starved queue; the cycle must evict to make room.
//! - **steady**: the shape KAI users report as slow (4,000 nodes, 140,000 pods): `N` nodes with
//!   7 of 8 GPUs in use by running pods of half the leaf queues (far above their quotas), and a
//!   pending backlog of `P / 7` pods in gangs, mostly in the other half (below their fair share),
//!   so allocate, consolidate, reclaim and preempt all have work every cycle.
//!
//! Same arguments, same cluster: the only source of variety is a small PRNG seeded with `--seed`.
//! Generating the cluster and checking its policy are not timed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use kai_policy_compiler::generate::Rng;
use kai_policy_compiler::model::Policy;
use kai_policy_compiler::quantity::format_thousandths;
use kai_policy_compiler::source::{SourceFile, SourceSet};

use crate::cluster::{Amounts, Node, Pod, PodGroup, Snapshot, Time};
use crate::cycle::{self, Cycle};
use crate::decision::Decision;

/// Salt of the bench's random sequence (kept from its first version, so figures stay comparable).
const BENCH_SALT: u64 = 0x6b61_692d_6265_6e63;

/// GPUs per generated node.
pub const GPUS_PER_NODE: i64 = 8;
/// CPU per generated node, in millicores.
pub const CPU_PER_NODE: i64 = 128_000;
/// Memory per generated node, in bytes.
pub const MEMORY_PER_NODE: i64 = 1 << 40;
/// The largest gang the allocate scenario generates.
pub const MAX_GANG: usize = 64;

const GIB: i64 = 1 << 30;
/// Largest shapes accepted, so a typo cannot ask for a terabyte of pods.
const MAX_NODES: usize = 50_000;
const MAX_PODS: usize = 1_000_000;
const MAX_CYCLES: usize = 1_000;

/// Output formats of `bench`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFormat {
    /// A table for a terminal.
    Human,
    /// One JSON object.
    Json,
}

/// What the benchmark times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Empty nodes, many pending gangs: the allocate action at scale.
    Allocate,
    /// Full nodes, one pending gang of a starved queue: the reclaim action.
    Reclaim,
    /// A busy cluster's steady state: nodes mostly full, a pending backlog across many queues,
    /// many of them below their fair share, so every action is tried every cycle.
    Steady,
}

impl Scenario {
    /// Its name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Allocate => "allocate",
            Scenario::Reclaim => "reclaim",
            Scenario::Steady => "steady",
        }
    }
}

/// `kai-scheduler bench`: generates a synthetic cluster and times scheduling cycles.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    /// Nodes, 8 GPUs each [default: 5000; reclaim: 1000].
    pub nodes: Option<usize>,
    /// Pending pods [default: 10 per node; reclaim: a gang of 250].
    pub pods: Option<usize>,
    /// Queues in a 3-level tree [default: one per 5 nodes, at least 3; reclaim: 100].
    pub queues: Option<usize>,
    /// Output format.
    pub format: BenchFormat,
    /// Cycles (and first-fit passes) to time; the median is reported.
    pub cycles: usize,
    /// Seed of the cluster generator.
    pub seed: u64,
    /// What to time.
    pub scenario: Scenario,
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            nodes: None,
            pods: None,
            queues: None,
            format: BenchFormat::Human,
            cycles: 3,
            seed: 1,
            scenario: Scenario::Allocate,
        }
    }
}

/// The size of a generated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Nodes.
    pub nodes: usize,
    /// Pending pods (reclaim: the size of the starved queue's gang).
    pub pods: usize,
    /// Queues, all levels.
    pub queues: usize,
    /// Generator seed.
    pub seed: u64,
}

impl Shape {
    /// The shape `args` ask for, defaults filled in per scenario.
    pub fn from_args(args: &BenchArgs) -> Result<Shape, String> {
        let (nodes, pods, queues) = match args.scenario {
            Scenario::Allocate => {
                let nodes = args.nodes.unwrap_or(5_000);
                (
                    nodes,
                    args.pods.unwrap_or(nodes.saturating_mul(10)),
                    args.queues.unwrap_or((nodes / 5).max(3)),
                )
            }
            Scenario::Reclaim => (
                args.nodes.unwrap_or(1_000),
                args.pods.unwrap_or(250),
                args.queues.unwrap_or(100),
            ),
            Scenario::Steady => {
                let nodes = args.nodes.unwrap_or(4_000);
                (
                    nodes,
                    args.pods
                        .unwrap_or(nodes.saturating_mul(STEADY_PODS_PER_NODE)),
                    args.queues.unwrap_or(1_000),
                )
            }
        };
        let shape = Shape {
            nodes,
            pods,
            queues,
            seed: args.seed,
        };
        shape.validate(args.scenario)?;
        Ok(shape)
    }

    fn validate(&self, scenario: Scenario) -> Result<(), String> {
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return Err(format!(
                "--nodes must be from 1 to {MAX_NODES}, not {}",
                self.nodes
            ));
        }
        if !(1..=MAX_PODS).contains(&self.pods) {
            return Err(format!(
                "--pods must be from 1 to {MAX_PODS}, not {}",
                self.pods
            ));
        }
        let least = match scenario {
            Scenario::Allocate | Scenario::Steady => 3,
            // Three for the starved queue's branch, three for the queues it reclaims from.
            Scenario::Reclaim => 6,
        };
        let most = kai_policy_compiler::check::MAX_QUEUES;
        if !(least..=most).contains(&self.queues) {
            return Err(format!(
                "--queues must be from {least} to {most} (a 3-level tree), not {}",
                self.queues
            ));
        }
        if scenario == Scenario::Reclaim {
            let gpus = self.nodes * GPUS_PER_NODE as usize;
            if self.pods > gpus / 2 {
                return Err(format!(
                    "the reclaim gang ({} one-GPU pods) must fit in half of the {gpus} GPUs of {} nodes",
                    self.pods, self.nodes
                ));
            }
        }
        if scenario == Scenario::Steady {
            let most = self.nodes.saturating_mul(STEADY_MAX_RUNNING_PER_NODE) * 7 / 6;
            if self.pods > most {
                return Err(format!(
                    "the steady scenario runs at most {STEADY_MAX_RUNNING_PER_NODE} pods per node (with a backlog of a sixth more): --pods must be at most {most} for {} nodes, not {}",
                    self.nodes, self.pods
                ));
            }
        }
        Ok(())
    }
}

/// Pods per node of the steady scenario by default (140,000 on 4,000 nodes).
const STEADY_PODS_PER_NODE: usize = 35;
/// The most running pods the steady scenario puts on one node.
const STEADY_MAX_RUNNING_PER_NODE: usize = 40;

/// A generated cluster with its checked policy.
#[derive(Debug, Clone)]
pub struct Synthetic {
    /// Nodes, pods (bound and pending) and pod groups.
    pub snapshot: Snapshot,
    /// The checked policy.
    pub policy: Policy,
    /// The policy's files, as generated.
    pub files: Vec<SourceFile>,
    /// The clock of the cycle.
    pub now: Time,
}

/// The measured figures. Serialized, the allocate scenario has exactly the keys of the issue;
/// the reclaim scenario adds `scenario`, `evicted` and `nominated`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    /// Nodes.
    pub nodes: usize,
    /// Pending pods.
    pub pods: usize,
    /// Queues.
    pub queues: usize,
    /// Median wall time of one full cycle, in milliseconds.
    pub cycle_ms: f64,
    /// Pods the cycle binds (reclaim: binds plus nominations, the pods it places).
    pub bound: usize,
    /// `bound` per second of `cycle_ms`.
    pub pods_per_second: f64,
    /// Median wall time of the bare first-fit pass over the same pending pods.
    pub first_fit_ms: f64,
    /// A digest of the cycle's decisions, in order, pending reasons included: a change meant
    /// only to make the cycle faster must leave it as it was.
    pub decisions: String,
    /// `reclaim` or `steady` for those scenarios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<&'static str>,
    /// Reclaim and steady: pods evicted (moves included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evicted: Option<usize>,
    /// Reclaim and steady: of the pods evicted, those moved to another node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<usize>,
    /// Reclaim and steady: pods nominated onto resources their victims release.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated: Option<usize>,
    /// Pods the first-fit pass binds (not serialized).
    #[serde(skip)]
    pub first_fit_bound: usize,
    /// Fastest and slowest cycle, ms (not serialized).
    #[serde(skip)]
    pub cycle_range_ms: (f64, f64),
    /// Median wall time of each step of the cycle, ms, in the order run (not serialized).
    #[serde(skip)]
    pub steps_ms: Vec<(&'static str, f64)>,
    /// Cycles timed (not serialized).
    #[serde(skip)]
    pub cycles: usize,
    /// Time to generate the cluster and check its policy, ms (not serialized).
    #[serde(skip)]
    pub generate_ms: f64,
}

/// Runs `kai-scheduler bench`: the text to print, or why the arguments cannot be run.
pub fn run(args: &BenchArgs) -> Result<String, String> {
    if !(1..=MAX_CYCLES).contains(&args.cycles) {
        return Err(format!(
            "--cycles must be from 1 to {MAX_CYCLES}, not {}",
            args.cycles
        ));
    }
    let shape = Shape::from_args(args)?;
    let report = measure(&shape, args.scenario, args.cycles)?;
    Ok(match args.format {
        BenchFormat::Json => {
            let mut text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
            text.push('\n');
            text
        }
        BenchFormat::Human => human(&report, &shape, args.scenario),
    })
}

/// Generates the scenario's cluster and times `cycles` full cycles and first-fit passes.
pub fn measure(shape: &Shape, scenario: Scenario, cycles: usize) -> Result<Report, String> {
    let started = Instant::now();
    let synthetic = match scenario {
        Scenario::Allocate => allocate_cluster(shape)?,
        Scenario::Reclaim => reclaim_cluster(shape)?,
        Scenario::Steady => steady_cluster(shape)?,
    };
    let generate_ms = ms(started);
    let cycle = Cycle {
        snapshot: &synthetic.snapshot,
        policy: &synthetic.policy,
        now: synthetic.now,
        usage: None,
    };
    let mut cycle_times = Vec::with_capacity(cycles);
    let mut first_fit_times = Vec::with_capacity(cycles);
    let mut outcome = None;
    let mut first_fit_bound = 0;
    let mut steps: Vec<(&'static str, Vec<f64>)> = Vec::new();
    for _ in 0..cycles {
        let t = Instant::now();
        let result = cycle::run(&cycle);
        cycle_times.push(ms(t));
        let counts = (Counts::of(&result.decisions), digest(&result.decisions));
        if outcome.as_ref().is_some_and(|o| *o != counts) {
            return Err("the cycle decided differently on the same snapshot".to_string());
        }
        outcome = Some(counts);
        for &(step, seconds) in &result.timings {
            match steps.iter_mut().find(|(s, _)| *s == step) {
                Some((_, times)) => times.push(seconds * 1000.0),
                None => steps.push((step, vec![seconds * 1000.0])),
            }
        }
        drop(result);

        let t = Instant::now();
        let placed = first_fit(&synthetic.snapshot);
        first_fit_times.push(ms(t));
        first_fit_bound = placed.iter().filter(|p| p.is_some()).count();
    }
    let (counts, decisions) = outcome.unwrap_or_default();
    let cycle_ms = median(&mut cycle_times);
    let bound = match scenario {
        Scenario::Allocate => counts.bound,
        Scenario::Reclaim | Scenario::Steady => counts.bound + counts.nominated,
    };
    let evicting = scenario != Scenario::Allocate;
    Ok(Report {
        nodes: shape.nodes,
        pods: synthetic
            .snapshot
            .pods
            .iter()
            .filter(|p| p.node.is_none())
            .count(),
        queues: synthetic.policy.queues.len(),
        cycle_ms: round3(cycle_ms),
        bound,
        pods_per_second: if cycle_ms > 0.0 {
            (bound as f64 * 1000.0 / cycle_ms).round()
        } else {
            0.0
        },
        first_fit_ms: round3(median(&mut first_fit_times)),
        decisions,
        scenario: evicting.then_some(scenario.name()),
        evicted: evicting.then_some(counts.evicted),
        moved: evicting.then_some(counts.moved),
        nominated: evicting.then_some(counts.nominated),
        first_fit_bound,
        cycle_range_ms: (
            round3(cycle_times.iter().copied().fold(f64::INFINITY, f64::min)),
            round3(cycle_times.iter().copied().fold(0.0, f64::max)),
        ),
        steps_ms: steps
            .into_iter()
            .map(|(step, mut times)| (step, round3(median(&mut times))))
            .collect(),
        cycles,
        generate_ms: round3(generate_ms),
    })
}

/// FNV-1a (64 bits) over the decisions as `Debug` prints them, in hex: equal digests mean equal
/// decisions in the same order, whatever the cycle's code.
fn digest(decisions: &[Decision]) -> String {
    let text = format!("{decisions:?}");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// How many decisions of each kind a cycle took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// `Bind`.
    pub bound: usize,
    /// `Nominate`.
    pub nominated: usize,
    /// `Evict`.
    pub evicted: usize,
    /// `Evict` as a move to another node.
    pub moved: usize,
    /// `Pending` (jobs).
    pub pending: usize,
}

impl Counts {
    /// Counts `decisions`.
    pub fn of(decisions: &[Decision]) -> Counts {
        let mut c = Counts::default();
        for d in decisions {
            match d {
                Decision::Bind { .. } => c.bound += 1,
                Decision::Nominate { .. } => c.nominated += 1,
                Decision::Evict { reason, .. } => {
                    c.evicted += 1;
                    if matches!(reason, crate::decision::EvictReason::Consolidate { .. }) {
                        c.moved += 1;
                    }
                }
                Decision::Pending { .. } => c.pending += 1,
            }
        }
        c
    }
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn human(r: &Report, shape: &Shape, scenario: Scenario) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kai-scheduler bench: {}, seed {}",
        scenario.name(),
        shape.seed
    );
    let row = |out: &mut String, k: &str, v: String| {
        let _ = writeln!(out, "  {k:<16} {v}");
    };
    row(
        &mut out,
        "nodes",
        format!("{} ({} GPUs)", r.nodes, r.nodes as i64 * GPUS_PER_NODE),
    );
    row(&mut out, "pending pods", r.pods.to_string());
    row(&mut out, "queues", r.queues.to_string());
    row(
        &mut out,
        "cycle",
        format!(
            "{:.1} ms (median of {}; fastest {:.1}, slowest {:.1})",
            r.cycle_ms, r.cycles, r.cycle_range_ms.0, r.cycle_range_ms.1
        ),
    );
    if !r.steps_ms.is_empty() {
        let steps: Vec<String> = r
            .steps_ms
            .iter()
            .map(|(step, ms)| format!("{step} {ms:.1}"))
            .collect();
        row(&mut out, "steps (ms)", steps.join(", "));
    }
    let placed = match scenario {
        Scenario::Allocate => "bound",
        Scenario::Reclaim | Scenario::Steady => "placed",
    };
    row(
        &mut out,
        placed,
        format!(
            "{} pods ({:.1}% of pending)",
            r.bound,
            100.0 * r.bound as f64 / r.pods.max(1) as f64
        ),
    );
    if let (Some(e), Some(n)) = (r.evicted, r.nominated) {
        let moved = r.moved.unwrap_or(0);
        row(
            &mut out,
            "evicted",
            format!("{e} pods ({moved} of them moved to another node)"),
        );
        row(
            &mut out,
            "nominated",
            format!("{n} pods (bind once victims are gone)"),
        );
    }
    row(&mut out, "pods/second", format!("{:.0}", r.pods_per_second));
    row(
        &mut out,
        "decisions",
        format!(
            "{} (digest: equal when the cycle decides the same)",
            r.decisions
        ),
    );
    row(
        &mut out,
        "first fit",
        format!(
            "{:.1} ms ({} pods bound)",
            r.first_fit_ms, r.first_fit_bound
        ),
    );
    if r.first_fit_ms > 0.0 {
        row(
            &mut out,
            "cycle/first fit",
            format!("{:.1}×", r.cycle_ms / r.first_fit_ms),
        );
    }
    row(
        &mut out,
        "generated in",
        format!("{:.0} ms (not timed above)", r.generate_ms),
    );
    out
}

// ---------------------------------------------------------------------------------------------
// The baseline: first fit.

/// A node's free room during first fit. Whole-GPU pods take whole free devices; fractional pods
/// share devices, first one with room, else a fresh device.
#[derive(Debug, Clone)]
struct Room {
    whole: i64,
    shared: Vec<i64>,
    cpu: i64,
    memory: i64,
}

impl Room {
    fn new(node: &Node) -> Room {
        Room {
            whole: if node.unschedulable {
                0
            } else {
                node.allocatable.gpu / 1000
            },
            shared: Vec::new(),
            cpu: if node.unschedulable {
                0
            } else {
                node.allocatable.cpu
            },
            memory: if node.unschedulable {
                0
            } else {
                node.allocatable.memory
            },
        }
    }

    /// Takes `pod`'s request if it fits (or always, with `force`, for pods already bound).
    fn take(&mut self, request: &Amounts, fractional: bool, force: bool) -> bool {
        if !force && (request.cpu > self.cpu || request.memory > self.memory) {
            return false;
        }
        if request.gpu > 0 {
            if fractional {
                match self.shared.iter_mut().find(|free| **free >= request.gpu) {
                    Some(free) => *free -= request.gpu,
                    None if self.whole >= 1 || force => {
                        self.whole -= 1;
                        self.shared.push(1000 - request.gpu);
                    }
                    None => return false,
                }
            } else {
                let devices = (request.gpu + 999) / 1000;
                if devices > self.whole && !force {
                    return false;
                }
                self.whole -= devices;
            }
        }
        self.cpu -= request.cpu;
        self.memory -= request.memory;
        true
    }
}

/// The floor: every pending pod, in snapshot order, on the first node with room for it; no
/// fairness, gangs, queues or scoring. Pods already bound (and not terminating) hold their room.
/// Returns the chosen node index per pod (`None` for pods bound before, or with no room).
pub fn first_fit(snapshot: &Snapshot) -> Vec<Option<usize>> {
    let mut rooms: Vec<Room> = snapshot.nodes.iter().map(Room::new).collect();
    let index = snapshot.node_index();
    for pod in &snapshot.pods {
        if let Some(&n) = pod.node.as_deref().and_then(|name| index.get(name)) {
            rooms[n].take(&pod.request, pod.fractional, true);
        }
    }
    snapshot
        .pods
        .iter()
        .map(|pod| {
            if pod.node.is_some() {
                return None;
            }
            rooms
                .iter_mut()
                .position(|room| room.take(&pod.request, pod.fractional, false))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The generator.

/// One generated queue.
#[derive(Debug, Clone)]
struct GenQueue {
    name: String,
    children: Vec<usize>,
    /// GPU quota, thousandths.
    quota: i64,
    /// GPU limit, thousandths.
    limit: Option<i64>,
    weight: Option<&'static str>,
    priority: Option<i32>,
}

/// A 3-level queue tree: departments, teams, leaves. `queues[..departments]` are the roots.
#[derive(Debug, Clone)]
struct Tree {
    queues: Vec<GenQueue>,
    departments: usize,
    leaves: Vec<usize>,
}

/// Department, team and leaf counts for `queues` queues: about the cube root of departments,
/// the square root of the rest in teams, every department with a team and every team with a leaf.
fn levels(queues: usize) -> (usize, usize, usize) {
    debug_assert!(queues >= 3);
    let departments = ((queues as f64).cbrt().round() as usize).clamp(1, queues / 3);
    let rest = queues - departments;
    let teams = ((rest as f64).sqrt().round() as usize)
        .min(rest / 2)
        .max(departments);
    (departments, teams, rest - teams)
}

/// A tree of `queues` queues named under `prefix` whose leaves' GPU quotas add up to about
/// `quota` thousandths (each parent's quota is its children's sum).
fn tree(rng: &mut Rng, prefix: &str, queues: usize, quota: i64) -> Tree {
    let (departments, teams, leaves) = levels(queues);
    let mut qs: Vec<GenQueue> = Vec::with_capacity(queues);
    let blank = |name: String| GenQueue {
        name,
        children: Vec::new(),
        quota: 0,
        limit: None,
        weight: None,
        priority: None,
    };
    for d in 0..departments {
        let mut q = blank(format!("{prefix}{d:02}"));
        if d % 4 == 3 {
            q.priority = Some(200);
        }
        qs.push(q);
    }
    for t in 0..teams {
        let parent = t % departments;
        let name = format!("{}-t{t:03}", qs[parent].name);
        qs.push(blank(name));
        let me = qs.len() - 1;
        qs[parent].children.push(me);
    }
    let mut weights = Vec::with_capacity(leaves);
    let mut leaf_ids = Vec::with_capacity(leaves);
    for l in 0..leaves {
        let parent = departments + l % teams;
        let name = format!("{}-l{l:04}", qs[parent].name);
        let mut q = blank(name);
        if rng.chance(30) {
            q.weight = Some(if rng.chance(50) { "2" } else { "0.5" });
        }
        qs.push(q);
        let me = qs.len() - 1;
        qs[parent].children.push(me);
        leaf_ids.push(me);
        weights.push(rng.between(1, 10) as i64);
    }
    let total: i64 = weights.iter().sum();
    for (&leaf, w) in leaf_ids.iter().zip(&weights) {
        let q = &mut qs[leaf];
        q.quota = (i128::from(quota) * i128::from(*w) / i128::from(total)) as i64;
        if rng.chance(25) {
            q.limit = Some(q.quota * 2);
        }
    }
    // Children come after their parents, so summing from the back fills every level.
    for i in (0..departments + teams).rev() {
        qs[i].quota = qs[i].children.iter().map(|&c| qs[c].quota).sum();
    }
    Tree {
        queues: qs,
        departments,
        leaves: leaf_ids,
    }
}

fn render_queue(out: &mut String, tree: &Tree, q: usize, depth: usize) {
    let queue = &tree.queues[q];
    let pad = "    ".repeat(depth);
    let _ = write!(out, "{pad}queue \"{}\"", queue.name);
    if let Some(p) = queue.priority {
        let _ = write!(out, " priority={p}");
    }
    let _ = write!(
        out,
        " {{\n{pad}    gpu quota={}",
        format_thousandths(queue.quota)
    );
    if let Some(l) = queue.limit {
        let _ = write!(out, " limit={}", format_thousandths(l));
    }
    if let Some(w) = queue.weight {
        let _ = write!(out, " weight={w}");
    }
    out.push('\n');
    if queue.children.is_empty() {
        let _ = writeln!(out, "{pad}    namespaces \"{}\"", queue.name);
    }
    for &c in &queue.children {
        render_queue(out, tree, c, depth + 1);
    }
    let _ = writeln!(out, "{pad}}}");
}

/// The policy files: `cluster.kdl` (cluster, priority classes) and one file per department.
fn policy_files(nodes: usize, trees: &[&Tree]) -> Vec<SourceFile> {
    let mut cluster = String::from(
        "// Generated by kai-scheduler bench.\n\
         cluster \"bench\" {\n",
    );
    let _ = writeln!(
        cluster,
        "    capacity gpu={} cpu={}",
        nodes as i64 * GPUS_PER_NODE,
        nodes as i64 * CPU_PER_NODE / 1000
    );
    cluster.push_str(
        "    placement gpu=binpack cpu=spread\n\
         }\n\n\
         priority-class \"inference\" value=1000 preemptible=#false\n\
         priority-class \"interactive\" value=500\n\
         priority-class \"train\" value=100 preemptible=#true\n\
         priority-class \"batch\" value=50\n",
    );
    let mut files = vec![SourceFile::new("cluster.kdl", cluster)];
    for tree in trees {
        for d in 0..tree.departments {
            let mut text = String::new();
            render_queue(&mut text, tree, d, 0);
            files.push(SourceFile::new(
                format!("queues/{}.kdl", tree.queues[d].name),
                text,
            ));
        }
    }
    files
}

/// Checks generated files; the generator only writes valid policies, so an error is a bug here.
fn checked(files: &[SourceFile]) -> Result<Policy, String> {
    let set = SourceSet::new(files.to_vec());
    let result = kai_policy_compiler::check::check(&set, Vec::new());
    result.policy.ok_or_else(|| {
        let first: Vec<String> = result
            .diagnostics
            .iter()
            .take(3)
            .map(|d| format!("{d:?}"))
            .collect();
        format!(
            "the generated policy does not check (a bug in bench): {}",
            first.join("; ")
        )
    })
}

fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| Node {
            name: format!("node-{i:05}"),
            labels: BTreeMap::from([
                (
                    "topology.kubernetes.io/zone".to_string(),
                    format!("zone-{}", i % 4),
                ),
                (
                    "nvidia.com/gpu.clique".to_string(),
                    format!("clique-{:04}", i / 16),
                ),
            ]),
            allocatable: Amounts {
                gpu: GPUS_PER_NODE * 1000,
                cpu: CPU_PER_NODE,
                memory: MEMORY_PER_NODE,
            },
            unschedulable: false,
            ..Default::default()
        })
        .collect()
}

/// A pod's request: (GPU thousandths, fractional, CPU millicores, memory bytes).
fn pod_shape(rng: &mut Rng) -> (i64, bool, i64, i64) {
    match rng.below(100) {
        // CPU-only: data loaders, preprocessing, controllers.
        0..=29 => {
            let cores = rng.between(1, 8) as i64;
            (0, false, cores * 1000, cores * 4 * GIB)
        }
        // Fractional: notebooks and small inference sharing one device.
        30..=49 => {
            let fraction = if rng.chance(50) { 250 } else { 500 };
            (fraction, true, 4_000, 32 * GIB)
        }
        // Whole GPUs, about 12 cores and 96 GiB per device.
        n => {
            let devices = match n {
                50..=89 => 1,
                90..=95 => 2,
                96..=98 => 4,
                _ => 8,
            };
            (devices * 1000, false, devices * 12_000, devices * 96 * GIB)
        }
    }
}

/// Gang sizes: half single pods, the rest up to [`MAX_GANG`], fewer as they grow.
fn gang_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=49 => 1,
        50..=74 => rng.between(2, 8),
        75..=89 => rng.between(9, 32),
        _ => rng.between(33, MAX_GANG),
    }
}

fn priority_class(rng: &mut Rng) -> &'static str {
    match rng.below(100) {
        0..=69 => "train",
        70..=84 => "batch",
        85..=94 => "interactive",
        _ => "inference",
    }
}

/// Adds a gang of `size` pods of one shape to `snapshot`.
#[allow(clippy::too_many_arguments)]
fn push_gang(
    snapshot: &mut Snapshot,
    queue: &str,
    name: String,
    size: usize,
    class: &str,
    shape: (i64, bool, i64, i64),
    created: Time,
) {
    let (gpu, fractional, cpu, memory) = shape;
    for i in 0..size {
        snapshot.pods.push(Pod {
            namespace: queue.to_string(),
            name: format!("{name}-{i}"),
            group: Some(name.clone()),
            queue: Some(queue.to_string()),
            priority_class: Some(class.to_string()),
            request: Amounts { gpu, cpu, memory },
            fractional,
            node: None,
            created,
            started: None,
            termination_grace_seconds: 30,
            terminating: false,
            deletion_deadline: None,
            legacy_mig: false,
            ..Default::default()
        });
    }
    snapshot.groups.push(PodGroup {
        namespace: queue.to_string(),
        name,
        min_member: size as u32,
        queue: Some(queue.to_string()),
        priority_class: Some(class.to_string()),
        created,
        ..Default::default()
    });
}

/// The allocate scenario: empty nodes, `shape.pods` pending pods in gangs over the leaf queues,
/// whose quotas add up to 70% of the GPUs.
pub fn allocate_cluster(shape: &Shape) -> Result<Synthetic, String> {
    shape.validate(Scenario::Allocate)?;
    let mut rng = Rng::salted(shape.seed, BENCH_SALT);
    let capacity = shape.nodes as i64 * GPUS_PER_NODE * 1000;
    let tree = tree(&mut rng, "d", shape.queues, capacity * 7 / 10);
    let files = policy_files(shape.nodes, &[&tree]);
    let policy = checked(&files)?;
    let mut snapshot = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: nodes(shape.nodes),
        pods: Vec::with_capacity(shape.pods),
        groups: Vec::new(),
    };
    let mut gang = 0;
    while snapshot.pods.len() < shape.pods {
        let size = gang_size(&mut rng).min(shape.pods - snapshot.pods.len());
        let leaf = &tree.queues[tree.leaves[rng.below(tree.leaves.len())]].name;
        let class = priority_class(&mut rng);
        let pod = pod_shape(&mut rng);
        push_gang(
            &mut snapshot,
            leaf,
            format!("job-{gang:06}"),
            size,
            class,
            pod,
            gang as Time,
        );
        gang += 1;
    }
    Ok(Synthetic {
        snapshot,
        policy,
        files,
        now: gang as Time + 3_600,
    })
}

/// The reclaim scenario: every GPU of `shape.nodes` nodes runs a one-GPU pod of a queue whose
/// quota is well below its use (gangs of 1–16 pods, almost all preemptible, running for 2 hours),
/// and the starved queue `starved-team-leaf`, with a quota of exactly the gang, has one pending
/// gang of `shape.pods` one-GPU pods.
pub fn reclaim_cluster(shape: &Shape) -> Result<Synthetic, String> {
    shape.validate(Scenario::Reclaim)?;
    let mut rng = Rng::salted(shape.seed, BENCH_SALT);
    let gpus = shape.nodes as i64 * GPUS_PER_NODE;
    let gang = shape.pods as i64;
    let runners = tree(
        &mut rng,
        "d",
        shape.queues - 3,
        (gpus - gang) * 1000 * 6 / 10,
    );
    let starved = Tree {
        queues: vec![
            GenQueue {
                name: "starved".to_string(),
                children: vec![1],
                quota: gang * 1000,
                limit: None,
                weight: None,
                priority: None,
            },
            GenQueue {
                name: "starved-team".to_string(),
                children: vec![2],
                quota: gang * 1000,
                limit: None,
                weight: None,
                priority: None,
            },
            GenQueue {
                name: "starved-team-leaf".to_string(),
                children: Vec::new(),
                quota: gang * 1000,
                limit: None,
                weight: None,
                priority: None,
            },
        ],
        departments: 1,
        leaves: vec![2],
    };
    let files = policy_files(shape.nodes, &[&runners, &starved]);
    let policy = checked(&files)?;

    let now: Time = 100_000;
    let mut snapshot = Snapshot {
        topologies: Vec::new(),
        dra: Default::default(),
        numa_ignore: Default::default(),
        priority_classes: Default::default(),
        nodes: nodes(shape.nodes),
        pods: Vec::with_capacity(gpus as usize + shape.pods),
        groups: Vec::new(),
    };
    // Runner leaves drawn in proportion to quota (plus one GPU so none is never drawn).
    let cumulative: Vec<i64> = runners
        .leaves
        .iter()
        .scan(0, |sum, &l| {
            *sum += runners.queues[l].quota + 1000;
            Some(*sum)
        })
        .collect();
    let total = *cumulative.last().unwrap_or(&1);
    let slots = gpus as usize;
    let mut job = 0;
    let mut filled = 0;
    while filled < slots {
        let size = rng.between(1, 16).min(slots - filled);
        let draw = (rng.next_u64() % total as u64) as i64;
        let leaf = runners.leaves[cumulative.partition_point(|&c| c <= draw)];
        let queue = runners.queues[leaf].name.clone();
        let class = if rng.chance(5) {
            "interactive"
        } else {
            "train"
        };
        let name = format!("run-{job:05}");
        let created = now - 7_200 - rng.below(3_600) as Time;
        for i in 0..size {
            let slot = filled + i;
            snapshot.pods.push(Pod {
                namespace: queue.clone(),
                name: format!("{name}-{i}"),
                group: Some(name.clone()),
                queue: Some(queue.clone()),
                priority_class: Some(class.to_string()),
                request: Amounts {
                    gpu: 1000,
                    cpu: 8_000,
                    memory: 64 * GIB,
                },
                fractional: false,
                node: Some(snapshot.nodes[slot / GPUS_PER_NODE as usize].name.clone()),
                created,
                started: Some(created + 10),
                termination_grace_seconds: 30,
                terminating: false,
                deletion_deadline: None,
                legacy_mig: false,
                ..Default::default()
            });
        }
        snapshot.groups.push(PodGroup {
            namespace: queue.clone(),
            name,
            min_member: size as u32,
            queue: Some(queue),
            priority_class: Some(class.to_string()),
            created,
            ..Default::default()
        });
        filled += size;
        job += 1;
    }
    push_gang(
        &mut snapshot,
        "starved-team-leaf",
        "starved-gang".to_string(),
        shape.pods,
        "train",
        (1000, false, 8_000, 64 * GIB),
        now - 60,
    );
    Ok(Synthetic {
        snapshot,
        policy,
        files,
        now,
    })
}

mod steady;
pub use steady::steady_cluster;

#[cfg(test)]
mod tests;
