//! Spare processes (`mpiexec --spares N`, stages and reinit): copies of the
//! program started ahead of a failure that wait in `MPI_Init`. When a rank
//! fails, one of them becomes its replacement, so the recovery does not
//! wait for a fork, an exec, the dynamic loader and the library's start-up.
//! The pool owns the processes until one is handed out; the controller
//! says when to start them and speaks to them over the control channel.

use crate::agent::{Gate, Launch, RankProc, Started};
use mpistages_sys::process;
use std::sync::Arc;
use std::thread::JoinHandle;

struct Spare {
    proc: RankProc,
    gate: Arc<Gate>,
    /// Its control connection, once it said it is waiting.
    conn: Option<usize>,
}

/// A spare handed out to replace a rank.
pub struct Taken {
    pub proc: RankProc,
    pub gate: Arc<Gate>,
    pub conn: usize,
}

#[derive(Default)]
pub struct Spares {
    waiting: Vec<Spare>,
}

impl Spares {
    /// Starts spares until `want` exist. Returns the output forwarders;
    /// an error means no further spare can be started.
    pub fn top_up(
        &mut self,
        want: usize,
        launch: &Launch,
        env: &[(&str, String)],
    ) -> std::io::Result<Vec<JoinHandle<()>>> {
        let mut forwarders = Vec::new();
        while self.waiting.len() < want {
            let Started {
                proc,
                gate,
                forwarders: f,
            } = launch.spawn_spare(env)?;
            forwarders.extend(f);
            self.waiting.push(Spare {
                proc,
                gate,
                conn: None,
            });
        }
        Ok(forwarders)
    }

    /// A spare process said it is waiting, on connection `slot`. False if
    /// no spare of ours has that pid (or it said so before).
    pub fn connected(&mut self, pid: i32, slot: usize) -> bool {
        match self
            .waiting
            .iter_mut()
            .find(|s| s.proc.pid == pid && s.conn.is_none())
        {
            Some(s) => {
                s.conn = Some(slot);
                true
            }
            None => false,
        }
    }

    /// A control connection closed: a spare on it cannot be handed out.
    pub fn disconnected(&mut self, slot: usize) {
        for s in &mut self.waiting {
            if s.conn == Some(slot) {
                s.conn = None;
            }
        }
    }

    /// A spare that is waiting and reachable, for a replacement.
    pub fn take(&mut self) -> Option<Taken> {
        let i = self.waiting.iter().position(|s| s.conn.is_some())?;
        let s = self.waiting.remove(i);
        Some(Taken {
            proc: s.proc,
            gate: s.gate,
            conn: s.conn.expect("chosen for its connection"),
        })
    }

    /// Whether a spare could be handed out now.
    pub fn ready(&self) -> bool {
        self.waiting.iter().any(|s| s.conn.is_some())
    }

    /// A child ended: true (and forgotten) if it was a spare, with its
    /// control connection if it had one.
    pub fn ended(&mut self, pid: i32) -> Option<Option<usize>> {
        let i = self.waiting.iter().position(|s| s.proc.pid == pid)?;
        let s = self.waiting.remove(i);
        s.gate.drop_output();
        Some(s.conn)
    }

    /// Ends every spare (the job is over or failing). A spare holds no
    /// state of the job, so it is killed outright; with `reap` this also
    /// waits for each to be gone.
    pub fn dismiss(&mut self, reap: bool) {
        for s in &self.waiting {
            s.gate.drop_output();
            s.proc.signal(libc::SIGKILL);
        }
        if reap {
            for s in self.waiting.drain(..) {
                process::wait_for(s.proc.pid);
            }
        }
    }

    /// Puts back a spare that could not be handed out after all, killed:
    /// it is forgotten once reaped.
    pub fn discard(&mut self, t: Taken) {
        t.gate.drop_output();
        t.proc.signal(libc::SIGKILL);
        self.waiting.push(Spare {
            proc: t.proc,
            gate: t.gate,
            conn: None,
        });
    }
}
