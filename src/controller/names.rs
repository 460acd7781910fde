//! The job's name service (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`): a table at mpiexec, so that a name published by
//! any process of the job (spawned ones too) is found by every other.
//! A sans-I/O table: a request in, the answer to send back out.

use mpistages_control::proto::{NameRequest, ToRank};
use std::collections::HashMap;

/// At most this many names at once, and this long each: a bound on what
/// a process can make mpiexec hold.
const MAX_NAMES: usize = 4096;
const MAX_LEN: usize = 1024;

#[derive(Default)]
pub(super) struct Names {
    ports: HashMap<String, String>,
}

impl Names {
    pub(super) fn handle(&mut self, req: NameRequest) -> ToRank {
        match self.apply(req) {
            Ok(port) => ToRank::Named {
                port,
                error: String::new(),
            },
            Err(error) => ToRank::Named {
                port: String::new(),
                error,
            },
        }
    }

    fn apply(&mut self, req: NameRequest) -> Result<String, String> {
        match req {
            NameRequest::Publish { service, port } => {
                if service.len() > MAX_LEN || port.len() > MAX_LEN {
                    return Err(format!(
                        "a service or port name is longer than {MAX_LEN} bytes"
                    ));
                }
                if let Some(p) = self.ports.get(&service) {
                    return Err(format!(
                        "service '{service}' is already published (port '{p}')"
                    ));
                }
                if self.ports.len() >= MAX_NAMES {
                    return Err(format!("the job has {MAX_NAMES} names published already"));
                }
                self.ports.insert(service, port);
                Ok(String::new())
            }
            NameRequest::Unpublish { service, port } => match self.ports.get(&service) {
                Some(p) if *p == port => {
                    self.ports.remove(&service);
                    Ok(String::new())
                }
                Some(p) => Err(format!(
                    "service '{service}' is published with port '{p}', not '{port}'"
                )),
                None => Err(format!("service '{service}' is not published")),
            },
            NameRequest::Lookup { service } => self
                .ports
                .get(&service)
                .cloned()
                .ok_or_else(|| format!("service '{service}' is not published")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(n: &mut Names, req: NameRequest) -> Result<String, String> {
        match n.handle(req) {
            ToRank::Named { port, error } if error.is_empty() => Ok(port),
            ToRank::Named { error, .. } => Err(error),
            other => panic!("{other:?}"),
        }
    }

    fn publish(s: &str, p: &str) -> NameRequest {
        NameRequest::Publish {
            service: s.into(),
            port: p.into(),
        }
    }

    fn lookup(s: &str) -> NameRequest {
        NameRequest::Lookup { service: s.into() }
    }

    #[test]
    fn a_published_name_is_found_until_it_is_unpublished() {
        let mut n = Names::default();
        assert_eq!(answer(&mut n, publish("ocean", "p1")), Ok(String::new()));
        assert_eq!(answer(&mut n, lookup("ocean")), Ok("p1".into()));
        let twice = answer(&mut n, publish("ocean", "p2")).unwrap_err();
        assert!(twice.contains("already published"), "{twice}");
        let wrong = NameRequest::Unpublish {
            service: "ocean".into(),
            port: "p2".into(),
        };
        assert!(answer(&mut n, wrong).unwrap_err().contains("not 'p2'"));
        let right = NameRequest::Unpublish {
            service: "ocean".into(),
            port: "p1".into(),
        };
        assert_eq!(answer(&mut n, right.clone()), Ok(String::new()));
        assert!(answer(&mut n, lookup("ocean"))
            .unwrap_err()
            .contains("not published"));
        assert!(answer(&mut n, right).unwrap_err().contains("not published"));
    }

    #[test]
    fn the_table_is_bounded() {
        let mut n = Names::default();
        for i in 0..MAX_NAMES {
            assert!(answer(&mut n, publish(&format!("s{i}"), "p")).is_ok());
        }
        assert!(answer(&mut n, publish("one more", "p"))
            .unwrap_err()
            .contains("already"));
        let long = "x".repeat(MAX_LEN + 1);
        assert!(answer(&mut n, publish(&long, "p"))
            .unwrap_err()
            .contains("longer"));
    }
}
