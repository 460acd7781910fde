//! The rank's side of the control channel: connect to `mpiexec`, pass the
//! bootstrap fence, report finalization and aborts.

use super::env;
use super::proto::{self, ToController, ToRank};
use super::stream::ControlStream;
use crate::sys::socket::NoSignal;
use std::io::{self, Read, Write};
use std::sync::Mutex;

/// What `mpiexec` told this process about the job.
pub struct JobInfo {
    pub rank: usize,
    pub size: usize,
    pub key: Vec<u8>,
    pub generation: u32,
    /// Started because of a failure: the epoch to restore.
    pub restart_epoch: Option<u64>,
    /// Fault injections for this rank (`inject::ENV` encoding).
    pub inject: String,
    control: String,
    /// A spare's control connection, already open.
    stream: Option<ControlStream>,
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
        let size = num(env::SIZE)?;
        let key = std::env::var(env::KEY)
            .map_err(|_| bad(env::KEY))?
            .into_bytes();
        if std::env::var_os(env::SPARE).is_some() {
            return Self::as_spare(control, size, key).map(Some);
        }
        let rank = num(env::RANK)?;
        if size == 0 || rank >= size {
            return Err(bad(env::RANK));
        }
        let generation = std::env::var(env::GENERATION)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(Some(JobInfo {
            rank,
            size,
            key,
            generation,
            restart_epoch: std::env::var(env::RESTART_EPOCH)
                .ok()
                .and_then(|v| v.parse().ok()),
            inject: std::env::var(super::inject::ENV).unwrap_or_default(),
            control,
            stream: None,
        }))
    }

    /// A spare: says so to mpiexec and sleeps until it is made the
    /// replacement of a failed rank. A spare that is not needed is killed
    /// by mpiexec; if mpiexec goes away first, the process ends here
    /// without running any more of the program.
    fn as_spare(control: String, size: usize, key: Vec<u8>) -> io::Result<JobInfo> {
        let mut stream = ControlStream::connect(&control)?;
        proto::send(
            &mut NoSignal::new(&stream),
            &ToController::Spare {
                key: key.clone(),
                pid: std::process::id(),
            },
        )?;
        let Ok(ToRank::Assign {
            rank,
            generation,
            epoch,
            inject,
        }) = proto::recv(&mut stream)
        else {
            // SAFETY: _exit takes no pointers and ends the process at once
            // (no atexit handlers of a program that never got its turn).
            unsafe { libc::_exit(0) }
        };
        if rank as usize >= size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "mpiexec assigned a rank outside the job",
            ));
        }
        Ok(JobInfo {
            rank: rank as usize,
            size,
            key,
            generation,
            restart_epoch: Some(epoch),
            inject,
            control,
            stream: Some(stream),
        })
    }
}

pub struct Client {
    stream: Mutex<ControlStream>,
}

/// The bootstrap fence's answer.
pub struct Welcome {
    /// Where each rank listens (`None`: that process has ended).
    pub addrs: Vec<Option<std::net::SocketAddr>>,
    /// The generation each rank's process joined at.
    pub born: Vec<u32>,
    /// The generation this process belongs to (a replacement may be welcomed
    /// into a newer one than it was started for).
    pub generation: u32,
    /// For a replacement: the epoch to restore.
    pub epoch: u64,
    /// Ranks that joined together with this one, in order.
    pub fresh: Vec<u32>,
}

impl Welcome {
    /// Whether this process opens the connection to `peer`: to every rank
    /// that was there before it, and to lower ranks that joined with it.
    pub fn connects_to(&self, me: usize, peer: usize) -> bool {
        peer != me && (peer < me || self.fresh.binary_search(&(peer as u32)).is_err())
    }
}

impl Client {
    /// Says hello with this rank's transport address and waits at the
    /// bootstrap fence for everyone's addresses.
    pub fn bootstrap(job: &JobInfo, addr: &str) -> io::Result<(Client, Welcome)> {
        let mut stream = match &job.stream {
            Some(s) => s.try_clone()?,
            None => ControlStream::connect(&job.control)?,
        };
        proto::send(
            &mut NoSignal::new(&stream),
            &ToController::Hello {
                key: job.key.clone(),
                rank: job.rank as u32,
                generation: job.generation,
                addr: addr.to_string(),
            },
        )?;
        let ToRank::Welcome {
            hosts,
            addrs,
            born,
            generation,
            epoch,
            mut fresh,
        } = proto::recv_within(&mut stream, proto::welcome_limit(job.size))?
        else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "expected a welcome from mpiexec",
            ));
        };
        if addrs.len() != job.size || born.len() != job.size {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "address table of the wrong size",
            ));
        }
        let addrs = proto::welcome_addresses(&hosts, &addrs)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("welcome: {e}")))?;
        // Looked up once per peer (a linear search was O(ranks²) a rank).
        fresh.sort_unstable();
        Ok((
            Client {
                stream: Mutex::new(stream),
            },
            Welcome {
                addrs,
                born,
                generation,
                epoch,
                fresh,
            },
        ))
    }

    /// The receiving side, for the progress engine (the socket becomes
    /// non-blocking for both sides).
    pub fn reader(&self) -> io::Result<ControlReader> {
        let s = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let stream = s.try_clone()?;
        stream.set_nonblocking(true)?;
        Ok(ControlReader {
            stream,
            dec: proto::Decoder::default(),
        })
    }

    pub fn send(&self, msg: &ToController) -> io::Result<()> {
        let bytes = proto::encode(msg);
        let s = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        let mut off = 0;
        while off < bytes.len() {
            match NoSignal::new(&*s).write(&bytes[off..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => off += n,
                // Control messages are tiny; a full socket drains quickly.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_micros(100))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Reads control messages from `mpiexec` without blocking.
pub struct ControlReader {
    stream: ControlStream,
    dec: proto::Decoder,
}

impl ControlReader {
    pub fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.stream.as_raw_fd()
    }

    /// Appends every complete message available now. `Err` when the
    /// connection is closed or carries garbage.
    pub fn read(&mut self, out: &mut Vec<ToRank>) -> io::Result<()> {
        let mut buf = [0u8; 1024];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.dec.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        while let Some(m) = self.dec.next_message::<ToRank>()? {
            out.push(m);
        }
        Ok(())
    }
}
