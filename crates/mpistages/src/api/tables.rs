//! The handle tables of one process: communicators, groups, datatypes,
//! operations and the rest the C handles name (`Tables`), and what they
//! hold right after `MPI_Init`.

use super::*;

/// A communicator: a group, this process's rank in it, and a context id
/// pair (`context` for point-to-point, `context + 1` for collectives). An
/// inter-communicator has a remote group too: point-to-point ranks name
/// its members, and a sender's rank is its rank in its own (local) group.
#[derive(Clone, Debug)]
pub struct Comm {
    pub context: u32,
    pub group: Arc<Group>,
    pub rank: usize,
    pub remote: Option<Arc<Group>>,
    pub topo: Option<Arc<topo::Topology>>,
}

impl Comm {
    /// An intra-communicator without a topology.
    pub fn intra(context: u32, group: Arc<Group>, rank: usize) -> Comm {
        Comm {
            context,
            group,
            rank,
            remote: None,
            topo: None,
        }
    }
    pub fn size(&self) -> usize {
        self.group.size()
    }
    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }
    /// The group point-to-point ranks refer to: the remote group of an
    /// inter-communicator, the group itself otherwise.
    pub fn peers(&self) -> &Group {
        self.remote.as_deref().unwrap_or(&self.group)
    }
    /// World rank of rank `rank` of the local group.
    pub fn world(&self, rank: usize) -> usize {
        self.group.members[rank]
    }
    /// World rank of point-to-point rank `rank` (remote for an inter-communicator).
    pub fn peer_world(&self, rank: usize) -> usize {
        self.peers().members[rank]
    }
    pub fn coll_context(&self) -> u32 {
        self.context + 1
    }
    /// This communicator as the collectives see it.
    pub fn team<'a>(&'a self, m: &'a Mpi) -> crate::coll::Team<'a> {
        crate::coll::Team {
            engine: &m.engine,
            members: &self.group.members,
            rank: self.rank,
            context: self.coll_context(),
            tag: crate::coll::current_tag(),
            wire: None,
        }
    }
}

pub struct CommEntry {
    pub comm: Arc<Comm>,
    pub errhandler: i32,
    /// `MPI_Comm_set_name`'s name ("" until set).
    pub name: String,
}

/// Every object an integer handle can name.
pub struct Tables {
    pub comms: Vec<Option<CommEntry>>,
    pub groups: Vec<Option<Arc<Group>>>,
    pub types: Vec<Option<Arc<Datatype>>>,
    pub ops: Vec<Option<OpDef>>,
    /// Highest context id in use by this process; new ones are agreed above it.
    pub max_context: u32,
    /// Attribute keys and the attributes set on objects.
    pub attrs: attr::Attrs,
    /// Non-blocking collectives started per collective context (their
    /// tags); not saved, so every process starts again at 0 after a
    /// rollback.
    pub nbc_seq: std::collections::HashMap<u32, u32>,
    /// Handles a pending non-blocking collective still uses: a free of one
    /// waits until the last such collective ends (count, free pending).
    pub pins: std::collections::HashMap<(Pin, i32), (u32, bool)>,
    /// `MPI_Buffer_attach`: (address, size) and bytes in use.
    pub bsend: Option<(usize, usize)>,
    /// Buffered sends still in flight, with the buffer space they hold.
    pub bsend_pending: Vec<(crate::progress::ReqId, usize)>,
    /// `MPI_Comm_get_parent`: the inter-communicator to the processes that
    /// spawned this one (`COMM_NULL` in a process started by mpiexec).
    pub parent: i32,
}

/// The object an integer handle names in its table, if any.
fn slot<T>(v: &[Option<T>], h: i32) -> Option<&T> {
    v.get(usize::try_from(h).ok()?)?.as_ref()
}

pub(super) fn alloc<T>(v: &mut Vec<Option<T>>, first: usize, x: T) -> i32 {
    if v.len() < first {
        v.resize_with(first, || None);
    }
    match v.iter().skip(first).position(Option::is_none) {
        Some(i) => {
            v[first + i] = Some(x);
            (first + i) as i32
        }
        None => {
            v.push(Some(x));
            (v.len() - 1) as i32
        }
    }
}

/// Kinds of handle a pending operation may pin.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pin {
    Comm,
    Type,
    Op,
}

impl Tables {
    /// Forgets what was in flight when the job rolled back (every kind of
    /// rollback: Stages to a saved epoch or to epoch 0, Reinit): buffered
    /// sends, pins, and the count of non-blocking
    /// collectives, which must start again at 0 in every process alike, as
    /// in a replacement (a survivor that kept its count tagged its next
    /// collective differently from the replacement's, and both hung).
    pub fn forget_in_flight(&mut self) {
        self.bsend_pending.clear();
        self.nbc_seq.clear();
        self.pins.clear();
    }

    pub fn pin(&mut self, kind: Pin, h: i32) {
        self.pins.entry((kind, h)).or_insert((0, false)).0 += 1;
    }

    pub fn unpin(&mut self, kind: Pin, h: i32) {
        let Some(p) = self.pins.get_mut(&(kind, h)) else {
            return;
        };
        p.0 -= 1;
        if p.0 == 0 {
            let free = p.1;
            self.pins.remove(&(kind, h));
            if free {
                self.remove(kind, h);
            }
        }
    }

    /// Frees a handle's object now, or when the last pending operation
    /// using it ends (MPI lets a program free what such an operation uses).
    pub fn free_or_defer(&mut self, kind: Pin, h: i32) {
        match self.pins.get_mut(&(kind, h)) {
            Some(p) => p.1 = true,
            None => self.remove(kind, h),
        }
    }

    fn remove(&mut self, kind: Pin, h: i32) {
        let i = h as usize;
        match kind {
            Pin::Comm => self.comms[i] = None,
            Pin::Type => self.types[i] = None,
            Pin::Op => self.ops[i] = None,
        }
    }

    pub fn comm(&self, h: i32) -> MpiResult<Arc<Comm>> {
        self.comm_ref(h).cloned()
    }
    /// A communicator, borrowed for as long as the tables are held.
    pub fn comm_ref(&self, h: i32) -> MpiResult<&Arc<Comm>> {
        match slot(&self.comms, h) {
            Some(e) => Ok(&e.comm),
            None => fail(err::COMM, format!("invalid communicator handle {h}")),
        }
    }
    pub fn add_comm(&mut self, comm: Comm, errhandler: i32) -> i32 {
        self.max_context = self.max_context.max(comm.context + 1);
        alloc(
            &mut self.comms,
            3,
            CommEntry {
                comm: Arc::new(comm),
                errhandler,
                name: String::new(),
            },
        )
    }
    pub fn group(&self, h: i32) -> MpiResult<Arc<Group>> {
        match slot(&self.groups, h) {
            Some(g) => Ok(g.clone()),
            None => fail(err::GROUP, format!("invalid group handle {h}")),
        }
    }
    pub fn add_group(&mut self, g: Group) -> i32 {
        alloc(&mut self.groups, 2, Arc::new(g))
    }
    /// A datatype that may be used for communication (committed).
    pub fn dtype(&self, h: i32) -> MpiResult<Arc<Datatype>> {
        let t = self.any_dtype(h)?;
        if !t.committed {
            return fail(err::TYPE, format!("datatype {} is not committed", t.name));
        }
        Ok(t)
    }
    /// A committed datatype, borrowed (the fast paths; no error text).
    pub fn dtype_ref(&self, h: i32) -> Option<&Datatype> {
        self.committed_dtype(h).map(|t| &**t)
    }
    /// A committed datatype, shared (`quick` keeps it).
    pub fn committed_dtype(&self, h: i32) -> Option<&Arc<Datatype>> {
        slot(&self.types, h).filter(|t| t.committed)
    }
    /// A datatype, committed or not (for constructors and queries).
    pub fn any_dtype(&self, h: i32) -> MpiResult<Arc<Datatype>> {
        match slot(&self.types, h) {
            Some(t) => Ok(t.clone()),
            None => fail(err::TYPE, format!("invalid datatype handle {h}")),
        }
    }
    pub fn add_dtype(&mut self, t: Datatype) -> i32 {
        alloc(&mut self.types, dt::FIRST_DERIVED as usize, Arc::new(t))
    }
    pub fn op(&self, h: i32) -> MpiResult<OpDef> {
        match slot(&self.ops, h) {
            Some(o) => Ok(*o),
            None => fail(err::OP, format!("invalid operation handle {h}")),
        }
    }
}

/// The tables right after `MPI_Init`: WORLD, SELF, the predefined
/// datatypes and operations.
pub fn initial_tables(rank: usize, world: &[usize]) -> Tables {
    let world = Comm::intra(
        0,
        Arc::new(Group {
            members: world.to_vec(),
        }),
        world.iter().position(|&w| w == rank).unwrap_or(0),
    );
    let selfc = Comm::intra(
        2,
        Arc::new(Group {
            members: vec![rank],
        }),
        0,
    );
    let mut types: Vec<Option<Arc<Datatype>>> = (0..dt::FIRST_DERIVED)
        .map(|h| Datatype::predefined(h).map(Arc::new))
        .collect();
    types[0] = None;
    let mut ops: Vec<Option<OpDef>> = (0..consts::op::FIRST_USER)
        .map(|h| Some(OpDef::Predefined(h)))
        .collect();
    ops[0] = None;
    for o in ops.iter_mut().skip(consts::op::NO_OP as usize + 1) {
        *o = None;
    }
    Tables {
        comms: vec![
            None,
            Some(CommEntry {
                comm: Arc::new(world),
                errhandler: initial_errhandler(),
                name: "MPI_COMM_WORLD".into(),
            }),
            Some(CommEntry {
                comm: Arc::new(selfc),
                errhandler: initial_errhandler(),
                name: "MPI_COMM_SELF".into(),
            }),
        ],
        groups: vec![None, Some(Arc::new(Group { members: vec![] }))],
        types,
        ops,
        attrs: Default::default(),
        nbc_seq: Default::default(),
        pins: Default::default(),
        // Contexts 4 and 5 are the internal communicator's (api::recovery),
        // 6 the window agents' (api::rma), 8 the ports' (api::dpm).
        max_context: dpm::DPM_CONTEXT + 1,
        bsend: None,
        bsend_pending: Vec::new(),
        parent: consts::COMM_NULL,
    }
}
