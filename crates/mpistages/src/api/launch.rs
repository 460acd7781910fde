//! How this process joined its job, at `MPI_Init`: started by `mpiexec`
//! (its control channel: rank, addresses, failures, recoveries), started
//! directly by Slurm's `srun --mpi=pmi2` (PMI-2: rank, size and addresses
//! only, no recovery), or alone (a singleton job of one process).

use super::error::{fail, MpiError, MpiResult};
use super::RecoveryMode;
use super::{env_usize, io_err};
use crate::api::consts::err;
use crate::control::client::{Client, JobInfo};
use crate::control::pmi2::Pmi2;
use crate::sys::epoll::Epoll;
use crate::transport::tcp::{Links, Tcp, TcpConfig};
use crate::transport::Transport;
use std::fs::File;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

/// A job started by `srun`: its PMI-2 connection, kept for `MPI_Abort`
/// and `MPI_Finalize`.
pub type Srun = Mutex<Pmi2<File>>;

/// This process's place in its job.
pub struct Joined {
    pub rank: usize,
    pub size: usize,
    pub generation: u32,
    pub client: Option<Arc<Client>>,
    pub srun: Option<Srun>,
    pub transport: Option<Box<dyn Transport>>,
    /// For a replacement: the epoch to restore.
    pub restore_epoch: u64,
    /// Names the job's checkpoint directories.
    pub job_id: String,
    pub injections: String,
    /// Started because of a failure (announced by mpiexec).
    pub replacement: bool,
}

/// The TCP transport of rank `me` of `ranks`, listening on `ip` (never a
/// wildcard address: only the host's own address toward its peers).
fn tcp(
    me: usize,
    ranks: usize,
    key: Vec<u8>,
    generation: u32,
    ip: IpAddr,
    epoll: &Arc<Epoll>,
) -> MpiResult<Tcp> {
    Tcp::new(
        TcpConfig {
            me,
            ranks,
            key,
            generation,
            eager_limit: env_usize("MPISTAGES_EAGER_LIMIT", 64 << 10)?,
            fragment_size: env_usize("MPISTAGES_FRAGMENT", 1 << 20)?.clamp(4096, 16 << 20),
            bind: SocketAddr::new(ip, 0),
            congestion: std::env::var("MPISTAGES_TCP_CC").unwrap_or_else(|_| "reno".into()),
            links: links_from_env()?,
            shm_ring: shm_ring_from_env()?,
        },
        epoll.clone(),
    )
    .map_err(io_err("starting the TCP transport"))
}

/// `MPISTAGES_TRANSPORT`: which connections a rank makes.
fn links_from_env() -> MpiResult<Links> {
    let v = std::env::var("MPISTAGES_TRANSPORT").unwrap_or_default();
    Links::parse(&v).ok_or_else(|| {
        MpiError::new(
            err::ARG,
            format!("MPISTAGES_TRANSPORT='{v}': expected auto, or a list of tcp, shm and udp"),
        )
    })
}

/// `MPISTAGES_CONNECT`: `lazy` (the default: a pair connects at its first
/// message) or `eager` (every pair at `MPI_Init`, as Open MPI's
/// `mpi_preconnect_mpi`: start-up pays for all of them, the first message
/// of each pair for none).
fn connect_eagerly() -> MpiResult<bool> {
    match std::env::var("MPISTAGES_CONNECT")
        .unwrap_or_default()
        .as_str()
    {
        "" | "lazy" => Ok(false),
        "eager" => Ok(true),
        v => fail(
            err::ARG,
            format!("MPISTAGES_CONNECT='{v}': expected lazy or eager"),
        ),
    }
}

/// `MPISTAGES_SHM_RING`: bytes of each shared-memory ring (a power of two);
/// by default from the number of ranks on this host.
fn shm_ring_from_env() -> MpiResult<usize> {
    let local = std::env::var(crate::control::env::LOCAL_SIZE)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let n = env_usize(
        "MPISTAGES_SHM_RING",
        crate::transport::shm::default_ring(local),
    )?;
    if !n.is_power_of_two() || !(4096..=64 << 20).contains(&n) {
        return fail(
            err::ARG,
            format!("MPISTAGES_SHM_RING={n}: a power of two from 4096 to 67108864"),
        );
    }
    Ok(n)
}

/// `MPISTAGES_TCP_ADDR`, when set.
fn tcp_addr_from_env() -> MpiResult<Option<IpAddr>> {
    match std::env::var("MPISTAGES_TCP_ADDR") {
        Err(_) => Ok(None),
        Ok(a) => a.parse().map(Some).or_else(|_| {
            fail(
                err::ARG,
                format!("MPISTAGES_TCP_ADDR='{a}' is not an IP address"),
            )
        }),
    }
}

pub fn join(epoll: &Arc<Epoll>, recovery: RecoveryMode) -> MpiResult<Joined> {
    let job = JobInfo::from_env().map_err(io_err("reading the job from the environment"))?;
    match job {
        Some(job) => by_mpiexec(job, epoll, recovery),
        None if std::env::var_os("PMI_FD").is_some() => by_srun(epoll, recovery),
        None if srun_without_pmi() => fail(
            err::OTHER,
            "this process was started by srun as one of several tasks, but without PMI-2, so it \
             cannot find the others: start the job with 'srun --mpi=pmi2' (or set \
             MpiDefault=pmi2 in slurm.conf), or run mpiexec inside the allocation",
        ),
        None => Ok(Joined {
            rank: 0,
            size: 1,
            generation: 0,
            client: None,
            srun: None,
            transport: None,
            restore_epoch: 0,
            job_id: String::new(),
            injections: String::new(),
            replacement: false,
        }),
    }
}

fn by_mpiexec(job: JobInfo, epoll: &Arc<Epoll>, recovery: RecoveryMode) -> MpiResult<Joined> {
    let resilient = recovery.announced();
    let ip = tcp_addr_from_env()?.unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let mut tcp = tcp(
        job.rank,
        job.size,
        job.key.clone(),
        job.generation,
        ip,
        epoll,
    )?;
    let addr = tcp.local_addr().map_err(io_err("TCP address"))?;
    let (client, welcome) =
        Client::bootstrap(&job, &addr.to_string()).map_err(io_err("contacting mpiexec"))?;
    tcp.set_generation(welcome.generation);
    let spawned = std::env::var_os(crate::control::env::WORLD).is_some();
    let parents = super::spawn::parents_from_env();
    // The processes of a job that start together connect as they need,
    // and so does a replacement (its peers learn its address with the
    // resume); a spawned process connects to everyone at once.
    let replacement = resilient && job.restart_epoch.is_some();
    let lazy = !spawned && (welcome.fresh.len() == job.size || replacement) && !connect_eagerly()?;
    for (peer, a) in welcome.addrs.iter().enumerate() {
        if !(lazy && peer != job.rank || welcome.connects_to(job.rank, peer)) {
            continue;
        }
        // No address: that process has ended, mpiexec says.
        let Some(sa) = *a else {
            tcp.ended(peer);
            continue;
        };
        tcp.set_born(peer, welcome.born[peer]);
        if lazy {
            tcp.set_address(peer, sa);
            continue;
        }
        match tcp.connect(peer, sa) {
            Ok(()) => {}
            // That rank failed meanwhile: mpiexec announces it and
            // replaces it, and its replacement connects to us.
            Err(_) if resilient => {}
            // A spawned process meets earlier ones that were ending as it
            // started (their MPI_Finalize not yet known to mpiexec): it
            // has no communicator with them; its parents it must reach.
            Err(_) if spawned && !parents.contains(&peer) => tcp.ended(peer),
            Err(e) => return Err(io_err(&format!("connecting to rank {peer} at {sa}"))(e)),
        }
    }
    Ok(Joined {
        rank: job.rank,
        size: job.size,
        generation: welcome.generation,
        client: Some(Arc::new(client)),
        srun: None,
        transport: Some(Box::new(tcp)),
        restore_epoch: welcome.epoch,
        job_id: std::env::var(crate::control::env::JOB_ID).unwrap_or_default(),
        injections: job.inject.clone(),
        replacement: resilient && job.restart_epoch.is_some(),
    })
}

/// Started by `srun --mpi=pmi2`: rank 0 makes the job key, every rank
/// publishes its address, and every rank connects to the ranks below it.
/// Without mpiexec nothing can replace a failed process, so recovery
/// modes are refused here (a failure ends the job, as in any MPI).
fn by_srun(epoll: &Arc<Epoll>, recovery: RecoveryMode) -> MpiResult<Joined> {
    if recovery != RecoveryMode::None {
        return fail(
            err::ARG,
            "a job started directly by srun cannot recover from failures (nothing can start a \
             replacement); inside the allocation, run 'mpiexec --recovery MODE ./app' instead \
             (it starts its agents with srun), or unset MPISTAGES_RECOVERY",
        );
    }
    let pmi_err = io_err("PMI-2 with srun (srun --mpi=pmi2)");
    let var = |n: &str| std::env::var(n).unwrap_or_default();
    let fd: i32 = var("PMI_FD").parse().map_err(|_| {
        MpiError::new(
            err::ARG,
            format!("PMI_FD='{}' is not a descriptor", var("PMI_FD")),
        )
    })?;
    // SAFETY: PMI_FD names the connection slurmstepd opened for this
    // process and left for the MPI library alone; from here the File owns it.
    let stream = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    let hint = var("PMI_RANK").parse().unwrap_or(0);
    let mut pmi = Pmi2::init(stream, hint, &var("PMI_JOBID")).map_err(&pmi_err)?;
    let (rank, size) = (pmi.identity.rank, pmi.identity.size);
    if rank == 0 {
        let mut key = [0u8; 16];
        crate::sys::process::random_bytes(&mut key).map_err(io_err("random job key"))?;
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        pmi.put("mpistages-key", &hex).map_err(&pmi_err)?;
    }
    pmi.fence().map_err(&pmi_err)?;
    let key = pmi
        .get("mpistages-key")
        .map_err(&pmi_err)?
        .ok_or_else(|| MpiError::new(err::INTERN, "srun's job has no key from rank 0"))?;
    let ip = match tcp_addr_from_env()? {
        Some(ip) => ip,
        None => host_address().map_err(io_err("finding this host's address"))?,
    };
    let mut tcp = tcp(rank, size, key.into_bytes(), 0, ip, epoll)?;
    let addr = tcp.local_addr().map_err(io_err("TCP address"))?;
    pmi.put(&format!("mpistages-addr-{rank}"), &addr.to_string())
        .map_err(&pmi_err)?;
    pmi.fence().map_err(&pmi_err)?;
    for peer in 0..rank {
        let a = pmi
            .get(&format!("mpistages-addr-{peer}"))
            .map_err(&pmi_err)?
            .ok_or_else(|| {
                MpiError::new(err::INTERN, format!("rank {peer} published no address"))
            })?;
        let sa: SocketAddr = a.parse().map_err(|_| {
            MpiError::new(err::INTERN, format!("bad address '{a}' for rank {peer}"))
        })?;
        tcp.connect(peer, sa)
            .map_err(io_err(&format!("connecting to rank {peer} at {a}")))?;
    }
    Ok(Joined {
        rank,
        size,
        generation: 0,
        client: None,
        srun: Some(Mutex::new(pmi)),
        transport: Some(Box::new(tcp)),
        restore_epoch: 0,
        job_id: format!("slurm-{}.{}", var("SLURM_JOB_ID"), var("SLURM_STEP_ID")),
        injections: String::new(),
        replacement: false,
    })
}

/// A task of a multi-task srun step with no PMI connection: it would run
/// as a job of its own, silently, beside the others.
fn srun_without_pmi() -> bool {
    std::env::var("SLURM_STEP_NUM_TASKS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| n > 1)
        && std::env::var_os("SLURM_PROCID").is_some()
}

/// This host's address toward the host srun runs on (the route's source
/// address; no packet is sent), or loopback when srun is on this host.
fn host_address() -> std::io::Result<IpAddr> {
    let launcher: IpAddr = std::env::var("SLURM_LAUNCH_NODE_IPADDR")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(IpAddr::from([127, 0, 0, 1]));
    crate::sys::socket::address_toward(launcher)
}
