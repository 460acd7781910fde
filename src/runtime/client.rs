//! The rank's side of the control channel: connect to `mpiexec`, pass the
//! bootstrap fence, report finalization and aborts.

use super::env;
use super::proto::{self, ToController, ToRank};
use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

/// What `mpiexec` told this process about the job.
pub struct JobInfo {
    pub rank: usize,
    pub size: usize,
    pub key: Vec<u8>,
    pub generation: u32,
    control: String,
}

impl JobInfo {
    /// Reads the job from the environment; `None` when started without
    /// `mpiexec` (a singleton job of one process).
    pub fn from_env() -> io::Result<Option<JobInfo>> {
        let Ok(control) = std::env::var(env::CONTROL) else {
            return Ok(None);
        };
        let bad = |what: &str| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid {what} in the environment"),
            )
        };
        let num = |name: &str| -> io::Result<usize> {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(name))
        };
        let rank = num(env::RANK)?;
        let size = num(env::SIZE)?;
        if size == 0 || rank >= size {
            return Err(bad(env::RANK));
        }
        let key = std::env::var(env::KEY)
            .map_err(|_| bad(env::KEY))?
            .into_bytes();
        let generation = std::env::var(env::GENERATION)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(Some(JobInfo {
            rank,
            size,
            key,
            generation,
            control,
        }))
    }
}

pub struct Client {
    stream: Mutex<UnixStream>,
}

impl Client {
    /// Says hello with this rank's transport address and waits at the
    /// bootstrap fence for everyone's addresses.
    pub fn bootstrap(job: &JobInfo, addr: &str) -> io::Result<(Client, Vec<String>)> {
        let mut stream = UnixStream::connect(&job.control)?;
        proto::send(
            &mut stream,
            &ToController::Hello {
                key: job.key.clone(),
                rank: job.rank as u32,
                generation: job.generation,
                addr: addr.to_string(),
            },
        )?;
        let ToRank::Welcome { addrs } = proto::recv(&mut stream)?;
        if addrs.len() != job.size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "address table of the wrong size",
            ));
        }
        Ok((
            Client {
                stream: Mutex::new(stream),
            },
            addrs,
        ))
    }

    pub fn send(&self, msg: &ToController) -> io::Result<()> {
        let mut s = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        proto::send(&mut *s, msg)
    }
}
