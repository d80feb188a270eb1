use std::path::Path;
fn main() {
    let dir = std::env::args().nth(1).unwrap_or("policies".into());
    let (sources, early) = kai_policy_compiler::source::load_dir(Path::new(&dir)).unwrap();
    let checked = kai_policy_compiler::check::check(&sources, early);
    print!("{}", kai_policy_compiler::diagnostics::render_human(&checked.diagnostics, &sources, kai_policy_compiler::diagnostics::HumanStyle::Plain));
    if let Some(p) = checked.policy { for q in &p.queues { println!("{} parent={:?} depth={} {:?}", q.name, q.parent, q.depth, q.resources.gpu); } }
}
