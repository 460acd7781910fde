//! The request slab: requests live in numbered slots that are reused, and
//! a `ReqId` names a slot and its serial, which changes on every reuse, so
//! a stale id (from a user's freed handle, or from the wire) never reaches
//! a newer request.

use super::request::ReqId;

struct Slot<T> {
    serial: u32,
    item: Option<T>,
}

pub(super) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Slab<T> {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Stores `item` in a free slot (or a new one); its id.
    pub(super) fn insert(&mut self, item: T) -> ReqId {
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                serial: 0,
                item: None,
            });
            (self.slots.len() - 1) as u32
        });
        let slot = &mut self.slots[index as usize];
        slot.serial = slot.serial.wrapping_add(1);
        slot.item = Some(item);
        ReqId {
            index,
            serial: slot.serial,
        }
    }

    pub(super) fn get(&self, id: ReqId) -> Option<&T> {
        let s = self.slots.get(id.index as usize)?;
        (s.serial == id.serial).then_some(s.item.as_ref()).flatten()
    }

    pub(super) fn get_mut(&mut self, id: ReqId) -> Option<&mut T> {
        let s = self.slots.get_mut(id.index as usize)?;
        (s.serial == id.serial).then_some(s.item.as_mut()).flatten()
    }

    /// Empties the slot of `id` (if `id` still names it), dropping the
    /// item where it lies: moved out first, a request (a few hundred
    /// bytes) would be copied once more per message.
    pub(super) fn discard(&mut self, id: ReqId) {
        if let Some(s) = self.slots.get_mut(id.index as usize) {
            if s.serial == id.serial && s.item.is_some() {
                s.item = None;
                self.free.push(id.index);
            }
        }
    }

    /// The id of what slot `index` holds now, if anything.
    pub(super) fn id_at(&self, index: u32) -> Option<ReqId> {
        let s = self.slots.get(index as usize)?;
        s.item.as_ref().map(|_| ReqId {
            index,
            serial: s.serial,
        })
    }

    /// Every item with its id.
    pub(super) fn iter(&self) -> impl Iterator<Item = (ReqId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.item.as_ref().map(|item| {
                (
                    ReqId {
                        index: i as u32,
                        serial: s.serial,
                    },
                    item,
                )
            })
        })
    }

    /// The ids of the items `pred` selects.
    pub(super) fn ids_where(&self, pred: impl Fn(&T) -> bool) -> Vec<ReqId> {
        self.iter()
            .filter(|(_, t)| pred(t))
            .map(|(id, _)| id)
            .collect()
    }

    /// Removes every item `pred` rejects.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&mut T) -> bool) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.item.as_mut().is_some_and(|t| !keep(t)) {
                s.item = None;
                self.free.push(i as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_id_never_reaches_a_newer_item() {
        let mut s = Slab::new();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_eq!((s.get(a), s.get(b)), (Some(&"a"), Some(&"b")));
        s.discard(a);
        s.discard(a);
        assert_eq!(s.get(a), None);
        assert_eq!(s.free.len(), 1, "freed once");
        let c = s.insert("c");
        assert_eq!(c.index, a.index, "the slot is reused");
        assert_ne!(c.serial, a.serial);
        assert_eq!(s.get(a), None, "the old id names nothing");
        assert_eq!(s.get_mut(a), None);
        assert_eq!(s.id_at(a.index), Some(c));
        assert_eq!(s.id_at(99), None);
        let mut ids: Vec<_> = s.iter().map(|(id, t)| (id, *t)).collect();
        ids.sort_by_key(|(id, _)| id.index);
        assert_eq!(ids, vec![(c, "c"), (b, "b")]);
        s.retain(|t| *t != "b");
        assert_eq!(s.get(b), None);
        assert_eq!(s.ids_where(|_| true), vec![c]);
        let d = s.insert("d");
        assert_eq!(d.index, b.index, "a retained-away slot is reused");
    }
}
