//! RED/ECN marking (the DCQCN paper's CP): probability 0 below Kmin, rising linearly to Pmax at
//! Kmax, 1 above Kmax, on the egress queue depth of the packet's priority.

use crate::config::EcnSpec;

/// Marking probability at queue depth `queue_bytes`.
#[inline]
pub fn mark_probability(spec: &EcnSpec, queue_bytes: u64) -> f64 {
    if queue_bytes <= spec.kmin_bytes {
        0.0
    } else if queue_bytes > spec.kmax_bytes {
        1.0
    } else {
        spec.pmax * (queue_bytes - spec.kmin_bytes) as f64
            / (spec.kmax_bytes - spec.kmin_bytes).max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn red_ramp() {
        let s = EcnSpec {
            kmin_bytes: 5_000,
            kmax_bytes: 200_000,
            pmax: 0.01,
            on_dequeue: true,
            priorities: 8,
        };
        assert_eq!(mark_probability(&s, 4_000), 0.0);
        assert_eq!(mark_probability(&s, 5_000), 0.0);
        assert!((mark_probability(&s, 102_500) - 0.005).abs() < 1e-12);
        assert!((mark_probability(&s, 200_000) - 0.01).abs() < 1e-12);
        assert_eq!(mark_probability(&s, 200_001), 1.0);
        // DCTCP style: Kmin = Kmax = K, Pmax = 1.
        let d = EcnSpec {
            kmin_bytes: 30_000,
            kmax_bytes: 30_000,
            pmax: 1.0,
            on_dequeue: true,
            priorities: 8,
        };
        assert_eq!(mark_probability(&d, 30_000), 0.0);
        assert_eq!(mark_probability(&d, 30_001), 1.0);
    }
}
