//! `AppState`: what the HTTP adapter's handlers share: the gate, the event
//! hub that feeds SSE streams, metrics and the settings.

use std::sync::Arc;

use actiongate_gate::Gate;

use crate::config::Settings;
use crate::connectors::Connectors;
use crate::metrics::Metrics;
use crate::sse::Hub;

/// Shared state, cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    gate: Gate,
    settings: Settings,
    hub: Hub,
    metrics: Metrics,
    connectors: Option<Arc<Connectors>>,
}

impl AppState {
    /// The state of the HTTP adapter over `gate`.
    pub fn new(
        gate: Gate,
        settings: Settings,
        hub: Hub,
        metrics: Metrics,
        connectors: Option<Arc<Connectors>>,
    ) -> AppState {
        AppState(Arc::new(Inner {
            gate,
            settings,
            hub,
            metrics,
            connectors,
        }))
    }

    /// The chat connectors, when any is configured.
    pub fn connectors(&self) -> Option<&Arc<Connectors>> {
        self.0.connectors.as_ref()
    }

    /// The gate.
    pub fn gate(&self) -> &Gate {
        &self.0.gate
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.0.settings
    }

    /// The event hub that feeds event streams.
    pub fn events_hub(&self) -> &Hub {
        &self.0.hub
    }

    /// Metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.0.metrics
    }
}
