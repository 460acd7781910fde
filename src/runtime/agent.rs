//! The node agent: starts ranks on this host, forwards their output line by
//! line, and tears them down. (On one host it runs inside `mpiexec`.)

use super::env;
use crate::sys::process;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::thread::JoinHandle;

pub struct Launch {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub size: usize,
    pub control: String,
    pub key: String,
    pub job_id: String,
    pub tag_output: bool,
}

pub struct RankProc {
    pub rank: usize,
    pub pid: i32,
    /// Kept only so the handle is not dropped early; exits are collected with
    /// `waitpid` by the controller.
    _child: Child,
}

/// Serializes forwarded lines so lines from different ranks never interleave.
static OUTPUT: Mutex<()> = Mutex::new(());

fn forward(
    mut from: impl Read + Send + 'static,
    prefix: Option<String>,
    to_stderr: bool,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&mut from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let _guard = OUTPUT.lock().unwrap_or_else(|p| p.into_inner());
                    let write = |w: &mut dyn Write| {
                        if let Some(p) = &prefix {
                            let _ = w.write_all(p.as_bytes());
                        }
                        let _ = w.write_all(&line);
                        if !line.ends_with(b"\n") {
                            let _ = w.write_all(b"\n");
                        }
                        let _ = w.flush();
                    };
                    if to_stderr {
                        write(&mut std::io::stderr().lock());
                    } else {
                        write(&mut std::io::stdout().lock());
                    }
                }
            }
        }
    })
}

impl Launch {
    /// Starts rank `rank` and the threads that forward its output.
    pub fn spawn(
        &self,
        rank: usize,
        generation: u32,
        extra_env: &[(&str, String)],
    ) -> std::io::Result<(RankProc, Vec<JoinHandle<()>>)> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .env(env::RANK, rank.to_string())
            .env(env::SIZE, self.size.to_string())
            .env(env::CONTROL, &self.control)
            .env(env::KEY, &self.key)
            .env(env::JOB_ID, &self.job_id)
            .env(env::GENERATION, generation.to_string())
            .env("OMPI_COMM_WORLD_RANK", rank.to_string())
            .env("PMI_RANK", rank.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(if rank == 0 {
                Stdio::inherit()
            } else {
                Stdio::null()
            });
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        process::supervise(&mut cmd);
        let mut child = cmd.spawn()?;
        let tag = |s: &str| {
            self.tag_output
                .then(|| format!("[{},{}]<{}>:", self.job_id, rank, s))
        };
        let mut fwd = Vec::new();
        if let Some(out) = child.stdout.take() {
            fwd.push(forward(out, tag("stdout"), false));
        }
        if let Some(err) = child.stderr.take() {
            fwd.push(forward(err, tag("stderr"), true));
        }
        let pid = child.id() as i32;
        Ok((
            RankProc {
                rank,
                pid,
                _child: child,
            },
            fwd,
        ))
    }
}

impl RankProc {
    pub fn signal(&self, sig: i32) {
        process::kill_group(self.pid, sig);
    }
}
