//! `mpiexec` command-line options.

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
  -h, --help           this text
  --version            print the version

Exit status: 0 when every rank finished MPI_Finalize and exited with 0; the
MPI_Abort error code when a rank aborted; otherwise the failed rank's exit
status, or 128 + signal number when it was killed by a signal.

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
    Ok(Parsed::Run(Options {
        ranks,
        tag_output,
        env,
        kill_grace_secs,
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
    }
}
