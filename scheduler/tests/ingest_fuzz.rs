//! Property-based fuzzing of the cluster-file ingest through its public entry point,
//! `kai_scheduler::ingest::parse_cluster`: any bytes, and the example cluster file with bytes
//! spliced in or cut out, are read without a panic and without hanging, and an error names the
//! file (and says what is wrong).
//!
//! `PROPTEST_CASES` raises the number of cases (default 256); `docs/testing.md` has the command
//! for a long run.

use std::sync::mpsc;
use std::time::Duration;

use kai_scheduler::ingest::{Options, parse_cluster};
use proptest::prelude::*;

/// How long one input may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(30);

fn example() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/cluster.yaml");
    std::fs::read_to_string(path).expect("examples/cluster.yaml")
}

fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let valid = example();
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..1024),
        (
            any::<usize>(),
            prop::collection::vec(any::<u8>(), 0..24),
            0..256usize
        )
            .prop_map(move |(at, insert, cut)| {
                let mut bytes = valid.clone().into_bytes();
                let at = at % (bytes.len() + 1);
                let end = (at + cut).min(bytes.len());
                bytes.splice(at..end, insert);
                bytes
            }),
    ]
}

/// Reads one input on a thread of its own: a panic is reported as a failure, and so is an input
/// that takes longer than [`HANG`].
fn ingest(text: String) -> Result<(), String> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let options = Options {
            queue_label: "kai.scheduler/queue".into(),
            scheduler_name: Some("kai-scheduler".into()),
            origin: None,
            complete_owner_kinds: Vec::new(),
        };
        let outcome = std::panic::catch_unwind(|| parse_cluster("cluster.yaml", &text, &options))
            .map_err(|_| "parse_cluster panicked".to_string());
        let _ = send.send(outcome);
    });
    match receive.recv_timeout(HANG) {
        Ok(Ok(Ok(_))) => Ok(()),
        Ok(Ok(Err(e))) if e.file == "cluster.yaml" && !e.message.is_empty() => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("an error that does not name the file: {e:?}")),
        Ok(Err(panic)) => Err(panic),
        Err(_) => Err(format!("no answer within {} s", HANG.as_secs())),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // PROPTEST_CASES raises it (proptest reads it into the default config).
        cases: ProptestConfig::default().cases.max(256),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_cluster_file_is_read_or_refused_by_name(bytes in hostile()) {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Err(why) = ingest(text.clone()) {
            prop_assert!(false, "{why}\ninput:\n{text}");
        }
    }
}

#[test]
fn the_example_cluster_file_is_read() {
    assert_eq!(ingest(example()), Ok(()));
}
