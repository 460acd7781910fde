//! The client side of PMI-2, the process-management interface Slurm's
//! `srun --mpi=pmi2` offers (its `mpi/pmi2` plugin in `slurmstepd`): a
//! job started directly by `srun` learns its rank and size from it and
//! exchanges transport addresses through its key-value space.
//!
//! The wire format: the connection (file descriptor `PMI_FD`) opens with
//! one PMI-1 style line, `cmd=init pmi_version=2 pmi_subversion=0\n`,
//! answered by `cmd=response_to_init ... rc=0\n`; every later message is a
//! six-character decimal length (left-aligned, space-padded) followed by
//! that many bytes of `key=value;` pairs, the first pair being `cmd=NAME`.
//! Values may not contain `;` (Slurm does not unescape `;;`).
//!
//! Everything here is checked: a short, malformed or unexpected answer is
//! an error with the bytes' meaning, never a panic.

use std::io::{self, Read, Write};

/// Largest message body the length prefix can announce.
const MAX_BODY: usize = 999_999;
/// PMI-2's limits on keys and values (`PMI2_MAX_KEYLEN`, `PMI2_MAX_VALLEN`).
pub const MAX_KEY: usize = 64;
pub const MAX_VALUE: usize = 1024;

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// One PMI-2 message: its command and its other pairs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub cmd: String,
    pub pairs: Vec<(String, String)>,
}

impl Message {
    pub fn new(cmd: &str, pairs: &[(&str, &str)]) -> Message {
        Message {
            cmd: cmd.into(),
            pairs: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn require(&self, key: &str) -> io::Result<&str> {
        self.get(key)
            .ok_or_else(|| invalid(format!("PMI-2 {} without '{key}'", self.cmd)))
    }

    fn number(&self, key: &str) -> io::Result<i64> {
        let v = self.require(key)?;
        v.parse()
            .map_err(|_| invalid(format!("PMI-2 {}: {key}='{v}' is not a number", self.cmd)))
    }

    /// The answer's `rc`, as an error when it is not 0.
    fn check_rc(&self) -> io::Result<()> {
        match self.number("rc")? {
            0 => Ok(()),
            rc => Err(io::Error::other(format!(
                "PMI-2 {} failed with rc={rc}{}",
                self.cmd,
                self.get("errmsg")
                    .map_or(String::new(), |m| format!(": {m}"))
            ))),
        }
    }

    /// The framed bytes: length prefix and body.
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let mut body = format!("cmd={};", self.cmd);
        for (k, v) in &self.pairs {
            if k.is_empty() || k.contains(['=', ';']) || v.contains(';') {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("PMI-2 cannot carry the pair '{k}={v}'"),
                ));
            }
            body.push_str(&format!("{k}={v};"));
        }
        if body.len() > MAX_BODY {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "PMI-2 message too long",
            ));
        }
        Ok(format!("{:<6}{body}", body.len()).into_bytes())
    }

    /// Parses a body (without its length prefix).
    pub fn parse(body: &[u8]) -> io::Result<Message> {
        let text = std::str::from_utf8(body).map_err(|_| invalid("PMI-2 message is not text"))?;
        let mut pairs = Vec::new();
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| invalid(format!("PMI-2 message has '{part}' without '='")))?;
            pairs.push((k.to_string(), v.to_string()));
        }
        match pairs.first() {
            Some((k, _)) if k == "cmd" => {
                let cmd = pairs.remove(0).1;
                Ok(Message { cmd, pairs })
            }
            _ => Err(invalid(format!(
                "PMI-2 message does not start with cmd=: '{text}'"
            ))),
        }
    }

    /// Reads one framed message.
    pub fn read_from(r: &mut impl Read) -> io::Result<Message> {
        let mut len = [0u8; 6];
        r.read_exact(&mut len)?;
        let n: usize = std::str::from_utf8(&len)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                invalid(format!(
                    "PMI-2 length prefix {:?}",
                    String::from_utf8_lossy(&len)
                ))
            })?;
        let mut body = vec![0u8; n];
        r.read_exact(&mut body)?;
        Message::parse(&body)
    }
}

/// What `fullinit` told this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub rank: usize,
    pub size: usize,
}

/// A PMI-2 connection (over `PMI_FD` in a real job).
pub struct Pmi2<S: Read + Write> {
    stream: S,
    pub identity: Identity,
}

impl<S: Read + Write> Pmi2<S> {
    /// The handshake: the PMI-1 style version line, then `fullinit`.
    pub fn init(mut stream: S, rank_hint: usize, jobid: &str) -> io::Result<Pmi2<S>> {
        stream.write_all(b"cmd=init pmi_version=2 pmi_subversion=0\n")?;
        let line = read_line(&mut stream)?;
        let words: Vec<(&str, &str)> = line
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        let get = |k: &str| words.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        if get("cmd") != Some("response_to_init") || get("rc") != Some("0") {
            return Err(invalid(format!("PMI-2 init refused: '{line}'")));
        }
        if get("pmi_version") != Some("2") {
            return Err(invalid(format!(
                "PMI server does not speak PMI-2: '{line}'"
            )));
        }
        let rank = rank_hint.to_string();
        let answer = exchange(
            &mut stream,
            &Message::new(
                "fullinit",
                &[
                    ("pmijobid", jobid),
                    ("pmirank", &rank),
                    ("threaded", "FALSE"),
                ],
            ),
            "fullinit-response",
        )?;
        let size = answer.number("size")?;
        let rank = answer.number("rank")?;
        if size <= 0 || rank < 0 || rank >= size {
            return Err(invalid(format!("PMI-2 gave rank {rank} of {size}")));
        }
        Ok(Pmi2 {
            stream,
            identity: Identity {
                rank: rank as usize,
                size: size as usize,
            },
        })
    }

    pub fn put(&mut self, key: &str, value: &str) -> io::Result<()> {
        if key.len() > MAX_KEY || value.len() > MAX_VALUE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("PMI-2 key or value too long ('{key}')"),
            ));
        }
        exchange(
            &mut self.stream,
            &Message::new("kvs-put", &[("key", key), ("value", value)]),
            "kvs-put-response",
        )
        .map(drop)
    }

    /// Waits until every process of the job put its pairs.
    pub fn fence(&mut self) -> io::Result<()> {
        exchange(
            &mut self.stream,
            &Message::new("kvs-fence", &[]),
            "kvs-fence-response",
        )
        .map(drop)
    }

    pub fn get(&mut self, key: &str) -> io::Result<Option<String>> {
        let answer = exchange(
            &mut self.stream,
            &Message::new("kvs-get", &[("jobid", ""), ("srcid", "-1"), ("key", key)]),
            "kvs-get-response",
        )?;
        Ok(match answer.get("found") {
            Some(f) if f.eq_ignore_ascii_case("true") => Some(answer.require("value")?.to_string()),
            _ => None,
        })
    }

    /// Asks the process manager to end the whole job (no answer comes).
    pub fn abort(&mut self, message: &str) -> io::Result<()> {
        let message: String = message
            .chars()
            .map(|c| if c == ';' || c == '\n' { ',' } else { c })
            .take(MAX_VALUE)
            .collect();
        let m = Message::new("abort", &[("isworld", "TRUE"), ("msg", &message)]);
        self.stream.write_all(&m.encode()?)
    }

    pub fn finalize(&mut self) -> io::Result<()> {
        exchange(
            &mut self.stream,
            &Message::new("finalize", &[]),
            "finalize-response",
        )
        .map(drop)
    }
}

/// Sends `request` and reads its answer, which must be `expect` with rc=0.
fn exchange(
    stream: &mut (impl Read + Write),
    request: &Message,
    expect: &str,
) -> io::Result<Message> {
    stream.write_all(&request.encode()?)?;
    let answer = Message::read_from(stream)?;
    if answer.cmd != expect {
        return Err(invalid(format!(
            "PMI-2 answered {} with {}",
            request.cmd, answer.cmd
        )));
    }
    answer.check_rc()?;
    Ok(answer)
}

/// The init answer: one line, read byte by byte so nothing after it is
/// consumed.
fn read_line(r: &mut impl Read) -> io::Result<String> {
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while line.len() < 1024 {
        r.read_exact(&mut b)?;
        if b[0] == b'\n' {
            return String::from_utf8(line).map_err(|_| invalid("PMI init answer is not text"));
        }
        line.push(b[0]);
    }
    Err(invalid("PMI init answer longer than 1024 bytes"))
}

#[cfg(test)]
#[path = "pmi2_tests.rs"]
mod tests;
