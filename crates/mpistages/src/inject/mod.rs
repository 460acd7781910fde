//! Fault injection inside a rank: the specs `mpiexec --inject` armed for
//! this process (see `control::inject` for the syntax), counted and fired
//! here. An MPI entry point pays one relaxed atomic load (`counting_calls`)
//! unless a `call=NAME:N` spec is armed.
//!
//! Owns: this process's armed specs and call counts, and its own death.
//! Must not touch: MPI state or checkpoints (what a spec damages is done
//! by its caller, which owns the store). Calls only `control` and `sys`.

use crate::control::client::Client;
use crate::control::inject::{decode_for_rank, Damage, RankInject, Trigger};
use crate::control::proto::ToController;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

struct Armed {
    specs: Vec<RankInject>,
    calls: HashMap<String, u64>,
}

static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
/// Some spec counts calls: MPI entry points skip the bookkeeping without.
static COUNTING: AtomicBool = AtomicBool::new(false);

fn armed() -> std::sync::MutexGuard<'static, Option<Armed>> {
    ARMED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Arms the specs mpiexec handed this process (`inject::ENV` encoding);
/// replaces any armed before.
pub fn arm(encoded: &str) {
    let specs = decode_for_rank(encoded);
    let counting = specs
        .iter()
        .any(|i| matches!(i.trigger, Trigger::Call { .. }));
    *armed() = Some(Armed {
        specs,
        calls: HashMap::new(),
    });
    COUNTING.store(counting, Ordering::Relaxed);
}

/// Whether any call-count spec is armed (the cheap check of every call).
#[inline]
pub fn counting_calls() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

fn find(pred: impl Fn(&RankInject) -> bool) -> Option<usize> {
    armed()
        .as_ref()?
        .specs
        .iter()
        .find(|i| pred(i))
        .map(|i| i.index)
}

/// Counts a call of `name`; the spec that says this process dies now.
pub fn count_call(name: &str) -> Option<usize> {
    let mut guard = armed();
    let a = guard.as_mut()?;
    let n = a.calls.entry(name.to_string()).or_insert(0);
    *n += 1;
    let n = *n;
    a.specs
        .iter()
        .find(|i| matches!(&i.trigger, Trigger::Call { name: f, nth } if f == name && *nth == n))
        .map(|i| i.index)
}

/// The spec firing right after checkpoint `epoch` was written.
pub fn after_checkpoint(epoch: u64) -> Option<usize> {
    find(|i| i.trigger == Trigger::Checkpoint(epoch))
}

/// The spec firing while checkpoint `epoch` is written.
pub fn while_writing(epoch: u64) -> Option<usize> {
    find(|i| i.trigger == Trigger::Writing(epoch))
}

/// What spec `index` harms as the rank dies.
pub fn damage_of(index: usize) -> Damage {
    armed()
        .as_ref()
        .and_then(|a| a.specs.iter().find(|i| i.index == index))
        .map_or(Damage::None, |i| i.damage)
}

/// Tells mpiexec that spec `spec` fired, then dies the way a crashed node
/// does (SIGKILL: no handler, no exit code, no flush of MPI state).
pub fn kill_self(client: Option<&Client>, spec: usize) -> ! {
    if let Some(c) = client {
        let _ = c.send(&ToController::Injecting { spec });
    }
    crate::sys::process::kill_self()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::inject::{encode_for_rank, parse};

    #[test]
    fn call_specs_fire_on_their_nth_call_only() {
        let specs = [
            parse("rank=0,call=MPI_Send:3").unwrap(),
            parse("rank=0,checkpoint=2,damage=node").unwrap(),
        ];
        arm(&encode_for_rank(&[(0, &specs[0]), (1, &specs[1])]));
        assert!(counting_calls());
        assert_eq!(count_call("MPI_Send"), None);
        assert_eq!(count_call("MPI_Recv"), None);
        assert_eq!(count_call("MPI_Send"), None);
        assert_eq!(count_call("MPI_Send"), Some(0));
        assert_eq!(count_call("MPI_Send"), None);
        assert_eq!(after_checkpoint(2), Some(1));
        assert_eq!(after_checkpoint(3), None);
        assert_eq!(while_writing(2), None);
        assert_eq!(damage_of(1), Damage::Node);
        assert_eq!(damage_of(0), Damage::None);
        arm("");
        assert!(!counting_calls());
        assert_eq!(count_call("MPI_Send"), None);
    }
}
