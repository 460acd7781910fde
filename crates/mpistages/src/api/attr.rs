//! Attribute keys (keyvals) and the attributes set on communicators and
//! datatypes. This is the bookkeeping only: which keys exist, which values
//! hang on which object, in the order they were set. The copy and delete
//! callbacks are code addresses the C ABI calls (`abi::attr`), never while
//! the tables are locked, since a callback may call MPI itself.
//! Attributes are not part of a checkpoint: their values are pointers and
//! their callbacks code addresses of the process that set them.

use super::consts::err;
use super::error::{fail, MpiResult};

/// What kind of object a key is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Comm,
    Type,
    Win,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Comm => "communicator",
            Kind::Type => "datatype",
            Kind::Win => "window",
        }
    }
}

/// How a callback is called: C (values are `void *`), Fortran with
/// address-sized values (`MPI_Comm_create_keyval`), or Fortran with
/// `INTEGER` values (MPI-1's `MPI_KEYVAL_CREATE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    C,
    Fortran,
    FortranInt,
}

/// A copy callback: the predefined behaviours, or user code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copy {
    /// `MPI_*_NULL_COPY_FN`: the attribute is not copied.
    Null,
    /// `MPI_*_DUP_FN`: the value is copied as it is.
    Dup,
    User(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keyval {
    pub kind: Kind,
    pub lang: Lang,
    pub copy: Copy,
    /// User delete callback, or `None` for `MPI_*_NULL_DELETE_FN`.
    pub delete: Option<usize>,
    pub extra: usize,
}

/// The first handle given to a key made by the program; the ones below
/// are the predefined attributes (`MPI_TAG_UB` ...).
pub const FIRST_USER_KEY: i32 = 16;
/// `MPI_KEYVAL_INVALID`.
pub const KEYVAL_INVALID: i32 = -1;

/// One attribute set on an object: its key and value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attr {
    pub key: i32,
    pub value: usize,
}

#[derive(Default)]
pub struct Attrs {
    keys: Vec<Option<(Keyval, bool)>>,
    /// Attributes per object, in the order they were set.
    on: std::collections::HashMap<(Kind, i32), Vec<Attr>>,
}

impl Attrs {
    pub fn create_key(&mut self, k: Keyval) -> i32 {
        let i = self
            .keys
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.keys.push(None);
                self.keys.len() - 1
            });
        self.keys[i] = Some((k, false));
        FIRST_USER_KEY + i as i32
    }

    /// A key of kind `kind` that the program has not freed.
    pub fn key(&self, kind: Kind, key: i32) -> MpiResult<Keyval> {
        let k = usize::try_from(key - FIRST_USER_KEY)
            .ok()
            .and_then(|i| self.keys.get(i))
            .and_then(|k| k.as_ref());
        // A key the program freed still serves the attributes set with it
        // (and may be freed again), until the last of them goes.
        match k {
            Some((k, _)) if k.kind == kind => Ok(*k),
            Some((k, _)) => fail(
                err::KEYVAL,
                format!(
                    "attribute key {key} is for a {}, not a {}",
                    k.kind.name(),
                    kind.name()
                ),
            ),
            _ => fail(err::KEYVAL, format!("attribute key {key} is not valid")),
        }
    }

    /// The key of an attribute already set (it may have been freed since:
    /// its callbacks still apply to the values set before).
    pub fn key_of_attr(&self, key: i32) -> Keyval {
        self.keys[(key - FIRST_USER_KEY) as usize]
            .expect("a key with attributes is kept")
            .0
    }

    /// `MPI_*_free_keyval`: the key goes once no object holds it.
    pub fn free_key(&mut self, kind: Kind, key: i32) -> MpiResult<()> {
        self.key(kind, key)?;
        let i = (key - FIRST_USER_KEY) as usize;
        self.keys[i].as_mut().expect("checked").1 = true;
        self.drop_if_unused(key);
        Ok(())
    }

    fn drop_if_unused(&mut self, key: i32) {
        let i = (key - FIRST_USER_KEY) as usize;
        let freed = matches!(self.keys.get(i), Some(Some((_, true))));
        if freed && !self.on.values().any(|v| v.iter().any(|a| a.key == key)) {
            self.keys[i] = None;
        }
    }

    pub fn get(&self, kind: Kind, obj: i32, key: i32) -> Option<usize> {
        self.on
            .get(&(kind, obj))
            .and_then(|v| v.iter().find(|a| a.key == key))
            .map(|a| a.value)
    }

    /// Sets (or replaces) a value; returns the value it replaces.
    pub fn set(&mut self, kind: Kind, obj: i32, key: i32, value: usize) -> Option<usize> {
        let v = self.on.entry((kind, obj)).or_default();
        match v.iter_mut().find(|a| a.key == key) {
            Some(a) => Some(std::mem::replace(&mut a.value, value)),
            None => {
                v.push(Attr { key, value });
                None
            }
        }
    }

    pub fn remove(&mut self, kind: Kind, obj: i32, key: i32) {
        if let Some(v) = self.on.get_mut(&(kind, obj)) {
            v.retain(|a| a.key != key);
            if v.is_empty() {
                self.on.remove(&(kind, obj));
            }
        }
        self.drop_if_unused(key);
    }

    /// The attributes of an object, in the order they were set.
    pub fn all(&self, kind: Kind, obj: i32) -> Vec<Attr> {
        self.on.get(&(kind, obj)).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: Kind) -> Keyval {
        Keyval {
            kind,
            lang: Lang::C,
            copy: Copy::Dup,
            delete: None,
            extra: 0,
        }
    }

    #[test]
    fn keys_are_checked_by_kind_and_freed_when_unused() {
        let mut a = Attrs::default();
        let k = a.create_key(key(Kind::Comm));
        assert!(k >= FIRST_USER_KEY);
        assert_eq!(a.key(Kind::Type, k).unwrap_err().class, err::KEYVAL);
        assert_eq!(a.set(Kind::Comm, 1, k, 10), None);
        assert_eq!(a.set(Kind::Comm, 1, k, 11), Some(10));
        a.free_key(Kind::Comm, k).unwrap();
        // Freed but still in use: it still serves, and is not given again.
        assert!(a.key(Kind::Comm, k).is_ok());
        a.free_key(Kind::Comm, k).unwrap();
        let k2 = a.create_key(key(Kind::Comm));
        assert_ne!(k, k2);
        assert_eq!(a.get(Kind::Comm, 1, k), Some(11));
        a.remove(Kind::Comm, 1, k);
        assert_eq!(a.create_key(key(Kind::Type)), k);
    }

    #[test]
    fn attributes_keep_their_order() {
        let mut a = Attrs::default();
        let ks: Vec<i32> = (0..3).map(|_| a.create_key(key(Kind::Type))).collect();
        for &k in ks.iter().rev() {
            a.set(Kind::Type, 70, k, k as usize);
        }
        let order: Vec<i32> = a.all(Kind::Type, 70).iter().map(|x| x.key).collect();
        assert_eq!(order, ks.iter().rev().copied().collect::<Vec<_>>());
        assert!(a.all(Kind::Comm, 70).is_empty());
    }
}
