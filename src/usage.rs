//! `mpiexec --help`: every option, as the command line reads them
//! (`cli.rs`).

pub const USAGE: &str = "\
usage: mpiexec [options] -n N [program options] program [args...]
       mpiexec [options] -n N prog1 [args] : -n M prog2 [args] ...  (MPMD)
       (also: mpirun; -np N is accepted for -n N)

program options (each program of an MPMD job has its own):
  -n, -np N            number of ranks of this program (required)
  -wdir DIR            the directory its ranks start in
  -env NAME VALUE      set NAME for this program's ranks

options for the whole job (before the first program):
  --tag-output         prefix every output line with [job,rank]<stdout|stderr>:
  -l, --prepend-rank   prefix every output line with [rank]
  --output-filename DIR[:nocopy]  each rank's output also into
                       DIR/1/rank.N/stdout and stderr (appended to by its
                       replacements); with :nocopy only there
  -x NAME[=VALUE]      set NAME in every rank's environment (the whole
                       environment of mpiexec is passed on anyway)
  -genv NAME VALUE     the same as -x NAME=VALUE
  -genvall, -envall    accepted: every rank gets mpiexec's environment
  -H, --host LIST      hosts and their slots, e.g. localhost:4 (a host
                       without :N has one slot); repeatable
  --hostfile FILE      hosts from a file, one per line: 'NAME slots=N' or
                       'NAME:N' or 'NAME'; # starts a comment
                       (also --machinefile). Without --host or --hostfile
                       every rank runs on this host, as many as asked.
                       Hosts other than this machine (not localhost, 127.x
                       or its hostname) get an agent, mpistages-agent,
                       started by the launcher command:
  --launcher ssh|exec|slurm  ssh HOST mpistages-agent ... (default; the
                       agent must be at the same path there), exec: the
                       command --launcher-exec gives, or slurm: srun
                       --nodelist HOST ... inside an allocation (salloc,
                       sbatch), where hosts and slots are Slurm's; this is
                       the default inside an allocation without --host
  --launcher-exec CMD  CMD HOST mpistages-agent ..., e.g. 'ip netns exec'
  --control-addr ADDR  this machine's address as the hosts reach it
                       (default: its address toward the first host)
  --heartbeat-timeout SECS  a host whose agent is silent this long is
                       lost with its ranks (default 5); so is a host whose
                       agent's connection or process ends, or whose agent
                       has not connected 30 s after its launch. Its ranks are
                       recovered as any failed rank, on the host with the
                       most free slots
  --spare-hosts LIST   hosts (as --host) where no rank starts: the
                       replacements of a lost host's ranks go there first
  --map-by slot|node   fill each host's slots in turn (default), or one
                       rank per host in turn
  -ppn, --npernode N   at most N ranks per host
  --oversubscribe      allow more ranks than slots (they share cores);
                       without it, a job that does not fit is refused
  --bind-to core|socket|none  bind each rank to one core, in turn over
                       the cores mpiexec may use, or to the cores of one
                       socket, in turn over the sockets, or leave ranks to
                       the scheduler; default: where the ranks are on this
                       machine alone and fit its cores, each on its share
  --report-bindings    say each rank's CPUs as it starts (on stderr)
  --timeout SECS       end the job (exit status 124) when it runs longer
                       than SECS; MPIEXEC_TIMEOUT=SECS in the environment
                       does the same (the option wins)
  --kill-grace SECS    after a failure, how long ranks get between SIGTERM
                       and SIGKILL (default 2)
  --recovery MODE      what a failed rank means:
                         none    the job ends, as in standard MPI (default)
                         stages  the rank is replaced and restores the MPI
                                 state of the last committed checkpoint; live
                                 ranks get MPIX_TRY_RELOAD and roll back
                         reinit  the rank is replaced; live ranks jump back
                                 to the restart point of MPIX_Reinit with
                                 their MPI state reset to after MPI_Init
                         cpr     every rank is killed and the whole job
                                 relaunched; MPIX_Get_fault_epoch gives the
                                 checkpoint to reload
                         ulfm    nothing is replaced: the survivors go on,
                                 get MPIX_ERR_PROC_FAILED from what involves
                                 the dead rank, and mend their communicators
                                 with the ULFM calls of <mpi-ext.h>
                                 (MPIX_Comm_revoke, _agree, _shrink, ...)
  --with-ft ulfm       the same as --recovery ulfm (Open MPI 5's spelling;
                       --with-ft mpi too; --with-ft no: --recovery none)
  --initial-errhandler mpi_errors_return|mpi_errors_are_fatal|mpi_errors_abort
                       the error handler of MPI_COMM_WORLD and MPI_COMM_SELF
                       at MPI_Init (MPI 4.0; default mpi_errors_are_fatal)
  --spares N           with --recovery stages or reinit: keep N spare
                       processes of the program waiting in MPI_Init; a
                       failed rank is replaced by one of them (no exec,
                       no start-up on the recovery path) and a new spare
                       is started after the recovery (default 1; 0 starts
                       each replacement when it is needed). A spare's
                       output before MPI_Init shows once it replaces a
                       rank; it has no rank variables (MPISTAGES_RANK,
                       PMI_RANK, OMPI_COMM_WORLD_RANK) and no stdin
  --max-restarts N     with a recovery mode: end the job when more than N
                       failures were recovered from (default 8; the
                       ranks of a lost host count as one)
  --transport LIST     how ranks reach each other (as MPISTAGES_TRANSPORT):
                       auto (default) is shm,tcp: shared memory between
                       ranks of one host, TCP between hosts; a list of
                       tcp, shm and udp (reliable UDP) allows those, tried
                       in the order shm, udp, tcp (e.g. shm,udp; udp alone
                       also between ranks of one host)
  --ckpt SPEC          checkpoint storage levels, as MPISTAGES_CKPT, e.g.
                       mem,tmpfs:/dev/shm/mpistages,partner,pfs:DIR@every=4,
                       keep=2,zstd:3 (default: mem,tmpfs:/dev/shm/mpistages,
                       keep=2, no compression); xor:K (sets of K ranks over
                       hosts holding XOR parity: one lost member per set)
                       or rs:K+M (Reed-Solomon: M of K+M) in place of
                       partner; diff[:N] writes only changed blocks to the
                       directory levels, a full checkpoint every N (8)
  --mtbf SECS          the job's mean time between failures (as
                       MPISTAGES_MTBF): MPIX_Checkpoint_needed then says
                       to checkpoint at Daly's optimum interval for the
                       measured cost of the checkpoints (without it, and
                       without --ckpt-interval: when checkpoints have taken
                       5% of the time)
  --ckpt-interval SECS MPIX_Checkpoint_needed says to checkpoint every SECS
                       seconds (as MPISTAGES_CKPT_INTERVAL; wins over --mtbf)
  --restart DIR        start the job from the newest checkpoint epoch that
                       every rank has in DIR, a pfs level's directory of an
                       earlier run of it that ended (a crash of the whole
                       job); DIR must be a pfs level of --ckpt, and the job
                       needs a recovery mode (its program restores where
                       MPIX_Get_fault_epoch says, as after a cpr relaunch)
  --inject SPEC        kill a rank with SIGKILL at a reproducible point
                       (repeatable; all times count from the job's start):
                         rank=R,after=SECS        SECS seconds into the job
                         rank=R,checkpoint=E      right after rank R completed
                                                  checkpoint epoch E
                         rank=R,call=NAME:N       on entering rank R's Nth call
                                                  of MPI function NAME, e.g.
                                                  call=MPI_Allreduce:20
                         rank=R,writing=E         while rank R writes epoch E
                       With checkpoint=, writing= or call=, add
                       damage=node (the rank's node-local copies are
                       deleted: a lost node), damage=corrupt (bytes of
                       its newest node-local copy are flipped) or
                       damage=parity (bytes of the newest partner copy or
                       parity it holds for other ranks are flipped).
                       Each spec fires once (not again in the replacement).
                       A spec that never fires is reported at the end.
  -h, --help           this text
  --version            print the version

Exit status: 0 when every rank finished MPI_Finalize and exited with 0; the
MPI_Abort error code when a rank aborted; otherwise the failed rank's exit
status, or 128 + signal number when it was killed by a signal; 3 when the
job succeeded but an --inject spec never fired. Under a recovery mode, a
rank whose error handler is MPI_ERRORS_ARE_FATAL (the default) ends the job
at a failure instead of rolling back, with the exit status 101.

Under Slurm: inside an allocation (salloc, sbatch) mpiexec uses Slurm's
nodes and starts its agents with srun (see --launcher). A job can also be
started by srun alone: srun --mpi=pmi2 -n N ./app (PMI-2; no recovery
without mpiexec: a failed rank ends the job).

Environment read by the ranks:
  MPISTAGES_PROGRESS=thread|poll   progress thread (default) or the waiting
                                   user thread drives communication
  MPISTAGES_EAGER_LIMIT=BYTES      messages up to this size go eagerly
                                   (default 65536)
  MPISTAGES_FRAGMENT=BYTES         rendezvous fragment size (default 1048576)
  MPISTAGES_SHM_RING=BYTES         each shared-memory ring, per direction and
                                   pair of ranks (default 262144)
  MPISTAGES_SHM_CMA=0              no single-copy reads from other ranks'
                                   memory on this host (default: on where the
                                   kernel allows it)
  MPISTAGES_CKPT_REPORT=1          at MPI_Finalize each rank says per level
                                   how many checkpoints it wrote, how many
                                   bytes they held and took
";
