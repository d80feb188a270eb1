//! Lowering a checked policy into what gets applied and loaded: KAI Queue objects,
//! PriorityClass objects and the compiled scheduler config. Pure: no I/O.

pub mod config;
pub mod objects;

pub use config::{CompiledPolicy, LoadError, SourceInfo};
pub use objects::{PriorityClassObject, QueueObject};

use serde::Serialize;

use crate::model::Policy;

/// Everything `build` produces for one policy.
#[derive(Debug, Clone)]
pub struct Artifacts {
    /// Queue objects, parents first.
    pub queues: Vec<QueueObject>,
    /// PriorityClass objects.
    pub priority_classes: Vec<PriorityClassObject>,
    /// The compiled scheduler config.
    pub config: CompiledPolicy,
}

/// Why rendering failed (only if the YAML emitter itself fails).
#[derive(Debug, thiserror::Error)]
#[error("cannot render YAML: {0}")]
pub struct RenderError(String);

impl Artifacts {
    /// Lowers a checked policy.
    pub fn new(policy: &Policy, source: SourceInfo) -> Self {
        Artifacts {
            queues: objects::queue_objects(policy),
            priority_classes: objects::priority_class_objects(policy),
            config: CompiledPolicy::new(policy, source),
        }
    }

    /// `queues.yaml`: one YAML document per Queue.
    pub fn queues_yaml(&self) -> Result<String, RenderError> {
        yaml_stream(&self.queues)
    }

    /// `priorityclasses.yaml`: one YAML document per PriorityClass.
    pub fn priority_classes_yaml(&self) -> Result<String, RenderError> {
        yaml_stream(&self.priority_classes)
    }

    /// Every Kubernetes object as one stream (priority classes first, then queues, parents
    /// first), for `kubectl apply -f -`.
    pub fn objects_yaml(&self) -> Result<String, RenderError> {
        let mut out = self.priority_classes_yaml()?;
        out.push_str(&self.queues_yaml()?);
        Ok(out)
    }
}

/// Renders objects as a multi-document YAML stream, each document starting with `---`.
pub fn yaml_stream<T: Serialize>(objects: &[T]) -> Result<String, RenderError> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(object).map_err(|e| RenderError(e.to_string()))?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
