//! An epoch's copy in this process's memory (the `mem` level): made while
//! the program waited, or still being made by a snapshot
//! (`snapshot::Job`) after `MPIX_Checkpoint_write` returned, and completed
//! at its first use — by the thread that writes the directory levels, a
//! restore, or the next checkpoint reusing its buffers.

use super::format::{AsSection, Section, SectionData, SectionRef};
use super::snapshot::{Job, Snapshotter};
use crate::sys::pages::PageBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// Below this, a region of the program is copied while it waits (the
/// write-protection would cost more than the copy), into a plain buffer.
const SNAPSHOT_MIN: usize = 256 << 10;

#[derive(Clone)]
pub struct MemCopy(Arc<Inner>);

struct Inner {
    /// The copy once complete, or why the snapshot failed.
    done: OnceLock<Result<Arc<Vec<Section>>, String>>,
    filling: Mutex<Option<Filling>>,
}

/// A copy a snapshot is filling: the sections in `snapped` get their bytes
/// from the job's copies, in order.
struct Filling {
    job: Arc<Job>,
    sections: Vec<Section>,
    snapped: Vec<usize>,
}

impl Filling {
    fn complete(mut self) -> Result<Arc<Vec<Section>>, String> {
        let copies = self
            .job
            .take_copies()
            .map_err(|e| format!("its snapshot failed: {e}"))?;
        for (i, c) in self.snapped.into_iter().zip(copies) {
            self.sections[i].data = SectionData::Pages(Arc::new(c));
        }
        Ok(Arc::new(self.sections))
    }
}

impl MemCopy {
    pub fn ready(sections: Arc<Vec<Section>>) -> MemCopy {
        MemCopy(Arc::new(Inner {
            done: OnceLock::from(Ok(sections)),
            filling: Mutex::new(None),
        }))
    }

    /// The copy, once its snapshot is complete; or why there is none.
    pub fn get(&self) -> Result<Arc<Vec<Section>>, String> {
        self.0
            .done
            .get_or_init(|| match take(&self.0.filling) {
                Some(f) => f.complete(),
                None => Err("its snapshot was lost".into()),
            })
            .clone()
    }

    /// The sections, when nothing else holds them (to reuse their memory).
    pub fn into_unique(self) -> Option<Vec<Section>> {
        let inner = Arc::try_unwrap(self.0).ok()?;
        let done = match inner.done.into_inner() {
            Some(done) => done,
            None => take(&inner.filling)?.complete(),
        };
        Arc::try_unwrap(done.ok()?).ok()
    }

    /// Whether `sections` has a part worth a snapshot: program memory
    /// large enough.
    pub fn worth_a_snapshot<S: AsSection>(sections: &[S]) -> bool {
        sections.iter().any(|s| in_pages(&s.section()))
    }

    /// A copy of `sections` made now, in the buffers of `old` where it has
    /// them (none is allocated when the regions kept their sizes).
    pub fn copy<S: AsSection>(old: Option<Vec<Section>>, sections: &[S]) -> MemCopy {
        let mut old = old.unwrap_or_default().into_iter();
        let copy = sections
            .iter()
            .map(|s| {
                let s = s.section();
                let old = old.next().map(|o| o.data);
                let data = match pages_for(old, &s) {
                    Ok(mut p) => {
                        p.as_mut_slice().copy_from_slice(s.data);
                        SectionData::Pages(Arc::new(p))
                    }
                    Err(old) => {
                        let mut buf = match old {
                            Some(SectionData::Owned(buf)) => buf,
                            _ => Vec::new(),
                        };
                        buf.clear();
                        buf.extend_from_slice(s.data);
                        SectionData::Owned(buf)
                    }
                };
                shell(&s, data)
            })
            .collect();
        MemCopy::ready(Arc::new(copy))
    }

    /// A copy of `sections` by `snap`: the program's large regions are
    /// copied in the background (into the buffers of `old` where it has
    /// them), the rest now.
    pub fn snapshot<S: AsSection>(
        snap: &Snapshotter,
        old: Option<Vec<Section>>,
        sections: &[S],
    ) -> MemCopy {
        let mut old = old.unwrap_or_default().into_iter();
        let mut out = Vec::with_capacity(sections.len());
        let (mut regions, mut copies, mut snapped) = (Vec::new(), Vec::new(), Vec::new());
        for s in sections {
            let s = s.section();
            match pages_for(old.next().map(|o| o.data), &s) {
                Ok(p) => {
                    regions.push((s.data.as_ptr() as usize, s.data.len()));
                    copies.push(p);
                    snapped.push(out.len());
                    out.push(shell(&s, SectionData::Owned(Vec::new())));
                }
                Err(_) => out.push(shell(&s, s.data.to_vec().into())),
            }
        }
        let job = snap.take(&regions, copies);
        MemCopy(Arc::new(Inner {
            done: OnceLock::new(),
            filling: Mutex::new(Some(Filling {
                job,
                sections: out,
                snapped,
            })),
        }))
    }
}

/// Whether a section is copied into pages of its own: a large region of
/// the program's memory (a rollback can then exchange pages with it).
fn in_pages(s: &SectionRef<'_>) -> bool {
    s.program && s.data.len() >= SNAPSHOT_MIN
}

/// Pages for section `s` when it goes in pages: `old`'s when they fit (the
/// pages a previous copy or rollback left, already populated), else new
/// ones; or `old` back.
fn pages_for(old: Option<SectionData>, s: &SectionRef<'_>) -> Result<PageBuf, Option<SectionData>> {
    if !in_pages(s) {
        return Err(old);
    }
    let at = s.data.as_ptr() as usize;
    if let Some(SectionData::Pages(p)) = old {
        match Arc::try_unwrap(p) {
            Ok(p) if p.fits(s.data.len(), at) => return Ok(p),
            _ => {}
        }
    }
    PageBuf::new(s.data.len(), at).map_err(|_| None)
}

fn shell(s: &SectionRef<'_>, data: SectionData) -> Section {
    Section {
        kind: s.kind,
        id: s.id,
        name: s.name.to_string(),
        data,
    }
}

fn take(f: &Mutex<Option<Filling>>) -> Option<Filling> {
    f.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// Frees `sections` on a thread of its own (started at the first use):
/// unmapping a large copy takes milliseconds the program need not wait
/// for. Freed here if there is no thread.
pub fn free_later(sections: Vec<Section>) {
    type Tx = std::sync::mpsc::Sender<Vec<Section>>;
    static TO_FREE: OnceLock<Option<Mutex<Tx>>> = OnceLock::new();
    let tx = TO_FREE.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Section>>();
        std::thread::Builder::new()
            .name("mpistages-free".into())
            .spawn(move || {
                crate::sys::process::lower_this_thread(10);
                rx.into_iter().for_each(drop)
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    if let Some(tx) = tx {
        let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send(sections);
    }
}
