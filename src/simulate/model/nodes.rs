//! What each node of the simulation does with a message: an agent (fan-in,
//! routing down, starting and ending processes), mpiexec (its recovery
//! state machine's decisions), a rank (halt, roll back, resume).

use super::*;

impl Sim {
    pub(super) fn step(&mut self, ev: Ev) {
        let t = self.now;
        let local = ev.local;
        match (ev.at, ev.msg) {
            (At::Rank(r), m) => self.at_rank(r, t, m),
            (At::Agent(h), Msg::Died(r)) => {
                // Its own detection: no message in.
                let done = self.serve(At::Agent(h), t, ns(self.c.recv_us));
                self.send(At::Agent(h), done, self.up(At::Agent(h)), Msg::Lost(r));
            }
            (At::Agent(h), Msg::Due) => {
                let due = self.fans[h].due(Duration::from_nanos(t));
                self.send_up(At::Agent(h), t, due);
            }
            (At::Root, m) => {
                let done = self.take_in(local, At::Root, t, &m);
                match m {
                    Msg::Report(g) => self.at_root(done, g),
                    Msg::Lost(r) if self.detected_at.is_none() => {
                        self.detected_at = Some(done);
                        self.failed(done, r);
                    }
                    _ => {}
                }
            }
            (At::Agent(h), m) => {
                let done = self.take_in(local, At::Agent(h), t, &m);
                self.at_agent(h, done, m);
            }
        }
    }

    /// Sends an agent's finished gatherings up, and sets its timer.
    fn send_up(&mut self, node: At, mut t: u64, out: Vec<Gathered>) {
        let At::Agent(h) = node else { return };
        for g in out {
            t = self.send(node, t, self.up(node), Msg::Report(g));
        }
        if let Some(d) = self.fans[h].deadline() {
            let d = d.as_nanos() as u64;
            if d > t {
                self.push(d, node, Msg::Due);
            }
        }
    }

    fn at_agent(&mut self, h: usize, t: u64, m: Msg) {
        let node = At::Agent(h);
        match m {
            Msg::Report(g) if self.flat() => {
                // Flat: an agent's own report (an end) goes to mpiexec.
                self.send(node, t, At::Root, Msg::Report(g));
            }
            Msg::Report(g) => {
                let out = self.fans[h].report(g, Duration::from_nanos(t));
                self.send_up(node, t, out);
            }
            Msg::Via { host, inner } => {
                if host == h {
                    self.at_agent(h, t, *inner);
                } else {
                    self.send_down(node, t, host, *inner);
                }
            }
            Msg::ToRank(r, inner) => {
                self.send(node, t, At::Rank(r), *inner);
            }
            Msg::StartAll => {
                let done = self.fan_out_agents(node, t, &Msg::StartAll);
                let ranks: Vec<usize> = self.ranks_of(h).collect();
                self.at_agent(h, done, Msg::Start(ranks));
            }
            Msg::Start(ranks) => {
                let mut done = t;
                for r in ranks {
                    done = self.serve(node, done, ns(self.c.spawn_us));
                    self.push(done, At::Rank(r), Msg::Start(vec![r]));
                }
            }
            Msg::KillAll => {
                let t = self.fan_out_agents(node, t, &Msg::KillAll);
                let own = self.ranks_of(h);
                // A signal to each, then each end seen.
                let done = self.serve(node, t, ns(self.c.send_us) * own.len() as u64);
                let gone = Gathered {
                    kind: Kind::Ended,
                    key: self.generation as u64,
                    ranks: RankSet::of(own.start as u32..own.end as u32),
                    value: Common::All(None),
                };
                let done = done + ns(self.c.detect_us);
                if self.flat() {
                    self.send(node, done, At::Root, Msg::Report(gone));
                } else {
                    let out = self.fans[h].report(gone, Duration::from_nanos(done));
                    self.send_up(node, done, out);
                }
            }
            Msg::Failure {
                generation,
                ref failed,
            } => {
                let out = self.fans[h].failure(generation as u64, failed);
                self.send_up(node, t, out);
                self.fan_out(node, t, &m);
            }
            Msg::Resume => {
                self.fans[h].resumed();
                self.fan_out(node, t, &m);
            }
            Msg::Welcome { addresses } => {
                let t = t + ns(self.c.per_address_us * addresses as f64);
                self.fan_out(node, t, &m);
            }
            Msg::Lost(r) => {
                self.send(node, t, self.up(node), Msg::Lost(r));
            }
            Msg::Died(_) | Msg::Due => {}
        }
    }

    fn fan_out_agents(&mut self, node: At, mut t: u64, m: &Msg) -> u64 {
        for k in self.child_agents(node) {
            t = self.send(node, t, At::Agent(k), m.clone());
        }
        t
    }

    fn at_root(&mut self, t: u64, g: Gathered) {
        let now = self.instant(t);
        let gen = g.key as u32;
        let mut resume = None;
        match g.kind {
            Kind::Agree => {
                // ULFM: every survivor agreed: the agreement's answer goes
                // to all (`Agreed`), and each shrinks.
                self.agreed += g.ranks.len();
                if self.agreed + 1 == self.s.ranks {
                    self.fan_out(At::Root, t, &Msg::Resume);
                }
            }
            Kind::Ended => {
                // cpr: processes of the old job gone.
                self.gone += g.ranks.len();
                if self.rec.relaunch_now(self.gone >= self.s.ranks, now) {
                    self.relaunch(t);
                }
            }
            Kind::Halted => {
                for r in g.ranks.iter() {
                    resume = resume.or(self.rec.halted(r as usize, gen, now));
                }
            }
            Kind::Ready => {
                let newest = match g.value {
                    Common::All(v) => v,
                    Common::Differ => None,
                };
                for r in g.ranks.iter() {
                    resume = resume.or(self.rec.ready(r as usize, gen, newest, now));
                }
            }
            Kind::Hello => {
                self.hellos += g.ranks.len();
                let w = Msg::Welcome {
                    addresses: self.s.ranks,
                };
                if self.s.mode != Mode::Cpr {
                    // A replacement: its Welcome to it alone.
                    for r in g.ranks.iter() {
                        self.send_to_rank(t, r as usize, w.clone());
                    }
                } else if self.hellos >= self.s.ranks {
                    self.fan_out(At::Root, t, &w);
                }
            }
            _ => {}
        }
        if resume.is_some() {
            self.fan_out(At::Root, t, &Msg::Resume);
        }
    }

    fn failed(&mut self, t: u64, r: usize) {
        let facts = Facts {
            bootstrapped: true,
            finalizing: None,
        };
        let now = self.instant(t);
        if self.s.mode == Mode::Ulfm {
            // No replacement: the failure is announced (as ProcFailed)
            // and the survivors agree among themselves.
            self.generation = 1;
            self.resumed += 1;
            let notice = Msg::Failure {
                generation: 1,
                failed: RankSet::one(r as u32),
            };
            self.fan_out(At::Root, t, &notice);
            return;
        }
        match self.rec.failed(r, facts, now, now) {
            Decision::Replace { generation, .. } => {
                self.generation = generation;
                self.rec.started(r);
                // The replacement first: its start overlaps the notices'
                // way.
                let h = self.host_of(r);
                let t = self.send_down(At::Root, t, h, Msg::Start(vec![r]));
                let notice = Msg::Failure {
                    generation,
                    failed: RankSet::one(r as u32),
                };
                self.fan_out(At::Root, t, &notice);
            }
            Decision::Relaunch { generation, .. } => {
                self.generation = generation;
                self.fan_out_agents(At::Root, t, &Msg::KillAll);
            }
            Decision::Refuse(why) => panic!("the simulated job refused: {why}"),
        }
    }

    /// cpr: every old process is gone: start them all again.
    fn relaunch(&mut self, t: u64) {
        for r in 0..self.s.ranks {
            self.rec.started(r);
        }
        self.fan_out_agents(At::Root, t, &Msg::StartAll);
    }

    fn at_rank(&mut self, r: usize, t: u64, m: Msg) {
        let node = At::Rank(r);
        let to = self.up(node);
        match m {
            // A new process: MPI_Init to its hello.
            Msg::Start(_) => {
                let done = self.serve(node, t, ns(self.c.init_us));
                let g = self.generation as u64;
                self.send(
                    node,
                    done,
                    to,
                    report(Kind::Hello, g, RankSet::one(r as u32), None),
                );
            }
            Msg::Failure { generation, failed } => {
                if failed.contains(r as u32) {
                    return;
                }
                let g = generation as u64;
                let halted = self.serve(node, t, ns(self.c.halt_us));
                let one = RankSet::one(r as u32);
                if self.s.mode == Mode::Ulfm {
                    // The error reaches the program, which shrinks: its
                    // agreement's contribution.
                    self.send(node, halted, to, report(Kind::Agree, g, one, Some(1)));
                    return;
                }
                let done = self.send(node, halted, to, report(Kind::Halted, g, one.clone(), None));
                let ready = self.serve(node, done, ns(self.c.rollback_us));
                self.send(node, ready, to, report(Kind::Ready, g, one, Some(1)));
            }
            Msg::Welcome { addresses } => {
                let cost = self.c.per_address_us * addresses as f64 + self.c.restore_us;
                let got = self.serve(node, t, ns(cost));
                let g = self.generation as u64;
                let one = RankSet::one(r as u32);
                self.send(node, got, to, report(Kind::Ready, g, one, Some(1)));
            }
            Msg::Resume => {
                let done = self.serve(node, t, ns(self.c.resume_us));
                self.resumed += 1;
                self.resumed_at = self.resumed_at.max(done);
                if self.s.mode != Mode::Ulfm {
                    // Its data loaded (the program's part: after the
                    // resume, not holding up the others'), confirmed.
                    let loaded = done + ns(self.c.load_us);
                    let g = self.generation as u64;
                    let one = RankSet::one(r as u32);
                    self.send(node, loaded, to, report(Kind::Restored, g, one, Some(1)));
                }
            }
            _ => {}
        }
    }
}
