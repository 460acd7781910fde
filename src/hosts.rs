//! Hosts and placement: the hosts a job may use and how many ranks each
//! takes (`--host`, `--hostfile`), and which rank runs where (`--map-by`,
//! `-ppn`, `--oversubscribe`). Pure functions, tested without processes.

/// A host and the ranks it takes without oversubscription.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    pub slots: usize,
}

/// How ranks are laid out over the hosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MapBy {
    /// Fill each host's slots before the next host (Open MPI's default).
    #[default]
    Slot,
    /// One rank per host in turn.
    Node,
}

impl MapBy {
    pub fn parse(s: &str) -> Result<MapBy, String> {
        match s {
            "slot" | "core" => Ok(MapBy::Slot),
            "node" => Ok(MapBy::Node),
            _ => Err(format!("--map-by takes slot or node, not '{s}'")),
        }
    }
}

fn name_ok(name: &str) -> Result<&str, String> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(name)
    } else {
        Err(format!("'{name}' is not a host name"))
    }
}

fn slots(what: &str, v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{what} needs a positive number of slots, not '{v}'"
        )),
    }
}

/// One host as `NAME` (one slot) or `NAME:SLOTS`.
fn host_item(item: &str) -> Result<Host, String> {
    let (name, n) = match item.rsplit_once(':') {
        Some((name, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => {
            (name, slots(item, n)?)
        }
        _ => (item, 1),
    };
    Ok(Host {
        name: name_ok(name)?.to_string(),
        slots: n,
    })
}

/// Adds `h` to `hosts`; a host named twice gets the slots of both.
fn add(hosts: &mut Vec<Host>, h: Host) {
    match hosts.iter_mut().find(|x| x.name == h.name) {
        Some(x) => x.slots += h.slots,
        None => hosts.push(h),
    }
}

/// `--host h1:4,h2:4` (a host without a count has one slot).
pub fn parse_host_list(list: &str) -> Result<Vec<Host>, String> {
    let mut hosts = Vec::new();
    for item in list.split(',') {
        add(
            &mut hosts,
            host_item(item.trim()).map_err(|e| format!("--host: {e}"))?,
        );
    }
    Ok(hosts)
}

/// A hostfile: one host per line as `NAME`, `NAME:SLOTS` or
/// `NAME slots=SLOTS` (also `max_slots=`, taken as the slots when no
/// `slots=` is given); `#` starts a comment; blank lines are skipped.
pub fn parse_hostfile(text: &str, file: &str) -> Result<Vec<Host>, String> {
    let mut hosts = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("{file}:{}: {e}", n + 1);
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let first = words.next().expect("not empty");
        let mut host = host_item(first).map_err(at)?;
        let (mut given, mut max) = (None, None);
        for w in words {
            match w.split_once('=') {
                Some(("slots", v)) => given = Some(slots("slots=", v).map_err(at)?),
                Some(("max_slots" | "max-slots", v)) => {
                    max = Some(slots("max_slots=", v).map_err(at)?)
                }
                _ => return Err(at(format!("unknown word '{w}' (expected slots=N)"))),
            }
        }
        if first.contains(':') && (given.is_some() || max.is_some()) {
            return Err(at(format!("'{first}' gives its slots twice")));
        }
        if let Some(n) = given.or(max) {
            host.slots = n;
        }
        add(&mut hosts, host);
    }
    if hosts.is_empty() {
        return Err(format!("{file}: no hosts in it"));
    }
    Ok(hosts)
}

/// Where each rank runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    pub map_by: MapBy,
    /// At most this many ranks per host (`-ppn`, `--npernode`).
    pub per_host: Option<usize>,
    /// More ranks than slots are allowed (they share the host's cores).
    pub oversubscribe: bool,
}

/// The host (an index into `hosts`) of each of `n` ranks.
pub fn place(hosts: &[Host], n: usize, p: Policy) -> Result<Vec<usize>, String> {
    if hosts.is_empty() {
        return Err("no hosts to place ranks on".into());
    }
    // What each host may take: its slots, or `-ppn` ranks.
    let cap: Vec<usize> = hosts
        .iter()
        .map(|h| p.per_host.unwrap_or(h.slots))
        .collect();
    let total: usize = cap.iter().sum();
    if n > total && !p.oversubscribe {
        let list: Vec<String> = hosts
            .iter()
            .zip(&cap)
            .map(|(h, c)| format!("{}:{c}", h.name))
            .collect();
        return Err(format!(
            "{n} ranks asked for but the hosts have {total} slots ({}); give more hosts or slots, or allow it with --oversubscribe",
            list.join(", ")
        ));
    }
    let mut used = vec![0; hosts.len()];
    let mut at = Vec::with_capacity(n);
    // A pass fills every host up to its room (host after host by slot, one
    // rank per host in turn by node); oversubscribed, passes repeat with
    // every host's room grown by as much again.
    let mut pass = 1;
    while at.len() < n {
        match p.map_by {
            MapBy::Slot => {
                for (h, (u, c)) in used.iter_mut().zip(&cap).enumerate() {
                    while *u < c * pass && at.len() < n {
                        *u += 1;
                        at.push(h);
                    }
                }
            }
            MapBy::Node => loop {
                let before = at.len();
                for (h, (u, c)) in used.iter_mut().zip(&cap).enumerate() {
                    if *u < c * pass && at.len() < n {
                        *u += 1;
                        at.push(h);
                    }
                }
                if at.len() == before {
                    break;
                }
            },
        }
        pass += 1;
    }
    Ok(at)
}

/// The shift k (1 ≤ k < n) that puts the partner copy of every rank r on
/// rank (r + k) mod n of another host, for the ranks' hosts `placement`:
/// the smallest that does, else 1 (all ranks on one host).
pub fn partner_shift(placement: &[usize]) -> usize {
    let n = placement.len();
    (1..n)
        .find(|&k| (0..n).all(|r| placement[r] != placement[(r + k) % n]))
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(list: &str) -> Vec<Host> {
        parse_host_list(list).unwrap()
    }

    #[test]
    fn host_lists() {
        assert_eq!(
            h("a:4,b:2,c"),
            vec![
                Host {
                    name: "a".into(),
                    slots: 4
                },
                Host {
                    name: "b".into(),
                    slots: 2
                },
                Host {
                    name: "c".into(),
                    slots: 1
                }
            ]
        );
        assert_eq!(
            h("a,a:2"),
            vec![Host {
                name: "a".into(),
                slots: 3
            }]
        );
        for bad in ["a:0", "a:x2", "", "a,,b", "a b:2", "a/b"] {
            assert!(parse_host_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn hostfiles_in_both_forms_with_comments() {
        let text = "# cluster\n\nn1 slots=4\nn2:2   # the small one\n  n3\nn4 max_slots=3\n";
        let hosts = parse_hostfile(text, "hf").unwrap();
        let got: Vec<(&str, usize)> = hosts.iter().map(|h| (h.name.as_str(), h.slots)).collect();
        assert_eq!(got, vec![("n1", 4), ("n2", 2), ("n3", 1), ("n4", 3)]);
        let err = parse_hostfile("n1 slots=4\nn2 cpus=2\n", "hf").unwrap_err();
        assert!(err.starts_with("hf:2: unknown word 'cpus=2'"), "{err}");
        assert!(parse_hostfile("n1:2 slots=3\n", "hf").is_err());
        assert!(parse_hostfile("n1 slots=0\n", "hf").is_err());
        assert!(parse_hostfile("# nothing\n", "hf").is_err());
    }

    fn names(hosts: &[Host], at: &[usize]) -> String {
        at.iter().map(|&i| hosts[i].name.as_str()).collect()
    }

    #[test]
    fn placement_by_slot_and_by_node() {
        let hs = h("a:2,b:2,c:1");
        let slot = Policy::default();
        assert_eq!(names(&hs, &place(&hs, 5, slot).unwrap()), "aabbc");
        assert_eq!(names(&hs, &place(&hs, 3, slot).unwrap()), "aab");
        let node = Policy {
            map_by: MapBy::Node,
            ..slot
        };
        assert_eq!(names(&hs, &place(&hs, 5, node).unwrap()), "abcab");
        assert_eq!(names(&hs, &place(&hs, 4, node).unwrap()), "abca");
    }

    #[test]
    fn more_ranks_than_slots_only_with_oversubscribe() {
        let hs = h("a:2,b:1");
        let err = place(&hs, 4, Policy::default()).unwrap_err();
        assert!(
            err.contains("4 ranks asked for but the hosts have 3 slots (a:2, b:1)")
                && err.contains("--oversubscribe"),
            "{err}"
        );
        let over = Policy {
            oversubscribe: true,
            ..Policy::default()
        };
        assert_eq!(names(&hs, &place(&hs, 7, over).unwrap()), "aabaaba");
        let node = Policy {
            map_by: MapBy::Node,
            ..over
        };
        assert_eq!(names(&hs, &place(&hs, 5, node).unwrap()), "abaab");
    }

    #[test]
    fn partners_on_other_hosts() {
        assert_eq!(partner_shift(&[0, 0, 1, 1]), 2);
        assert_eq!(partner_shift(&[0, 1, 0, 1]), 1);
        assert_eq!(partner_shift(&[0, 0, 1, 1, 2, 2]), 2);
        assert_eq!(partner_shift(&[0, 0, 0, 1]), 1, "no shift works: 1");
        assert_eq!(partner_shift(&[0, 0, 0]), 1);
        assert_eq!(partner_shift(&[0]), 1);
        let p = [0, 0, 0, 1, 1, 1, 2, 2, 2];
        let k = partner_shift(&p);
        assert!((0..9).all(|r| p[r] != p[(r + k) % 9]), "k = {k}");
    }

    #[test]
    fn ranks_per_host() {
        let hs = h("a:4,b:4");
        let ppn = Policy {
            per_host: Some(2),
            ..Policy::default()
        };
        assert_eq!(names(&hs, &place(&hs, 4, ppn).unwrap()), "aabb");
        assert!(place(&hs, 5, ppn).is_err(), "2 per host on 2 hosts is 4");
    }
}
