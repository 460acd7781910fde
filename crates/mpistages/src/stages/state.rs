//! The encoded MPI state of one rank, as saved in its checkpoint's
//! `MpiState` section (postcard, versioned). Tables are saved by handle, so
//! a restored handle names the same object it named before. Decoding checks
//! every value against the job before anything is used.

use super::StagesError;
use serde::{Deserialize, Serialize};

/// Bumped whenever the layout below changes.
pub const STATE_VERSION: u32 = 2;
/// Far above what any application creates; a larger table is corrupt.
const MAX_HANDLES: usize = 1 << 20;

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct CommState {
    pub context: u32,
    /// World ranks in group order.
    pub members: Vec<u32>,
    pub errhandler: i32,
    /// `MPI_Comm_set_name`'s name.
    pub name: String,
    /// An inter-communicator's remote group (world ranks).
    pub remote: Option<Vec<u32>>,
    /// The API layer's topology, encoded by it.
    pub topology: Option<Vec<u8>>,
}

/// The communicators and groups a library's serialize handler handed over.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub struct LibraryHandles {
    pub comms: Vec<i32>,
    pub groups: Vec<i32>,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct MpiState {
    pub version: u32,
    pub rank: u32,
    pub size: u32,
    pub epoch: u64,
    pub max_context: u32,
    /// By handle; `None` for a free slot.
    pub comms: Vec<Option<CommState>>,
    pub groups: Vec<Option<Vec<u32>>>,
    /// Derived datatypes by handle, each encoded by the API layer.
    pub types: Vec<(i32, Vec<u8>)>,
    pub library: Vec<LibraryHandles>,
}

impl MpiState {
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("MPI state always serializes")
    }

    /// Decodes and checks a saved state for a job of `size` ranks.
    pub fn decode(bytes: &[u8], size: usize) -> Result<MpiState, StagesError> {
        let bad = |why: String| Err(StagesError::Malformed(why));
        let st: MpiState = match postcard::from_bytes(bytes) {
            Ok(st) => st,
            Err(e) => return bad(format!("malformed MPI state: {e}")),
        };
        if st.version != STATE_VERSION {
            return bad(format!(
                "MPI state version {} is not supported (this build reads {STATE_VERSION})",
                st.version
            ));
        }
        if st.size as usize != size || st.rank >= st.size {
            return bad(format!(
                "MPI state of rank {} in a job of {}, expected a job of {size}",
                st.rank, st.size
            ));
        }
        if st.comms.len() > MAX_HANDLES
            || st.groups.len() > MAX_HANDLES
            || st.types.len() > MAX_HANDLES
        {
            return bad("MPI state has absurdly many handles".into());
        }
        let in_job = |m: &[u32]| m.iter().all(|&r| r < st.size);
        for c in st.comms.iter().flatten() {
            if c.members.is_empty() || !in_job(&c.members) || !c.members.contains(&st.rank) {
                return bad("MPI state holds an invalid communicator".into());
            }
            if c.context >= st.max_context {
                return bad("MPI state holds a context id above its maximum".into());
            }
        }
        if !st.groups.iter().flatten().all(|g| in_job(g)) {
            return bad("MPI state holds a group with ranks outside the job".into());
        }
        Ok(st)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> MpiState {
        MpiState {
            version: STATE_VERSION,
            rank: 1,
            size: 4,
            epoch: 3,
            max_context: 8,
            comms: vec![
                None,
                Some(CommState {
                    context: 0,
                    members: vec![0, 1, 2, 3],
                    errhandler: 2,
                    name: "MPI_COMM_WORLD".into(),
                    remote: None,
                    topology: None,
                }),
                Some(CommState {
                    context: 2,
                    members: vec![1],
                    errhandler: 1,
                    name: String::new(),
                    remote: Some(vec![0]),
                    topology: Some(vec![1, 2]),
                }),
            ],
            groups: vec![None, Some(vec![])],
            types: vec![],
            library: vec![LibraryHandles {
                comms: vec![3],
                groups: vec![],
            }],
        }
    }

    #[test]
    fn round_trip_and_checks() {
        let s = sample();
        let b = s.encode();
        assert!(
            b.len() < 128,
            "a WORLD-only state is tiny: {} bytes",
            b.len()
        );
        assert_eq!(MpiState::decode(&b, 4).unwrap(), s);
        assert!(MpiState::decode(&b, 5).is_err());
        let mut bad = s.clone();
        bad.comms[2].as_mut().unwrap().members = vec![7];
        assert!(MpiState::decode(&bad.encode(), 4).is_err());
        let mut bad = s;
        bad.version = 99;
        assert!(MpiState::decode(&bad.encode(), 4).is_err());
    }

    proptest! {
        #[test]
        fn garbage_is_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = MpiState::decode(&bytes, 4);
        }
    }
}
