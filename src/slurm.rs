//! Running inside a Slurm allocation (`salloc`, `sbatch`): the hosts and
//! slots Slurm gave the job, read from its variables, and the command
//! that starts an agent on one of them (`srun`). Pure functions, tested
//! without Slurm; tests/slurm.rs runs them under a real one.

use crate::hosts::Host;

/// What mpiexec reads from Slurm's environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allocation {
    /// `SLURM_JOB_NODELIST`, e.g. `node[01-03],gpu7`.
    pub nodelist: Option<String>,
    /// `SLURM_TASKS_PER_NODE`, e.g. `4(x2),2`.
    pub tasks_per_node: Option<String>,
}

impl Allocation {
    pub fn from_env() -> Allocation {
        Allocation {
            nodelist: std::env::var("SLURM_JOB_NODELIST")
                .or_else(|_| std::env::var("SLURM_NODELIST"))
                .ok(),
            tasks_per_node: std::env::var("SLURM_TASKS_PER_NODE").ok(),
        }
    }

    /// Inside an allocation.
    pub fn present(&self) -> bool {
        self.nodelist.is_some()
    }

    /// The allocation's hosts with their slots (tasks per node).
    pub fn hosts(&self) -> Result<Vec<Host>, String> {
        let list = self
            .nodelist
            .as_deref()
            .ok_or("--launcher slurm needs a Slurm allocation (salloc or sbatch): SLURM_JOB_NODELIST is not set")?;
        let names = expand_hostlist(list)?;
        let counts = match &self.tasks_per_node {
            Some(t) => expand_counts(t)?,
            None => vec![1; names.len()],
        };
        if counts.len() != names.len() {
            return Err(format!(
                "Slurm gave {} nodes ({list}) but tasks for {} (SLURM_TASKS_PER_NODE)",
                names.len(),
                counts.len()
            ));
        }
        Ok(names
            .into_iter()
            .zip(counts)
            .map(|(name, slots)| Host { name, slots })
            .collect())
    }
}

/// The launcher command for one agent: a one-task step on the host
/// (appended), sharing the allocation's resources with the ranks
/// (`--overlap`), with no binding and no PMI of its own.
pub fn launcher() -> Vec<String> {
    [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        "--overlap",
        "--cpu-bind=none",
        "--mpi=none",
        "--quiet",
        "--nodelist",
    ]
    .map(String::from)
    .to_vec()
}

/// The address Slurm knows node `name` by (`NodeAddr`), for node names
/// that are not in DNS or /etc/hosts.
pub fn node_address(name: &str) -> Option<std::net::IpAddr> {
    let out = std::process::Command::new("scontrol")
        .args(["show", "node", "--oneliner", name])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    node_addr_of(&String::from_utf8_lossy(&out.stdout))
}

/// `NodeAddr=` of `scontrol show node --oneliner` output.
fn node_addr_of(text: &str) -> Option<std::net::IpAddr> {
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("NodeAddr="))
        .and_then(|a| a.parse().ok())
}

/// Expands Slurm's compressed host list: `n[1-3,7],gpu[08-09]x,login`.
pub fn expand_hostlist(list: &str) -> Result<Vec<String>, String> {
    let bad = |why: &str| format!("cannot read the Slurm host list '{list}': {why}");
    let mut out = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        // One item ends at the first comma outside brackets.
        let mut depth = 0;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                ',' if depth == 0 => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let item = &rest[..end];
        rest = rest[end..].strip_prefix(',').unwrap_or("");
        match item.split_once('[') {
            None if !item.is_empty() && !item.contains(']') => out.push(item.to_string()),
            None => return Err(bad("an empty or unbalanced name")),
            Some((prefix, tail)) => {
                let (ranges, suffix) = tail.split_once(']').ok_or_else(|| bad("no ']'"))?;
                if suffix.contains(['[', ']']) {
                    return Err(bad("more than one bracket group in one name"));
                }
                for r in ranges.split(',') {
                    let (a, b) = r.split_once('-').unwrap_or((r, r));
                    let (lo, hi) = (
                        a.parse::<u64>()
                            .map_err(|_| bad("a range that is not a number"))?,
                        b.parse::<u64>()
                            .map_err(|_| bad("a range that is not a number"))?,
                    );
                    if lo > hi || hi - lo > 100_000 {
                        return Err(bad("a range that runs backwards or is too long"));
                    }
                    // Zero padding is kept: node[01-10] gives node01 … node10.
                    let width = a.len();
                    for n in lo..=hi {
                        out.push(format!("{prefix}{n:0width$}{suffix}"));
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return Err(bad("no hosts"));
    }
    Ok(out)
}

/// Expands `SLURM_TASKS_PER_NODE`: `4(x2),2` is 4, 4, 2.
pub fn expand_counts(s: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("cannot read SLURM_TASKS_PER_NODE '{s}'");
    let mut out = Vec::new();
    for item in s.split(',') {
        let (n, times) = match item.split_once("(x") {
            Some((n, t)) => (
                n,
                t.strip_suffix(')')
                    .and_then(|t| t.parse::<usize>().ok())
                    .ok_or_else(bad)?,
            ),
            None => (item, 1),
        };
        let n: usize = n.trim().parse().map_err(|_| bad())?;
        if n == 0 || times == 0 || times > 100_000 {
            return Err(bad());
        }
        out.extend(std::iter::repeat_n(n, times));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_expand_as_slurm_writes_them() {
        assert_eq!(expand_hostlist("login").unwrap(), vec!["login"]);
        assert_eq!(
            expand_hostlist("n[1-3,7],gpu[08-10]x,login").unwrap(),
            vec!["n1", "n2", "n3", "n7", "gpu08x", "gpu09x", "gpu10x", "login"]
        );
        assert_eq!(
            expand_hostlist("node[001-002]").unwrap(),
            vec!["node001", "node002"]
        );
        for bad in ["", "n[1-", "n[3-1]", "n[a-b]", "n]1", "n[1][2]", "a,,b"] {
            assert!(expand_hostlist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_addresses_come_from_scontrol_lines() {
        let line =
            "NodeName=mpsn0 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.18.0.2 NodeHostName=vm";
        assert_eq!(node_addr_of(line), Some([198, 18, 0, 2].into()));
        assert_eq!(node_addr_of("NodeName=x NodeAddr=x NodeHostName=x"), None);
        assert_eq!(node_addr_of(""), None);
    }

    #[test]
    fn task_counts_expand() {
        assert_eq!(expand_counts("4(x2),2").unwrap(), vec![4, 4, 2]);
        assert_eq!(expand_counts("3").unwrap(), vec![3]);
        for bad in ["", "x", "2(x0)", "2(x", "0", "2(xa)"] {
            assert!(expand_counts(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_allocation_gives_hosts_and_slots() {
        let a = Allocation {
            nodelist: Some("c[1-2],d".into()),
            tasks_per_node: Some("2(x2),1".into()),
        };
        let hs = a.hosts().unwrap();
        let got: Vec<(&str, usize)> = hs.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(got, vec![("c1", 2), ("c2", 2), ("d", 1)]);
        let wrong = Allocation {
            nodelist: Some("c[1-2]".into()),
            tasks_per_node: Some("2".into()),
        };
        assert!(wrong.hosts().unwrap_err().contains("tasks for 1"));
        assert!(Allocation::default()
            .hosts()
            .unwrap_err()
            .contains("allocation"));
    }
}
