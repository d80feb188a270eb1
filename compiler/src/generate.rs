//! A deterministic generator of large, realistic and valid policies, for benchmarks and fuzzing.
//!
//! The shape: `cluster.kdl` holds the cluster node (with a capacity that fits), the priority
//! classes, the placements and the top-level department queues; every other file,
//! `teams/team-NNNN.kdl`, hangs one or more team subtrees under a department with `parent=` and
//! nests the deeper levels inside. All leaves sit on the deepest level and own a namespace of
//! their own; every parent's quota covers its children's, and the departments fit the capacity,
//! so the policy checks with no error and no warning.
//!
//! Same spec, same bytes: the only source of variety is a small PRNG seeded from
//! [`GenerateSpec::seed`].

use std::fmt::Write as _;

use crate::quantity::{MAX_AMOUNT, ResourceKind, format_quantity, format_thousandths};
use crate::source::{MAX_FILES, SourceFile};

/// The shape of a generated policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateSpec {
    /// Total number of queues, departments included.
    pub queues: usize,
    /// Total number of files: `cluster.kdl` plus `files - 1` team files.
    pub files: usize,
    /// Depth of the queue tree: departments are level 1, every leaf is on level `levels`.
    pub levels: usize,
    /// Top-level department queues, declared in `cluster.kdl`; team files are dealt out to them
    /// in turn, so each needs at least one team file.
    pub departments: usize,
    /// The largest whole-GPU quota of one leaf queue (leaves also get fractions like `0.5`).
    pub gpus_per_leaf: u32,
    /// Seed for quotas, notations and options; the shape does not depend on it.
    pub seed: u64,
}

impl Default for GenerateSpec {
    /// The benchmark shape: 10,000 queues in 4 levels across 200 files.
    fn default() -> Self {
        GenerateSpec::with_shape(10_000, 200, 4)
    }
}

impl GenerateSpec {
    /// A spec with the given shape, one department per 20 files (at least one), 8 GPUs per leaf
    /// at most and seed 0.
    pub fn with_shape(queues: usize, files: usize, levels: usize) -> Self {
        GenerateSpec {
            queues,
            files,
            levels,
            departments: (files / 20).clamp(1, files.saturating_sub(1).max(1)),
            gpus_per_leaf: 8,
            seed: 0,
        }
    }

    /// Why this spec cannot be generated, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        let max_depth = crate::check::MAX_QUEUE_DEPTH;
        if !(2..=max_depth).contains(&self.levels) {
            return Err(format!(
                "levels must be from 2 to {max_depth}, not {}",
                self.levels
            ));
        }
        if !(2..=MAX_FILES).contains(&self.files) {
            return Err(format!(
                "files must be from 2 to {MAX_FILES} (cluster.kdl and at least one team file), not {}",
                self.files
            ));
        }
        if self.departments == 0 || self.departments >= self.files {
            return Err(format!(
                "departments must be from 1 to files - 1 = {} (each department needs a team file), not {}",
                self.files - 1,
                self.departments
            ));
        }
        let least = self.departments + (self.files - 1) * (self.levels - 1);
        if self.queues < least {
            return Err(format!(
                "{} queues cannot fill {} levels in {} files; at least {least} are needed",
                self.queues, self.levels, self.files
            ));
        }
        if self.queues > crate::check::MAX_QUEUES {
            return Err(format!(
                "queues must be at most {}, not {}",
                crate::check::MAX_QUEUES,
                self.queues
            ));
        }
        if self.gpus_per_leaf == 0 {
            return Err("gpus_per_leaf must be at least 1".to_string());
        }
        Ok(())
    }
}

/// Generates the policy files, in path order (`cluster.kdl`, then `teams/team-0001.kdl`…).
///
/// # Panics
///
/// If the spec is invalid (see [`GenerateSpec::validate`]), or so large that a resource total
/// would exceed the largest amount a policy can state.
pub fn generate(spec: &GenerateSpec) -> Vec<SourceFile> {
    if let Err(why) = spec.validate() {
        panic!("invalid GenerateSpec: {why}");
    }
    let mut rng = Rng::new(spec.seed);
    let teams = spec.files - 1;
    let width = digits(teams).max(4);
    let per_file = spec.queues - spec.departments;
    let mut leaves = 0usize;
    let mut team_files = Vec::with_capacity(teams);
    for t in 0..teams {
        let count = per_file / teams + usize::from(t < per_file % teams);
        let prefix = format!("t{:0width$}", t + 1);
        let mut ctx = TreeCtx {
            rng: &mut rng,
            spec,
            leaves: &mut leaves,
        };
        let roots = ctx.forest(&prefix, count, spec.levels - 1, 2);
        team_files.push(roots);
    }

    let mut departments: Vec<Node> = (0..spec.departments)
        .map(|d| Node::new(sibling_name(DEPARTMENTS, d)))
        .collect();
    for (t, roots) in team_files.iter().enumerate() {
        departments[t % spec.departments]
            .children
            .extend(roots.iter().map(summary));
    }
    for (d, dept) in departments.iter_mut().enumerate() {
        dept.display = Some(title(&dept.name));
        dept.priority = Some([100, 100, 200, 150][d % 4]);
        aggregate(dept, &mut rng, 1);
    }

    let mut out = Vec::with_capacity(spec.files);
    out.push(SourceFile::new(
        "cluster.kdl",
        cluster_file(spec, &departments),
    ));
    for (t, roots) in team_files.iter().enumerate() {
        let dept = &departments[t % spec.departments].name;
        let mut text = format!(
            "// Team {:0width$}: queues under department \"{dept}\". Owned by @example/team-{:0width$} (CODEOWNERS).\n",
            t + 1,
            t + 1
        );
        for root in roots {
            text.push('\n');
            render_queue(&mut text, root, Some(dept), 0);
        }
        out.push(SourceFile::new(
            format!("teams/team-{:0width$}.kdl", t + 1),
            text,
        ));
    }
    out
}

/// Department names, in order; more departments than names get a number suffix.
const DEPARTMENTS: &[&str] = &[
    "research",
    "applied-ml",
    "data-science",
    "infrastructure",
    "product",
    "autonomy",
    "health",
    "finance",
    "media",
    "security",
];
/// Sibling names per level below the departments (the last list repeats further down).
const LEVEL_WORDS: &[&[&str]] = &[
    &[
        "llm", "vision", "speech", "recsys", "search", "ads", "robotics", "bio", "ranking",
        "safety", "eval", "agents",
    ],
    &[
        "train", "serve", "data", "research", "batch", "dev", "prod", "eval",
    ],
    &["a", "b", "c", "d", "e", "f", "g", "h"],
];
const PRIORITY_CLASSES: &[(&str, i32, Option<bool>, &str)] = &[
    (
        "production-inference",
        1000,
        Some(false),
        "Customer-facing model serving",
    ),
    ("interactive", 500, None, "Interactive notebooks"),
    (
        "background-training",
        100,
        Some(true),
        "Checkpointed training jobs",
    ),
    ("batch-low", 50, None, "Best-effort batch jobs"),
];

/// `words[i]`, with a number appended once the words run out (`llm`, …, `llm2`).
fn sibling_name(words: &[&str], i: usize) -> String {
    let word = words[i % words.len()];
    match i / words.len() {
        0 => word.to_string(),
        n => format!("{word}{}", n + 1),
    }
}

fn digits(n: usize) -> usize {
    n.to_string().len()
}

fn title(name: &str) -> String {
    name.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next().map_or(String::new(), |f| {
                f.to_ascii_uppercase().to_string() + c.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// SplitMix64: tiny, fast and the same on every platform. Shared with the scheduler's bench,
/// each user salting its seed so their sequences stay apart.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator's own sequence for a seed.
    fn new(seed: u64) -> Self {
        Rng::salted(seed, 0x6b61_692d_706f_6c69)
    }

    /// A sequence for `seed`, told apart from other users' by `salt`.
    pub fn salted(seed: u64, salt: u64) -> Self {
        Rng(seed ^ salt)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `items`, chosen evenly.
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// How a generated queue governs one resource, in stored units.
#[derive(Debug, Clone)]
struct Res {
    quota: i64,
    limit: Limit,
    weight: Option<&'static str>,
    /// How the quantities are written (which of the notations the kind allows).
    style: usize,
}

#[derive(Debug, Clone, Copy)]
enum Limit {
    None,
    Inf,
    Finite(i64),
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    display: Option<String>,
    priority: Option<i32>,
    comment: Option<String>,
    res: [Option<Res>; 3],
    namespaces: Vec<String>,
    default_pc: Option<&'static str>,
    placement: Option<&'static str>,
    min_runtime: Option<&'static str>,
    /// A commented-out (slash-dash) setting, as real files have.
    disabled: Option<&'static str>,
    children: Vec<Node>,
}

impl Node {
    fn new(name: String) -> Self {
        Node {
            name,
            display: None,
            priority: None,
            comment: None,
            res: [None, None, None],
            namespaces: Vec::new(),
            default_pc: None,
            placement: None,
            min_runtime: None,
            disabled: None,
            children: Vec::new(),
        }
    }
}

/// A childless stand-in for a team subtree carrying only its root's resources: what a
/// department's [`aggregate`] needs, without cloning whole subtrees.
fn summary(root: &Node) -> Node {
    let mut n = Node::new(root.name.clone());
    n.res = root.res.clone();
    n
}

struct TreeCtx<'a> {
    rng: &'a mut Rng,
    spec: &'a GenerateSpec,
    leaves: &'a mut usize,
}

impl TreeCtx<'_> {
    /// `count` queues in subtrees `depth` levels deep, named under `prefix`; `level` is the
    /// level of their roots (departments are level 1).
    fn forest(&mut self, prefix: &str, count: usize, depth: usize, level: usize) -> Vec<Node> {
        let k = if depth == 1 {
            count
        } else {
            // Leaves dominate a tree's size, so `count^(1/depth)` subtrees give a bushy shape.
            let ideal = (count as f64).powf(1.0 / depth as f64).round() as usize;
            let jitter = self.rng.below(3);
            (ideal + jitter).saturating_sub(1).clamp(1, count / depth)
        };
        let words = LEVEL_WORDS[(level - 2).min(LEVEL_WORDS.len() - 1)];
        (0..k)
            .map(|i| {
                let share = count / k + usize::from(i < count % k);
                let name = format!("{prefix}-{}", sibling_name(words, i));
                self.subtree(name, share, depth, level)
            })
            .collect()
    }

    fn subtree(&mut self, name: String, count: usize, depth: usize, level: usize) -> Node {
        let mut node = Node::new(name);
        if depth == 1 {
            debug_assert_eq!(count, 1);
            self.leaf(&mut node);
        } else {
            node.children = self.forest(&node.name.clone(), count - 1, depth - 1, level + 1);
            if level == 2 {
                let (team, rest) = node.name.split_once('-').unwrap_or((&node.name, ""));
                node.display = Some(format!("Team {} {}", &team[1..], rest.to_uppercase()));
                node.comment = Some(format!("{} work of team {}.", rest, &team[1..]));
                if self.rng.chance(20) {
                    node.priority = Some(self.rng.pick(&[50, 150, 200]));
                }
                if self.rng.chance(10) {
                    node.min_runtime = Some("preempt=\"10m\" reclaim=\"1h\"");
                }
            } else if self.rng.chance(25) {
                node.display = Some(title(&node.name));
            }
            aggregate(&mut node, self.rng, level);
        }
        node
    }

    fn leaf(&mut self, node: &mut Node) {
        let rng = &mut *self.rng;
        let max = i64::from(self.spec.gpus_per_leaf) * 1000;
        let quota = if rng.chance(25) {
            rng.pick(&[250, 500, 750, 1500, 2500]).min(max)
        } else {
            (rng.below(self.spec.gpus_per_leaf as usize) as i64 + 1) * 1000
        };
        node.res[0] = Some(Res {
            quota,
            limit: leaf_limit(rng, quota),
            weight: rng.chance(30).then(|| rng.pick(&["2", "0.5", "1.5", "3"])),
            style: rng.below(4),
        });
        if rng.chance(40) {
            let quota = rng.pick(&[500, 1000, 2000, 2500, 4000, 8000, 16_000, 32_000]);
            node.res[1] = Some(Res {
                quota,
                limit: leaf_limit(rng, quota),
                weight: None,
                style: rng.below(4),
            });
        }
        if rng.chance(30) {
            const GI: i64 = 1 << 30;
            let quota = rng.pick(&[
                8 * GI,
                16 * GI,
                32 * GI,
                64 * GI,
                128 * GI,
                50_000_000_000,
                100_000_000_000,
                512 << 20,
            ]);
            node.res[2] = Some(Res {
                quota,
                limit: leaf_limit(rng, quota),
                weight: None,
                style: rng.below(4),
            });
        }
        *self.leaves += 1;
        let ns = if node.name.len() <= 63 {
            node.name.clone()
        } else {
            format!("ns-{}", self.leaves)
        };
        if rng.chance(20) && ns.len() + 4 <= 63 && !ns.starts_with("ns-") {
            node.namespaces = vec![ns.clone(), format!("{ns}-dev")];
        } else {
            node.namespaces = vec![ns];
        }
        if rng.chance(5) {
            node.namespaces.push("*".to_string());
        }
        node.default_pc = match rng.below(20) {
            0 => Some("production-inference"),
            1..=3 => Some("interactive"),
            4..=9 => Some("background-training"),
            10 => Some("batch-low"),
            _ => None,
        };
        node.placement = match node.default_pc {
            Some("production-inference") => Some("inference-spread"),
            Some("background-training") if rng.chance(50) => Some("training-pack"),
            _ => None,
        };
        if rng.chance(10) {
            node.min_runtime = Some("reclaim=\"30m\"");
        }
        if rng.chance(3) {
            node.disabled = Some("gpu quota=1000 // old quota, kept for reference");
        }
    }
}

fn leaf_limit(rng: &mut Rng, quota: i64) -> Limit {
    match rng.below(20) {
        0..=7 => Limit::None,
        8..=10 => Limit::Inf,
        11..=14 => Limit::Finite(quota),
        15..=17 => Limit::Finite(quota * 3 / 2),
        _ => Limit::Finite(quota * 2),
    }
}

/// Gives a parent its resources from its children's: each kind that a child governs is governed
/// here with a quota of at least the children's sum.
fn aggregate(node: &mut Node, rng: &mut Rng, level: usize) {
    for (k, kind) in ResourceKind::ALL.into_iter().enumerate() {
        let governed: Vec<i64> = node
            .children
            .iter()
            .filter_map(|c| c.res[k].as_ref().map(|r| r.quota))
            .collect();
        if governed.is_empty() {
            continue;
        }
        let sum: i64 = governed.iter().sum();
        let slack = match kind {
            ResourceKind::Gpu => rng.pick(&[0, 0, 500, 1000, 2000]),
            ResourceKind::Cpu => rng.pick(&[0, 0, 1000, 4000]),
            ResourceKind::Memory => rng.pick(&[0, 0, 1 << 30, 64 << 30]),
        };
        let quota = sum + slack * level as i64;
        let limit = match rng.below(4) {
            0 => Limit::None,
            1 => Limit::Inf,
            _ => Limit::Finite(quota * 2),
        };
        node.res[k] = Some(Res {
            quota,
            limit,
            weight: (kind == ResourceKind::Gpu && rng.chance(30))
                .then(|| rng.pick(&["2", "0.5", "4"])),
            style: rng.below(4),
        });
    }
}

/// A quantity of `kind` in one of the notations the language allows, picked by `style`.
fn quantity(v: i64, kind: ResourceKind, style: usize) -> String {
    match kind {
        ResourceKind::Gpu if style == 3 && v % 1000 == 0 => format!("\"{}\"", v / 1000),
        ResourceKind::Gpu => format_thousandths(v),
        ResourceKind::Cpu if v % 1000 == 0 => match style {
            0 | 1 => (v / 1000).to_string(),
            2 => format!("\"{}\"", v / 1000),
            _ => format!("\"{v}m\""),
        },
        ResourceKind::Cpu => match style {
            0 | 1 => format!("\"{v}m\""),
            _ => format_thousandths(v),
        },
        ResourceKind::Memory if style == 0 => v.to_string(),
        ResourceKind::Memory => format!("\"{}\"", format_quantity(v, kind)),
    }
}

fn render_resource(out: &mut String, kind: ResourceKind, r: &Res) {
    out.push_str(kind.name());
    let _ = write!(out, " quota={}", quantity(r.quota, kind, r.style));
    match r.limit {
        Limit::None => {}
        Limit::Inf => out.push_str(" limit=#inf"),
        Limit::Finite(l) => {
            let _ = write!(out, " limit={}", quantity(l, kind, r.style));
        }
    }
    if let Some(w) = r.weight {
        let _ = write!(out, " weight={w}");
    }
    out.push('\n');
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("    ");
    }
}

fn render_queue(out: &mut String, q: &Node, parent: Option<&str>, depth: usize) {
    if let Some(c) = &q.comment {
        indent(out, depth);
        let _ = writeln!(out, "// {c}");
    }
    indent(out, depth);
    let _ = write!(out, "queue \"{}\"", q.name);
    if let Some(p) = parent {
        let _ = write!(out, " parent=\"{p}\"");
    }
    if let Some(d) = &q.display {
        let _ = write!(out, " display-name=\"{d}\"");
    }
    if let Some(p) = q.priority {
        let _ = write!(out, " priority={p}");
    }
    out.push_str(" {\n");
    for (k, kind) in ResourceKind::ALL.into_iter().enumerate() {
        if let Some(r) = &q.res[k] {
            indent(out, depth + 1);
            render_resource(out, kind, r);
        }
    }
    if let Some(d) = q.disabled {
        indent(out, depth + 1);
        let _ = writeln!(out, "/-{d}");
    }
    if !q.namespaces.is_empty() {
        indent(out, depth + 1);
        out.push_str("namespaces");
        for ns in &q.namespaces {
            let _ = write!(out, " \"{ns}\"");
        }
        out.push('\n');
    }
    if let Some(pc) = q.default_pc {
        indent(out, depth + 1);
        let _ = writeln!(out, "default-priority-class \"{pc}\"");
    }
    if let Some(pl) = q.placement {
        indent(out, depth + 1);
        let _ = writeln!(out, "placement \"{pl}\"");
    }
    if let Some(m) = q.min_runtime {
        indent(out, depth + 1);
        let _ = writeln!(out, "min-runtime {m}");
    }
    for c in &q.children {
        render_queue(out, c, None, depth + 1);
    }
    indent(out, depth);
    out.push_str("}\n");
}

fn cluster_file(spec: &GenerateSpec, departments: &[Node]) -> String {
    let mut out = format!(
        "// Generated by kai-policy-compiler's policy generator (seed {}): {} queues in {} levels across {} files.\n\
         // Cluster-wide settings, priority classes, placements and the departments that team files hang their queues under.\n\n",
        spec.seed, spec.queues, spec.levels, spec.files
    );
    out.push_str("cluster \"gpu-bench\" {\n");
    out.push_str("    scheduler-name \"kai-scheduler\"\n");
    out.push_str("    queue-label \"kai.scheduler/queue\"\n");
    out.push_str("    capacity");
    for (k, kind) in ResourceKind::ALL.into_iter().enumerate() {
        let total: i64 = departments
            .iter()
            .filter_map(|d| d.res[k].as_ref().map(|r| r.quota))
            .sum();
        if departments.iter().all(|d| d.res[k].is_none()) {
            continue;
        }
        // Some headroom, rounded up to whole devices, cores or gibibytes.
        let capacity = match kind {
            ResourceKind::Gpu | ResourceKind::Cpu => (total / 1000 + 1 + total / 10_000) * 1000,
            ResourceKind::Memory => ((total >> 30) + 1 + (total >> 30) / 10) << 30,
        };
        assert!(
            capacity <= MAX_AMOUNT,
            "the generated {} total is too large for a policy; ask for fewer queues",
            kind.name()
        );
        let text = match kind {
            ResourceKind::Gpu => format_thousandths(capacity),
            ResourceKind::Cpu => (capacity / 1000).to_string(),
            ResourceKind::Memory => format!("\"{}\"", format_quantity(capacity, kind)),
        };
        let _ = write!(out, " {}={text}", kind.name());
    }
    out.push('\n');
    out.push_str("    placement gpu=binpack cpu=spread\n");
    out.push_str("    fairness k=1.0 window=\"7d\" half-life=\"24h\"\n");
    out.push_str("    min-runtime preempt=\"5m\" reclaim=\"10m\"\n");
    out.push_str("    oversubscription \"error\"\n}\n\n");
    for (name, value, preemptible, description) in PRIORITY_CLASSES {
        let _ = write!(out, "priority-class \"{name}\" value={value}");
        if let Some(p) = preemptible {
            let _ = write!(out, " preemptible=#{p}");
        }
        let _ = writeln!(out, " description=\"{description}\"");
    }
    out.push_str(
        "\n// Training gangs fill whole nodes and stay inside one NVLink clique.\n\
         placement \"training-pack\" strategy=binpack {\n    topology required=\"nvidia.com/gpu.clique\"\n}\n\
         // Inference replicas spread out so one node failure takes few of them down.\n\
         placement \"inference-spread\" strategy=spread {\n    max-gpus-per-node 2\n    topology preferred=\"topology.kubernetes.io/zone\"\n}\n",
    );
    for d in departments {
        out.push('\n');
        let mut shown = d.clone();
        shown.children.clear();
        shown.comment = Some(format!(
            "Department {}: {} teams hang their queues here.",
            d.display.as_deref().unwrap_or(&d.name),
            d.children.len()
        ));
        render_queue(&mut out, &shown, None, 0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::check;
    use crate::source::SourceSet;

    fn checked(spec: &GenerateSpec) -> (Vec<SourceFile>, crate::check::Checked) {
        let files = generate(spec);
        let set = SourceSet::new(files.clone());
        let result = check(&set, Vec::new());
        (files, result)
    }

    fn assert_shape(spec: &GenerateSpec) {
        let (files, result) = checked(spec);
        let set = SourceSet::new(files.clone());
        assert!(
            result.diagnostics.is_empty(),
            "{spec:?} gave diagnostics:\n{}",
            crate::diagnostics::render_human(
                &result.diagnostics[..result.diagnostics.len().min(5)],
                &set,
                crate::diagnostics::HumanStyle::Plain
            )
        );
        let policy = result.policy.expect("a clean check yields a policy");
        assert_eq!(files.len(), spec.files, "{spec:?}");
        assert_eq!(policy.queues.len(), spec.queues, "{spec:?}");
        let deepest = policy.queues.iter().map(|q| q.depth).max();
        assert_eq!(deepest, Some(spec.levels - 1), "{spec:?}");
        for q in &policy.queues {
            assert_eq!(
                q.is_leaf(),
                q.depth == spec.levels - 1,
                "leaves are on the last level: {}",
                q.name
            );
        }
        let top = policy.queues.iter().filter(|q| q.parent.is_none()).count();
        assert_eq!(top, spec.departments, "{spec:?}");
        assert_eq!(files[0].path, "cluster.kdl");
        assert!(
            files[1..]
                .iter()
                .all(|f| f.path.starts_with("teams/team-") && f.path.ends_with(".kdl"))
        );
    }

    #[test]
    fn the_benchmark_policy_checks_clean_with_the_requested_shape() {
        let spec = GenerateSpec::default();
        assert_eq!((spec.queues, spec.files, spec.levels), (10_000, 200, 4));
        assert_shape(&spec);
    }

    #[test]
    fn other_shapes_and_seeds_check_clean_too() {
        for spec in [
            GenerateSpec::with_shape(60, 6, 4),
            GenerateSpec::with_shape(3, 2, 2),
            GenerateSpec::with_shape(5, 2, 4),
            GenerateSpec {
                departments: 3,
                ..GenerateSpec::with_shape(500, 4, 2)
            },
            GenerateSpec {
                seed: 7,
                ..GenerateSpec::with_shape(2_000, 50, 6)
            },
            GenerateSpec {
                seed: 3,
                gpus_per_leaf: 1,
                ..GenerateSpec::with_shape(300, 30, 3)
            },
            GenerateSpec::with_shape(400, 3, 16),
        ] {
            assert_shape(&spec);
        }
    }

    #[test]
    fn the_policy_uses_varied_quantity_notations() {
        let files = generate(&GenerateSpec::with_shape(1_000, 20, 4));
        let all: String = files.iter().map(|f| f.text.as_str()).collect();
        for needle in [
            "quota=0.5",
            "m\"",
            "Gi\"",
            "limit=#inf",
            "cpu quota=",
            "memory quota=",
            "weight=0.5",
            "\"*\"",
            "/-gpu",
        ] {
            assert!(all.contains(needle), "no {needle} in the generated policy");
        }
    }

    #[test]
    fn the_same_spec_gives_the_same_bytes() {
        let spec = GenerateSpec::with_shape(2_000, 40, 4);
        let a = generate(&spec);
        let b = generate(&spec.clone());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!((&x.path, &x.text), (&y.path, &y.text));
        }
        let other = generate(&GenerateSpec { seed: 1, ..spec });
        assert!(
            a.iter().zip(&other).any(|(x, y)| x.text != y.text),
            "the seed changes the quotas"
        );
    }

    #[test]
    fn impossible_specs_are_explained() {
        let base = GenerateSpec::with_shape(100, 10, 4);
        assert!(base.validate().is_ok());
        assert!(
            GenerateSpec {
                levels: 1,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                levels: 17,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                files: 1,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                departments: 10,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                departments: 0,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                queues: 27,
                ..base.clone()
            }
            .validate()
            .is_err()
        );
        assert!(
            GenerateSpec {
                queues: 28,
                ..base.clone()
            }
            .validate()
            .is_ok()
        );
        assert!(
            GenerateSpec {
                gpus_per_leaf: 0,
                ..base
            }
            .validate()
            .is_err()
        );
    }
}
