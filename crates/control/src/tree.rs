//! The shape of the control tree: `mpiexec` at the root, the hosts' agents
//! below it, each node with at most `radix` agents as children, numbered
//! breadth first (the root's children are hosts `0..radix`, host `h`'s are
//! `radix*(h+1) ..`). A host's ranks hang off its agent. With a radix at
//! least the number of hosts the tree is flat: every agent is the root's.

use std::ops::Range;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    Root,
    Host(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tree {
    pub hosts: usize,
    pub radix: usize,
}

impl Tree {
    pub fn new(hosts: usize, radix: usize) -> Tree {
        Tree {
            hosts,
            radix: radix.max(1),
        }
    }

    pub fn parent(&self, host: usize) -> Node {
        if host < self.radix {
            Node::Root
        } else {
            Node::Host(host / self.radix - 1)
        }
    }

    /// The hosts whose agents are `node`'s children.
    pub fn children(&self, node: Node) -> Range<usize> {
        let first = match node {
            Node::Root => 0,
            Node::Host(h) => self.radix.saturating_mul(h + 1),
        };
        first.min(self.hosts)..first.saturating_add(self.radix).min(self.hosts)
    }

    /// How many links from the root to `host`'s agent.
    pub fn depth(&self, host: usize) -> usize {
        let mut d = 1;
        let mut node = self.parent(host);
        while let Node::Host(h) = node {
            d += 1;
            node = self.parent(h);
        }
        d
    }

    /// The hosts of the subtree under `host`, itself first, breadth first.
    pub fn subtree(&self, host: usize) -> Vec<usize> {
        let mut out = vec![host];
        let mut i = 0;
        while i < out.len() {
            out.extend(self.children(Node::Host(out[i])));
            i += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_is_reached_once_and_parents_match_children() {
        for (hosts, radix) in [(1, 4), (5, 2), (16, 4), (1024, 32), (1000, 3), (7, 100)] {
            let t = Tree::new(hosts, radix);
            let mut seen = vec![0; hosts];
            let mut todo = vec![Node::Root];
            while let Some(n) = todo.pop() {
                let kids = t.children(n);
                assert!(kids.len() <= radix);
                for h in kids {
                    assert_eq!(t.parent(h), n);
                    seen[h] += 1;
                    todo.push(Node::Host(h));
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "{hosts} hosts, radix {radix}");
            // Depth is logarithmic in the hosts.
            let deepest = (0..hosts).map(|h| t.depth(h)).max().unwrap();
            let mut bound = 1;
            let mut reach = radix;
            while reach < hosts {
                bound += 1;
                reach = reach * radix + radix;
            }
            assert!(
                deepest <= bound,
                "{hosts} hosts, radix {radix}: depth {deepest}"
            );
        }
        assert_eq!(Tree::new(8, 8).depth(7), 1, "a radix of all hosts is flat");
        assert_eq!(Tree::new(7, 2).subtree(0), [0, 2, 3, 6]);
    }
}
