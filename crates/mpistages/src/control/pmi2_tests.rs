//! The PMI-2 client against scripted answers (no process manager needed;
//! tests/slurm.rs runs it under a real `srun`).

use super::*;
use std::io::Cursor;

/// A connection whose answers are fixed in advance; what the client wrote
/// is kept for checking.
struct Scripted {
    answers: Cursor<Vec<u8>>,
    written: Vec<u8>,
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.answers.read(buf)
    }
}

impl Write for Scripted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.written.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn framed(body: &str) -> Vec<u8> {
    format!("{:<6}{body}", body.len()).into_bytes()
}

const INIT_OK: &str = "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";

fn scripted(answers: &[&str]) -> Scripted {
    let mut bytes = INIT_OK.as_bytes().to_vec();
    for a in answers {
        bytes.extend(framed(a));
    }
    Scripted {
        answers: Cursor::new(bytes),
        written: Vec::new(),
    }
}

const FULLINIT_OK: &str = "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=2;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;";

#[test]
fn encodes_with_a_padded_length_prefix() {
    let m = Message::new("kvs-put", &[("key", "a"), ("value", "1.2.3.4:5")]);
    assert_eq!(
        m.encode().unwrap(),
        b"34    cmd=kvs-put;key=a;value=1.2.3.4:5;".to_vec()
    );
}

#[test]
fn parses_what_it_encodes() {
    let m = Message::new(
        "kvs-get-response",
        &[("rc", "0"), ("found", "TRUE"), ("value", "x=y")],
    );
    let bytes = m.encode().unwrap();
    assert_eq!(Message::read_from(&mut &bytes[..]).unwrap(), m);
}

#[test]
fn refuses_values_it_cannot_carry() {
    let m = Message::new("kvs-put", &[("key", "a"), ("value", "1;2")]);
    assert_eq!(m.encode().unwrap_err().kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn init_fullinit_put_fence_get_finalize() {
    let s = scripted(&[
        FULLINIT_OK,
        "cmd=kvs-put-response;rc=0;",
        "cmd=kvs-fence-response;rc=0;",
        "cmd=kvs-get-response;rc=0;found=TRUE;value=198.18.0.2:4000;",
        "cmd=kvs-get-response;rc=0;found=FALSE;",
        "cmd=finalize-response;rc=0;",
    ]);
    let mut p = Pmi2::init(s, 2, "7.0").unwrap();
    assert_eq!(p.identity, Identity { rank: 2, size: 4 });
    p.put("addr-2", "198.18.0.3:4001").unwrap();
    p.fence().unwrap();
    assert_eq!(p.get("addr-1").unwrap().as_deref(), Some("198.18.0.2:4000"));
    assert_eq!(p.get("nothing").unwrap(), None);
    p.finalize().unwrap();
    let written = String::from_utf8(p.stream.written).unwrap();
    assert!(written.starts_with("cmd=init pmi_version=2 pmi_subversion=0\n"));
    for part in [
        "cmd=fullinit;pmijobid=7.0;pmirank=2;threaded=FALSE;",
        "cmd=kvs-put;key=addr-2;value=198.18.0.3:4001;",
        "cmd=kvs-fence;",
        "cmd=kvs-get;jobid=;srcid=-1;key=addr-1;",
        "cmd=finalize;",
    ] {
        assert!(written.contains(part), "{part} missing from {written}");
    }
}

#[test]
fn a_refused_init_is_an_error() {
    let mut s = scripted(&[]);
    s.answers =
        Cursor::new(b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n".to_vec());
    let e = Pmi2::init(s, 0, "1").err().unwrap();
    assert!(e.to_string().contains("refused"), "{e}");
}

#[test]
fn an_error_answer_carries_its_message() {
    let s = scripted(&[
        FULLINIT_OK,
        "cmd=kvs-fence-response;rc=14;errmsg=failed to send temp kvs;",
    ]);
    let mut p = Pmi2::init(s, 2, "1").unwrap();
    let e = p.fence().unwrap_err();
    assert!(
        e.to_string().contains("rc=14: failed to send temp kvs"),
        "{e}"
    );
}

#[test]
fn malformed_answers_are_errors_not_panics() {
    for bad in [
        "cmd=fullinit-response;rc=0;rank=5;size=4;",
        "cmd=fullinit-response;rc=0;rank=x;size=4;",
        "cmd=fullinit-response;rc=0;size=4;",
        "cmd=kvs-put-response;rc=0;",
        "rank=1;cmd=fullinit-response;",
        "cmd=fullinit-response;rc=0;garbage;",
        "",
    ] {
        assert!(Pmi2::init(scripted(&[bad]), 0, "1").is_err(), "{bad}");
    }
    // A length prefix that is not a number, and one longer than the bytes.
    for raw in [&b"abcdefcmd=x;"[..], &b"40    cmd=fullinit-response;"[..]] {
        let mut bytes = INIT_OK.as_bytes().to_vec();
        bytes.extend_from_slice(raw);
        let s = Scripted {
            answers: Cursor::new(bytes),
            written: Vec::new(),
        };
        assert!(Pmi2::init(s, 0, "1").is_err());
    }
}

#[test]
fn abort_sends_one_message_without_semicolons() {
    let mut p = Pmi2::init(scripted(&[FULLINIT_OK]), 2, "1").unwrap();
    p.abort("rank 2; bad\nthing").unwrap();
    let written = String::from_utf8(p.stream.written).unwrap();
    assert!(
        written.ends_with("cmd=abort;isworld=TRUE;msg=rank 2, bad,thing;"),
        "{written}"
    );
}
