//! `MPI_Comm_spawn` at mpiexec: the children join the job as processes
//! with the next ids, on this host, with a world of their own and an
//! inter-communicator to their parents (both in their environment). The
//! root hears back once every child is in `MPI_Init` (welcomed), as the
//! standard has the call return. One spawn at a time; others wait.

use super::*;
use mpistages_control::proto::SpawnArgs;

/// A request of a root, as it came.
pub(super) struct SpawnRequest {
    pub root: usize,
    pub args: SpawnArgs,
}

/// The spawn under way: its root and its children's ids.
pub(super) struct Spawning {
    root: usize,
    first: usize,
    count: usize,
}

/// More children at once than this is a mistake, not a job.
const MAX_CHILDREN: u32 = 4096;

impl Job {
    pub(super) fn on_spawn(&mut self, root: usize, args: SpawnArgs) {
        self.spawn_queue.push_back(SpawnRequest { root, args });
        self.next_spawn();
    }

    fn next_spawn(&mut self) {
        if self.spawning.is_some() {
            return;
        }
        let Some(req) = self.spawn_queue.pop_front() else {
            return;
        };
        if let Err(why) = self.start_children(&req) {
            self.send_to(
                req.root,
                &ToRank::Spawned {
                    first: 0,
                    count: 0,
                    error: why,
                },
            );
            self.next_spawn();
        }
    }

    fn start_children(&mut self, req: &SpawnRequest) -> Result<(), String> {
        if !matches!(self.opts.recovery, RecoveryMode::None | RecoveryMode::Ulfm) {
            return Err(format!(
                "MPI_Comm_spawn is not supported under --recovery {} (a rollback or a relaunch would have to take the spawned processes along); it is under none and ulfm",
                self.opts.recovery.name()
            ));
        }
        let a = &req.args;
        let total = a.total();
        if a.commands.is_empty() || a.commands.iter().any(|c| c.count == 0) || total > MAX_CHILDREN
        {
            return Err(format!(
                "maxprocs {} is out of range (1 to {MAX_CHILDREN} in all, at least 1 per command)",
                total
            ));
        }
        if self.failure.is_some() {
            return Err("the job is ending".into());
        }
        let first = self.ranks.len();
        let count = total as usize;
        let hosts = self.place_children(req.root, count)?;
        let parents: Vec<String> = a.parents.iter().map(u32::to_string).collect();
        // Each child's command and that command's number (MPI_APPNUM).
        let commands = a.commands.iter().enumerate();
        let each = commands.flat_map(|(i, c)| std::iter::repeat_n((i, c), c.count as usize));
        for ((id, &h), (appnum, cmd)) in (first..first + count).zip(&hosts).zip(each) {
            let mut env = self.job_env();
            env.push((mpistages_control::env::SIZE, (first + count).to_string()));
            env.push((mpistages_control::env::WORLD, format!("{first},{count}")));
            env.push((
                mpistages_control::env::PARENT,
                format!("{}:{}", a.context, parents.join(",")),
            ));
            env.push((mpistages_control::env::APPNUM, appnum.to_string()));
            self.ranks.push(RankState {
                world: first..first + count,
                ..RankState::default()
            });
            self.rec.add_rank();
            if self.launch.rank_host.len() == id {
                self.launch.rank_host.push(h);
            }
            if self.through_agent(id) {
                let control = self.remote_control();
                let plan = self.launch.child_plan(id, cmd, &a.wdir, &env, &control);
                self.start_remote(id, plan);
                continue;
            }
            match self.launch.spawn_child(id, cmd, &a.wdir, &env) {
                Ok(started) => {
                    self.keep_forwarders(started.forwarders);
                    self.started(id, started.proc);
                }
                Err(e) => {
                    // The ones started already are ended: the spawn failed.
                    for r in first..id {
                        if let Some(p) = &self.ranks[r].proc {
                            p.signal(libc::SIGKILL);
                        }
                    }
                    for r in first..=id {
                        self.ranks[r].abandoned = true;
                        self.ranks[r].welcomed = true;
                    }
                    self.ranks[id].exit = Some(Exit::Code(127));
                    return Err(format!("cannot start '{}': {e}", cmd.program));
                }
            }
        }
        self.spawning = Some(Spawning {
            root: req.root,
            first,
            count,
        });
        Ok(())
    }

    /// The hosts of `count` new children of `root`: free slots on hosts
    /// that are up, counting the job's live processes (a dead rank's slot
    /// is free again: ULFM's respawn), the root's host first, then the
    /// others in order (spare hosts included); with `--oversubscribe`,
    /// the root's host when no slot is free. One job on this machine alone
    /// has no slots to count.
    fn place_children(&self, root: usize, count: usize) -> Result<Vec<usize>, String> {
        let (Some(r), Some(hosts)) = (self.remote.as_ref(), self.opts.hosts.as_ref()) else {
            return Ok(vec![0; count]);
        };
        let up = |h: usize| r.hosts[h].as_ref().is_none_or(|x| !x.lost);
        let mut used = vec![0usize; hosts.len()];
        for (q, st) in self.ranks.iter().enumerate() {
            if st.proc.is_some() && st.exit.is_none() {
                if let Some(&h) = self.launch.rank_host.get(q) {
                    used[h] += 1;
                }
            }
        }
        let home = self.launch.rank_host.get(root).copied().unwrap_or(0);
        let order: Vec<usize> = std::iter::once(home)
            .chain((0..hosts.len()).filter(|&h| h != home))
            .filter(|&h| up(h))
            .collect();
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let free = order.iter().copied().find(|&h| used[h] < hosts[h].slots);
            let h = match free {
                Some(h) => h,
                None if self.opts.policy.oversubscribe && up(home) => home,
                None => {
                    return Err(format!(
                        "no free slot is left for {count} spawned process(es) on the job's hosts; give more hosts or slots, or --oversubscribe"
                    ))
                }
            };
            used[h] += 1;
            out.push(h);
        }
        Ok(out)
    }

    /// After a welcome: the root of the spawn under way hears back once
    /// all its children are in.
    pub(super) fn spawn_welcomed(&mut self) {
        let Some(s) = &self.spawning else {
            return;
        };
        if !(s.first..s.first + s.count).all(|r| self.ranks[r].welcomed) {
            return;
        }
        let (root, first, count) = (s.root, s.first, s.count);
        self.spawning = None;
        self.send_to(
            root,
            &ToRank::Spawned {
                first: first as u32,
                count: count as u32,
                error: String::new(),
            },
        );
        self.next_spawn();
    }

    /// A child of the spawn under way died before it was welcomed: the
    /// spawn fails (its other children are ended).
    pub(super) fn spawn_child_lost(&mut self, r: usize) {
        let Some(s) = &self.spawning else {
            return;
        };
        if !(s.first..s.first + s.count).contains(&r) {
            return;
        }
        let (root, first, count) = (s.root, s.first, s.count);
        self.spawning = None;
        for c in first..first + count {
            if let (Some(p), None) = (&self.ranks[c].proc, self.ranks[c].exit) {
                p.signal(libc::SIGKILL);
            }
            // Their end is expected: not a failure of the job.
            self.ranks[c].abandoned = true;
            self.ranks[c].welcomed = true;
        }
        self.send_to(
            root,
            &ToRank::Spawned {
                first: 0,
                count: 0,
                error: format!("spawned process {r} ended before MPI_Init"),
            },
        );
        self.next_spawn();
    }
}
