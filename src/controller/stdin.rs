//! mpiexec's stdin, for rank 0 on another host. As with Open MPI and
//! MPICH, only rank 0 reads the job's stdin; when it runs on this
//! machine it simply inherits it (`agent.rs`), when it runs elsewhere a
//! thread here reads stdin and sends it to rank 0's agent (`Input`), which
//! writes it to the process. A replacement of rank 0 gets what is read
//! after it started.

use crate::agent::AgentLink;
use mpistages_control::agent::ToAgent;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Set once stdin is forwarded: from then on a rank 0 started on this
/// machine gets an empty stdin instead of competing for mpiexec's.
pub static FORWARDED: AtomicBool = AtomicBool::new(false);

/// Where the forwarded input goes: rank 0's agent and process id.
type Target = Arc<Mutex<Option<(AgentLink, u64)>>>;

#[derive(Default)]
pub(super) struct StdinForward {
    target: Target,
}

impl StdinForward {
    /// Rank 0 now runs as process `id` behind `link` (its Start is sent).
    pub(super) fn aim(&self, link: AgentLink, id: u64) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = Some((link, id));
        if !FORWARDED.swap(true, Ordering::AcqRel) {
            let target = self.target.clone();
            std::thread::spawn(move || pump(target));
        }
    }
}

/// Reads stdin until its end and hands every piece to the current target,
/// waiting while there is none (rank 0 being replaced).
fn pump(target: Target) {
    let mut stdin = std::io::stdin().lock();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let data = match stdin.read(&mut buf) {
            Ok(n) => buf[..n].to_vec(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => Vec::new(),
        };
        let end = data.is_empty();
        loop {
            let now = target.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if let Some((link, id)) = now {
                if link.send(&ToAgent::Input {
                    id,
                    data: data.clone(),
                }) {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if end {
            return;
        }
    }
}
