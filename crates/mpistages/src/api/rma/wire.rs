//! What an origin asks a window's agent (one message per operation on
//! the agents' context, tag `REQUEST`): the window's id, a header
//! (postcard), then the operation's packed data. Replies go back on the tag the request names;
//! the origin has posted its receive for it before asking. Malformed
//! messages decode to errors, never panics.

use crate::api::consts::err;
use crate::api::datatype::Datatype;
use crate::api::error::{MpiError, MpiResult};

/// The tag of requests to an agent.
pub const REQUEST: i32 = 1;
/// The tag of `MPI_Win_post`'s notices (target to origin).
pub const POST: i32 = 2;
/// The tag of `MPI_Win_complete`'s notices (origin to target).
pub const COMPLETE: i32 = 3;
/// Reply tags are taken from here on, one per outstanding reply.
pub const FIRST_REPLY: i32 = 16;

/// Where at the target: a displacement in its displacement units (an
/// address for a dynamic window), `count` elements of `dtype` from there.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Place {
    pub disp: u64,
    pub count: u64,
    /// Shared with the origin's call (no copy of the type per operation).
    pub dtype: std::sync::Arc<Datatype>,
}

/// An operation at the target.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub enum Request {
    /// The data follows.
    Put(Place),
    /// The target's bytes go back on `reply`.
    Get {
        at: Place,
        reply: i32,
    },
    /// `target = target op data`, element by element of the predefined
    /// type `elem` (the data follows; `MPI_REPLACE` puts, `MPI_NO_OP`
    /// leaves the target).
    Accumulate {
        at: Place,
        elem: Datatype,
        op: i32,
    },
    /// As `Accumulate`, the target's bytes before it going back on `reply`
    /// (`MPI_Get_accumulate`, `MPI_Fetch_and_op`).
    GetAccumulate {
        at: Place,
        elem: Datatype,
        op: i32,
        reply: i32,
    },
    /// `MPI_Compare_and_swap` of one element: the data is the new value
    /// then the one to compare with; the old value goes back on `reply`.
    CompareAndSwap {
        at: Place,
        reply: i32,
    },
    /// Answered on `reply` once every earlier request of this origin is
    /// done (the agent does them in order, so at once).
    Flush {
        reply: i32,
    },
    Lock {
        exclusive: bool,
        reply: i32,
    },
    /// Releases this origin's lock; answered when released.
    Unlock {
        reply: i32,
    },
}

/// A request to window `win` and its data as one message.
pub fn encode(win: u32, req: &Request, data: &[u8]) -> Vec<u8> {
    let head = postcard::to_stdvec(req).expect("requests always serialize");
    let mut m = Vec::with_capacity(8 + head.len() + data.len());
    m.extend_from_slice(&win.to_le_bytes());
    m.extend_from_slice(&(head.len() as u32).to_le_bytes());
    m.extend_from_slice(&head);
    m.extend_from_slice(data);
    m
}

/// A message as its window, request and data.
pub fn decode(m: &[u8]) -> MpiResult<(u32, Request, &[u8])> {
    let bad = |why: &str| MpiError::new(err::INTERN, format!("malformed RMA request: {why}"));
    let word = |i: usize| {
        m.get(i..i + 4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .ok_or_else(|| bad("shorter than its window and header length"))
    };
    let (win, len) = (word(0)?, word(4)? as usize);
    let head = 8usize
        .checked_add(len)
        .and_then(|end| m.get(8..end))
        .ok_or_else(|| bad("shorter than its header"))?;
    let req: Request = postcard::from_bytes(head).map_err(|e| bad(&e.to_string()))?;
    Ok((win, req, &m[8 + len..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::consts::dt;

    fn int() -> Datatype {
        Datatype::predefined(dt::INT).unwrap()
    }

    #[test]
    fn requests_round_trip_with_their_data() {
        let at = Place {
            disp: 12,
            count: 3,
            dtype: std::sync::Arc::new(int()),
        };
        for (req, data) in [
            (Request::Put(at.clone()), vec![1u8; 12]),
            (
                Request::GetAccumulate {
                    at: at.clone(),
                    elem: int(),
                    op: 7,
                    reply: 99,
                },
                vec![2u8; 12],
            ),
            (Request::Unlock { reply: 16 }, vec![]),
        ] {
            let m = encode(77, &req, &data);
            let (w, r, d) = decode(&m).unwrap();
            assert_eq!(w, 77);
            assert_eq!(format!("{r:?}"), format!("{req:?}"));
            assert_eq!(d, &data[..]);
        }
    }

    #[test]
    fn malformed_requests_are_errors() {
        let m = encode(3, &Request::Flush { reply: 20 }, &[]);
        for cut in 0..m.len() {
            assert!(decode(&m[..cut]).is_err(), "cut at {cut}");
        }
        let mut wrong = m.clone();
        wrong[8] = 200;
        assert!(decode(&wrong).is_err());
        let mut long = m;
        long[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode(&long).is_err());
    }
}
