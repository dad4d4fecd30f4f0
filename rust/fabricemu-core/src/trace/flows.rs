//! flows.arrow: one row per flow.

/// What the engine knows of one flow at the end of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowRow {
    pub flow_id: u64,
    pub src: u32,
    pub dst: u32,
    pub size_bytes: u64,
    pub start_ps: u64,
    /// When the last byte reached the receiver; `None` if it had not when the run stopped.
    pub finish_ps: Option<u64>,
    /// FCT of the flow alone in the fabric on its path.
    pub ideal_fct_ps: u64,
    /// Index into the scenario's workloads.
    pub workload: u32,
    pub packets_sent: u64,
    pub retransmits: u64,
    pub drops: u64,
}
