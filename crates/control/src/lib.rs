//! The control plane's vocabulary, shared by the library (a rank) and the
//! launcher (`mpiexec`): the control messages and their framing (`proto`),
//! fault injection specs (`inject`), recovery modes (`mode`), the
//! environment through which `mpiexec` tells a rank who it is (`env`), and
//! the control tree's shape (`tree`) and fan-in (`fan`, over `rankset`).
//!
//! A crate of its own so that the launcher does not link the MPI library
//! to speak to ranks, and so that this vocabulary cannot reach into either
//! side (Cargo refuses the dependency).

#![deny(unsafe_code)]

pub mod agent;
pub mod fan;
pub mod inject;
pub mod mode;
pub mod proto;
pub mod rankset;
pub mod stream;
pub mod tree;

/// Environment variables through which `mpiexec` tells a rank who it is.
pub mod env {
    pub const RANK: &str = "MPISTAGES_RANK";
    pub const SIZE: &str = "MPISTAGES_SIZE";
    /// How many ranks of the job run on this machine (they share its cores).
    pub const LOCAL_SIZE: &str = "MPISTAGES_LOCAL_SIZE";
    /// How many cores the launcher may use on this machine: a rank bound to
    /// one of them (`--bind-to core`) sees one core, yet has a core of its
    /// own while the job's local ranks are at most this many.
    pub const LOCAL_CORES: &str = "MPISTAGES_LOCAL_CORES";
    pub const CONTROL: &str = "MPISTAGES_CONTROL";
    pub const KEY: &str = "MPISTAGES_JOB_KEY";
    pub const JOB_ID: &str = "MPISTAGES_JOB_ID";
    pub const GENERATION: &str = "MPISTAGES_GENERATION";
    /// The inherited descriptor of the page whose robust lock the process
    /// holds while it lives (`sys::liveness`).
    pub const LIVENESS_FD: &str = "MPISTAGES_LIVENESS_FD";
    /// `none`, `stages`, `reinit` or `cpr`: how the job reacts to a failed rank.
    pub const RECOVERY: &str = "MPISTAGES_RECOVERY";
    /// Set in a process started because of a failure (a replacement, or
    /// every rank of a relaunched `cpr` job): the epoch it restores.
    pub const RESTART_EPOCH: &str = "MPISTAGES_RESTART_EPOCH";
    /// The checkpoint configuration (see `checkpoint::config`).
    pub const CKPT: &str = "MPISTAGES_CKPT";
    /// `JOB:EPOCH`: this job restarts a job that ended (`mpiexec
    /// --restart`); its checkpoints up to EPOCH on durable levels carry
    /// that job's id.
    pub const RESTART_FROM: &str = "MPISTAGES_RESTART_FROM";
    /// Set in a spare process: it waits in `MPI_Init` until mpiexec makes
    /// it the replacement of a failed rank (and tells it the rank, the
    /// generation, the epoch and the injections that the variables above
    /// carry for a rank started as such).
    pub const SPARE: &str = "MPISTAGES_SPARE";
    /// Rank r keeps its partner copy on rank (r + this) mod size: the
    /// same for every process of the job, chosen by mpiexec so that
    /// partners run on different hosts (default 1).
    pub const PARTNER_SHIFT: &str = "MPISTAGES_PARTNER_SHIFT";
    /// Set (to anything): at `MPI_Finalize` each rank says what its
    /// checkpoint files held and took per directory level (how much
    /// `diff` and `zstd` saved).
    pub const CKPT_REPORT: &str = "MPISTAGES_CKPT_REPORT";
    /// The host index of every rank as placed at the start, comma
    /// separated: redundancy sets (`xor:K`, `rs:K+M`) take their members
    /// from different hosts.
    pub const RANK_HOSTS: &str = "MPISTAGES_RANK_HOSTS";
    /// In a process started by `MPI_Comm_spawn`: `FIRST,COUNT`, the
    /// process ids of its `MPI_COMM_WORLD` (its own among them is `RANK`;
    /// `SIZE` is how many processes the job had then).
    pub const WORLD: &str = "MPISTAGES_WORLD";
    /// In a process started by `MPI_Comm_spawn`: `CONTEXT:P0,P1,...`, the
    /// context of the inter-communicator to its parents and their ids
    /// (`MPI_Comm_get_parent`).
    pub const PARENT: &str = "MPISTAGES_PARENT";
    /// The number of this process's program: among mpiexec's
    /// colon-separated programs, or among `MPI_Comm_spawn_multiple`'s
    /// commands (`MPI_APPNUM`).
    pub const APPNUM: &str = "MPISTAGES_APPNUM";
}
