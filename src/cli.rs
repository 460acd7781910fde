//! `mpiexec` command-line options.

use mpistages_control::inject::Inject;
pub use mpistages_control::mode::RecoveryMode;

pub const USAGE: &str = "\
usage: mpiexec -n N [options] program [args...]
       (also: mpirun; -np N is accepted for -n N)

options:
  -n, -np N            number of ranks to start (required)
  --tag-output         prefix every output line with [job,rank]<stdout|stderr>:
  -x NAME[=VALUE]      set NAME in the ranks' environment (the whole
                       environment of mpiexec is passed on anyway)
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
                       recoveries were needed (default 8)
  --ckpt SPEC          checkpoint storage levels, as MPISTAGES_CKPT, e.g.
                       mem,tmpfs:/dev/shm/mpistages,partner,pfs:DIR@every=4,
                       keep=2,zstd:3 (default: mem,tmpfs:/dev/shm/mpistages,
                       keep=2, no compression)
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
                       deleted: a lost node) or damage=corrupt (bytes of
                       its newest node-local copy are flipped).
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

Environment read by the ranks:
  MPISTAGES_PROGRESS=thread|poll   progress thread (default) or the waiting
                                   user thread drives communication
  MPISTAGES_EAGER_LIMIT=BYTES      messages up to this size go eagerly
                                   (default 65536)
  MPISTAGES_FRAGMENT=BYTES         rendezvous fragment size (default 262144)
";

#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub ranks: usize,
    pub tag_output: bool,
    pub env: Vec<(String, String)>,
    pub kill_grace_secs: f64,
    pub recovery: RecoveryMode,
    pub max_restarts: usize,
    /// Spare processes kept waiting for a failure (stages, reinit).
    pub spares: usize,
    pub inject: Vec<Inject>,
    pub ckpt: Option<String>,
    pub program: String,
    pub args: Vec<String>,
}

#[derive(Debug, PartialEq)]
pub enum Parsed {
    Run(Options),
    Help,
    Version,
}

pub fn parse(argv: &[String]) -> Result<Parsed, String> {
    let mut ranks = None;
    let mut tag_output = false;
    let mut env = Vec::new();
    let mut kill_grace_secs = 2.0;
    let mut recovery = RecoveryMode::None;
    let mut max_restarts = 8;
    let mut spares = None;
    let mut inject = Vec::new();
    let mut ckpt = None;
    let mut i = 0;
    let value = |i: usize, name: &str| -> Result<String, String> {
        argv.get(i + 1)
            .cloned()
            .ok_or_else(|| format!("option {name} needs a value"))
    };
    while i < argv.len() {
        let a = argv[i].as_str();
        match a {
            "-n" | "-np" | "--n" | "--np" | "-c" => {
                let v = value(i, a)?;
                let n: usize = v
                    .parse()
                    .map_err(|_| format!("{a} needs a positive number, not '{v}'"))?;
                if n == 0 {
                    return Err(format!("{a} needs a positive number, not 0"));
                }
                ranks = Some(n);
                i += 2;
            }
            "--tag-output" | "-tag-output" => {
                tag_output = true;
                i += 1;
            }
            "-x" => {
                let v = value(i, a)?;
                match v.split_once('=') {
                    Some((k, val)) => env.push((k.to_string(), val.to_string())),
                    None => {
                        let val = std::env::var(&v).unwrap_or_default();
                        env.push((v, val));
                    }
                }
                i += 2;
            }
            "--kill-grace" => {
                let v = value(i, a)?;
                kill_grace_secs = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| format!("--kill-grace needs seconds, not '{v}'"))?;
                i += 2;
            }
            "--recovery" => {
                recovery =
                    RecoveryMode::parse(&value(i, a)?).map_err(|e| format!("--recovery {e}"))?;
                i += 2;
            }
            "--max-restarts" => {
                let v = value(i, a)?;
                max_restarts = v
                    .parse()
                    .map_err(|_| format!("--max-restarts needs a number, not '{v}'"))?;
                i += 2;
            }
            "--spares" => {
                let v = value(i, a)?;
                spares = Some(
                    v.parse::<usize>()
                        .ok()
                        .filter(|&n| n <= 64)
                        .ok_or_else(|| {
                            format!("--spares needs a number from 0 to 64, not '{v}'")
                        })?,
                );
                i += 2;
            }
            "--inject" => {
                inject.push(mpistages_control::inject::parse(&value(i, a)?)?);
                i += 2;
            }
            "--ckpt" => {
                let v = value(i, a)?;
                mpistages::checkpoint::config::parse(&v).map_err(|e| format!("--ckpt: {e}"))?;
                ckpt = Some(v);
                i += 2;
            }
            "--oversubscribe" => i += 1,
            "-h" | "--help" => return Ok(Parsed::Help),
            "--version" | "-V" => return Ok(Parsed::Version),
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with('-') => return Err(format!("unknown option '{a}'")),
            _ => break,
        }
    }
    let Some(program) = argv.get(i).cloned() else {
        return Err("no program given".into());
    };
    let ranks = ranks.ok_or("the number of ranks is missing (-n N)")?;
    if let Some(bad) = inject.iter().find(|s| s.rank >= ranks) {
        return Err(format!(
            "--inject names rank {}, but the job has {ranks} ranks",
            bad.rank
        ));
    }
    let spares = match spares {
        Some(n) if n > 0 && !recovery.replaces_rank() => {
            return Err(format!(
                "--spares {n} needs --recovery stages or reinit (the failed rank is replaced)"
            ))
        }
        Some(n) => n,
        None if recovery.replaces_rank() => 1,
        None => 0,
    };
    Ok(Parsed::Run(Options {
        ranks,
        tag_output,
        env,
        kill_grace_secs,
        recovery,
        max_restarts,
        spares,
        inject,
        ckpt,
        program,
        args: argv[i + 1..].to_vec(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Parsed, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn common_forms() {
        let Parsed::Run(o) = p("-np 4 --tag-output ./app -n 3 x").unwrap() else {
            panic!()
        };
        assert_eq!(
            (o.ranks, o.tag_output, o.program.as_str()),
            (4, true, "./app")
        );
        assert_eq!(o.args, vec!["-n", "3", "x"]);
        assert_eq!(p("--help").unwrap(), Parsed::Help);
        assert!(p("-n 0 ./a").is_err());
        assert!(p("-n x ./a").is_err());
        assert!(p("./a").is_err());
        assert!(p("-n 2").is_err());
        assert!(p("--bogus -n 2 ./a").is_err());
        let Parsed::Run(o) =
            p("-n 4 --recovery stages --inject rank=3,after=0.5 --max-restarts 2 ./a").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (o.recovery, o.max_restarts, o.inject.len()),
            (RecoveryMode::Stages, 2, 1)
        );
        assert!(p("-n 2 --inject rank=2,after=1 ./a").is_err());
        assert!(p("-n 2 --recovery maybe ./a").is_err());
        for (m, r) in [("reinit", RecoveryMode::Reinit), ("cpr", RecoveryMode::Cpr)] {
            let Parsed::Run(o) = p(&format!("-n 2 --recovery {m} ./a")).unwrap() else {
                panic!()
            };
            assert_eq!(o.recovery, r);
        }
        assert!(p("-n 2 --ckpt bogus ./a").is_err());
        // One spare by default where a failed rank is replaced, none
        // elsewhere; asking for spares without replacement is an error.
        let spares = |s: &str| match p(s) {
            Ok(Parsed::Run(o)) => Ok(o.spares),
            Ok(_) => panic!(),
            Err(e) => Err(e),
        };
        assert_eq!(spares("-n 2 --recovery stages ./a"), Ok(1));
        assert_eq!(spares("-n 2 --recovery reinit --spares 0 ./a"), Ok(0));
        assert_eq!(spares("-n 2 --recovery stages --spares 3 ./a"), Ok(3));
        assert_eq!(spares("-n 2 --recovery cpr ./a"), Ok(0));
        assert_eq!(spares("-n 2 ./a"), Ok(0));
        assert!(spares("-n 2 --recovery cpr --spares 1 ./a").is_err());
        assert!(spares("-n 2 --recovery stages --spares x ./a").is_err());
        assert!(spares("-n 2 --recovery stages --spares 65 ./a").is_err());
    }
}
