//! `MPI_Finalize`'s barrier as mpiexec holds it, without processes or
//! sockets: the ranks of a world (the job's first ranks, or one spawn's)
//! each say they are in it, with the newest epoch they have durable; once
//! every rank of that world has, each hears the least of those epochs.
//!
//! Carried by the control plane rather than by an allreduce among the
//! ranks: that allreduce made log2(ranks) connections per rank at the very
//! end of a job, half of a 1024-rank trivial program's time here.
//! Failures need no handling: once a rank is in `MPI_Finalize` a failure
//! ends the job (`recoveries::refusal`), and a world whose barrier waits
//! has a rank in it.

use std::collections::HashMap;
use std::ops::Range;

/// The open barriers, by world.
#[derive(Default)]
pub struct FinalizeBarriers {
    open: HashMap<usize, Open>,
}

/// A world's barrier: who is in it, and the least durable epoch so far.
struct Open {
    arrived: Vec<bool>,
    count: usize,
    durable: u64,
}

/// What an arrival did.
#[derive(Debug, PartialEq)]
pub enum Arrival {
    /// Others of the world are still to come.
    Wait,
    /// The last one came: the ranks to answer, and the least epoch.
    Done { ranks: Range<usize>, durable: u64 },
}

impl FinalizeBarriers {
    /// Rank `rank` of `world` (job process ids) is in the barrier with
    /// `durable`. An error when it already was (a broken process).
    pub fn arrive(
        &mut self,
        rank: usize,
        world: Range<usize>,
        durable: u64,
    ) -> Result<Arrival, String> {
        if !world.contains(&rank) {
            return Err(format!("rank {rank} is not in its world {world:?}"));
        }
        let open = self.open.entry(world.start).or_insert_with(|| Open {
            arrived: vec![false; world.len()],
            count: 0,
            durable: u64::MAX,
        });
        if open.arrived.len() != world.len() {
            return Err(format!(
                "rank {rank}'s world {world:?} overlaps another's barrier"
            ));
        }
        let me = &mut open.arrived[rank - world.start];
        if *me {
            return Err(format!("rank {rank} entered MPI_Finalize's barrier twice"));
        }
        *me = true;
        open.count += 1;
        open.durable = open.durable.min(durable);
        if open.count < world.len() {
            return Ok(Arrival::Wait);
        }
        let durable = open.durable;
        self.open.remove(&world.start);
        Ok(Arrival::Done {
            ranks: world,
            durable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_rank_of_a_world_ends_its_barrier_with_the_least_epoch() {
        let mut b = FinalizeBarriers::default();
        assert_eq!(b.arrive(2, 0..3, 7), Ok(Arrival::Wait));
        assert_eq!(b.arrive(0, 0..3, 4), Ok(Arrival::Wait));
        assert_eq!(
            b.arrive(1, 0..3, 9),
            Ok(Arrival::Done {
                ranks: 0..3,
                durable: 4
            })
        );
    }

    #[test]
    fn worlds_are_apart() {
        let mut b = FinalizeBarriers::default();
        // A spawned world of 2 (ids 3 and 4) beside the job's 3 ranks.
        assert_eq!(b.arrive(3, 3..5, 0), Ok(Arrival::Wait));
        assert_eq!(b.arrive(0, 0..3, 1), Ok(Arrival::Wait));
        assert_eq!(
            b.arrive(4, 3..5, 2),
            Ok(Arrival::Done {
                ranks: 3..5,
                durable: 0
            })
        );
        assert_eq!(
            b.arrive(1, 0..3, 1),
            Ok(Arrival::Wait),
            "the first world waits"
        );
    }

    #[test]
    fn a_rank_that_comes_twice_or_from_elsewhere_is_refused() {
        let mut b = FinalizeBarriers::default();
        assert_eq!(b.arrive(1, 0..2, 0), Ok(Arrival::Wait));
        assert!(b.arrive(1, 0..2, 0).is_err());
        assert!(b.arrive(5, 0..2, 0).is_err());
        assert!(
            b.arrive(0, 0..3, 0).is_err(),
            "another world at the same start"
        );
        assert_eq!(
            b.arrive(0, 0..2, 0),
            Ok(Arrival::Done {
                ranks: 0..2,
                durable: 0
            })
        );
    }

    #[test]
    fn a_world_of_one_is_done_at_once() {
        let mut b = FinalizeBarriers::default();
        assert_eq!(
            b.arrive(0, 0..1, 5),
            Ok(Arrival::Done {
                ranks: 0..1,
                durable: 5
            })
        );
    }
}
