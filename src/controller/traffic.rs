//! How many control messages of each kind mpiexec took in and sent since
//! the failure that began the recovery under way: said with the recovery's
//! line. `mpistages-bench simulate` counts its mpiexec's messages with it
//! too, so that the two can be compared line for line.

use std::collections::BTreeMap;

#[derive(Default)]
pub(crate) struct Traffic {
    /// Kind → (in, out).
    counts: BTreeMap<&'static str, (u64, u64)>,
}

impl Traffic {
    /// A new recovery begins: count from nothing.
    pub fn restart(&mut self) {
        self.counts.clear();
    }

    pub fn received(&mut self, kind: &'static str) {
        self.counts.entry(kind).or_default().0 += 1;
    }

    pub fn sent(&mut self, kind: &'static str, n: u64) {
        self.counts.entry(kind).or_default().1 += n;
    }

    /// `in: 7 halted, 8 ready; out: 7 failure, 8 resume`.
    pub fn summary(&self) -> String {
        let side = |pick: fn(&(u64, u64)) -> u64| {
            let parts: Vec<String> = self
                .counts
                .iter()
                .filter(|(_, c)| pick(c) > 0)
                .map(|(k, c)| format!("{} {k}", pick(c)))
                .collect();
            if parts.is_empty() {
                "none".to_string()
            } else {
                parts.join(", ")
            }
        };
        format!("in: {}; out: {}", side(|c| c.0), side(|c| c.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_kind_and_direction() {
        let mut t = Traffic::default();
        assert_eq!(t.summary(), "in: none; out: none");
        t.received("halted");
        t.received("halted");
        t.sent("resume", 3);
        t.received("ready");
        assert_eq!(t.summary(), "in: 2 halted, 1 ready; out: 3 resume");
        t.restart();
        assert_eq!(t.summary(), "in: none; out: none");
    }
}
