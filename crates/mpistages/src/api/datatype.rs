//! Datatypes as a flattened typemap: for one element, the list of runs
//! (offset, length, basic type) in typemap order, adjacent runs of the same
//! basic type merged. Packing walks the runs element by element; a type
//! whose one run covers its extent is contiguous and never packed.

use super::consts::err;
use super::consts::{dt, UNDEFINED};
use super::error::{fail, MpiResult};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Basic {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    LongDouble,
    CF32,
    CF64,
    CLongDouble,
    /// C `_Bool` / C++ `bool` (1 byte).
    Bool,
    /// Fortran LOGICAL (4 bytes) and LOGICAL*1.
    Logical4,
    Logical1,
    Byte,
    Packed,
    /// Fortran CHARACTER.
    Character,
}

impl Basic {
    /// The handle of a predefined datatype of this kind.
    pub fn handle(self) -> i32 {
        use Basic::*;
        match self {
            I8 => dt::SIGNED_CHAR,
            U8 => dt::UNSIGNED_CHAR,
            I16 => dt::SHORT,
            U16 => dt::UNSIGNED_SHORT,
            I32 => dt::INT,
            U32 => dt::UNSIGNED,
            I64 => dt::LONG_LONG,
            U64 => dt::UNSIGNED_LONG_LONG,
            F32 => dt::FLOAT,
            F64 => dt::DOUBLE,
            LongDouble => dt::LONG_DOUBLE,
            CF32 => dt::C_FLOAT_COMPLEX,
            CF64 => dt::C_DOUBLE_COMPLEX,
            CLongDouble => dt::C_LONG_DOUBLE_COMPLEX,
            Bool => dt::C_BOOL,
            Logical4 => dt::LOGICAL4,
            Logical1 => dt::LOGICAL1,
            Byte => dt::BYTE,
            Packed => dt::PACKED,
            Character => dt::CHARACTER,
        }
    }

    pub fn size(self) -> usize {
        use Basic::*;
        match self {
            I8 | U8 | Bool | Logical1 | Byte | Packed | Character => 1,
            I16 | U16 => 2,
            I32 | U32 | F32 | Logical4 => 4,
            I64 | U64 | F64 | CF32 => 8,
            LongDouble | CF64 => 16,
            CLongDouble => 32,
        }
    }

    pub fn align(self) -> usize {
        use Basic::*;
        match self {
            CF32 => 4,
            CF64 => 8,
            LongDouble | CLongDouble => 16,
            b => b.size(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Run {
    pub off: isize,
    pub len: usize,
    pub basic: Basic,
}

/// A (value, index) pair type for `MPI_MINLOC` / `MPI_MAXLOC`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pair {
    pub value: Basic,
    pub index: Basic,
    pub index_off: usize,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Datatype {
    pub name: String,
    pub size: usize,
    pub lb: isize,
    pub extent: isize,
    pub true_lb: isize,
    pub true_extent: isize,
    pub runs: Vec<Run>,
    pub pair: Option<Pair>,
    pub predefined: bool,
    pub committed: bool,
    /// How the type was made (`MPI_Type_get_envelope/contents`). Not in a
    /// checkpoint: a restored type answers as if built from bytes.
    #[serde(skip)]
    pub envelope: Option<Arc<Envelope>>,
    /// `name` was set by `MPI_Type_set_name` (derived types are otherwise
    /// nameless to the program; `name` then only serves our messages).
    pub name_given: bool,
}

/// A derived type's constructor and its arguments, the old types kept
/// alive (the program may free them) with the handles they had.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub combiner: i32,
    pub ints: Vec<i32>,
    pub aints: Vec<i64>,
    /// Counts the int interface cannot hold (`MPI_Type_get_contents_c`).
    pub larges: Vec<i64>,
    pub types: Vec<(i32, Arc<Datatype>)>,
    /// What the large-count interface reports instead, where the int one
    /// describes the type otherwise (a contiguous type of more than
    /// INT_MAX elements is a struct of a vector and a rest to MPI 3.1).
    pub as_large: Option<Arc<Envelope>>,
}

/// `MPI_DISTRIBUTE_*`, `MPI_TYPECLASS_*` (MPICH's values).
pub const DISTRIBUTE_BLOCK: i32 = 121;
pub const DISTRIBUTE_CYCLIC: i32 = 122;
pub const DISTRIBUTE_NONE: i32 = 123;
pub const DISTRIBUTE_DFLT_DARG: i64 = -49767;
pub const ORDER_C: i32 = 56;
pub const ORDER_FORTRAN: i32 = 57;
pub const TYPECLASS_REAL: i32 = 1;
pub const TYPECLASS_INTEGER: i32 = 2;
pub const TYPECLASS_COMPLEX: i32 = 3;

/// `MPI_COMBINER_*` (MPICH's values).
pub mod combiner {
    pub const NAMED: i32 = 1;
    pub const DUP: i32 = 2;
    pub const CONTIGUOUS: i32 = 3;
    pub const VECTOR: i32 = 4;
    pub const HVECTOR_INTEGER: i32 = 5;
    pub const HVECTOR: i32 = 6;
    pub const INDEXED: i32 = 7;
    pub const HINDEXED_INTEGER: i32 = 8;
    pub const HINDEXED: i32 = 9;
    pub const INDEXED_BLOCK: i32 = 10;
    pub const STRUCT_INTEGER: i32 = 11;
    pub const STRUCT: i32 = 12;
    pub const SUBARRAY: i32 = 13;
    pub const DARRAY: i32 = 14;
    pub const F90_REAL: i32 = 15;
    pub const F90_COMPLEX: i32 = 16;
    pub const F90_INTEGER: i32 = 17;
    pub const RESIZED: i32 = 18;
    pub const HINDEXED_BLOCK: i32 = 19;
}

/// Runs above this count per element are refused (a runaway constructor).
const MAX_RUNS: usize = 1 << 24;

fn overflow<T>() -> MpiResult<T> {
    fail(err::ARG, "datatype size or extent overflows")
}

impl Datatype {
    /// Whether a datatype read from a checkpoint describes memory the way
    /// its bounds say (every run inside the true extent, sizes adding up):
    /// a corrupt one must never steer copies outside a user buffer.
    pub fn is_consistent(&self) -> bool {
        let (lo, hi) = (self.true_lb, self.true_lb.saturating_add(self.true_extent));
        self.runs.len() <= MAX_RUNS
            && !self.predefined
            && self.true_extent >= 0
            && self.runs.iter().all(|r| {
                r.off >= lo && (r.len as isize) >= 0 && r.off.saturating_add(r.len as isize) <= hi
            })
            && self
                .runs
                .iter()
                .map(|r| r.len)
                .try_fold(0usize, |a, l| a.checked_add(l))
                == Some(self.size)
    }

    fn basic(name: &str, b: Basic) -> Datatype {
        let s = b.size();
        Datatype {
            name: name.into(),
            size: s,
            lb: 0,
            extent: s as isize,
            true_lb: 0,
            true_extent: s as isize,
            runs: vec![Run {
                off: 0,
                len: s,
                basic: b,
            }],
            pair: None,
            predefined: true,
            committed: true,
            envelope: None,
            name_given: false,
        }
    }

    fn pair(name: &str, value: Basic, index: Basic) -> Datatype {
        let index_off = value.size().max(index.align());
        let size = index_off + index.size();
        let align = value.align().max(index.align());
        let extent = size.div_ceil(align) * align;
        let runs = vec![
            Run {
                off: 0,
                len: value.size(),
                basic: value,
            },
            Run {
                off: index_off as isize,
                len: index.size(),
                basic: index,
            },
        ];
        Datatype {
            name: name.into(),
            size: value.size() + index.size(),
            lb: 0,
            extent: extent as isize,
            true_lb: 0,
            true_extent: size as isize,
            runs,
            pair: Some(Pair {
                value,
                index,
                index_off,
            }),
            predefined: true,
            committed: true,
            envelope: None,
            name_given: false,
        }
    }

    /// The predefined datatype with this handle.
    pub fn predefined(handle: i32) -> Option<Datatype> {
        use Basic::*;
        let b = |n: &str, k| Some(Datatype::basic(n, k));
        match handle {
            dt::CHAR => b("MPI_CHAR", I8),
            dt::SIGNED_CHAR => b("MPI_SIGNED_CHAR", I8),
            dt::UNSIGNED_CHAR => b("MPI_UNSIGNED_CHAR", U8),
            dt::BYTE => b("MPI_BYTE", Byte),
            dt::SHORT => b("MPI_SHORT", I16),
            dt::UNSIGNED_SHORT => b("MPI_UNSIGNED_SHORT", U16),
            dt::INT => b("MPI_INT", I32),
            dt::UNSIGNED => b("MPI_UNSIGNED", U32),
            dt::LONG => b("MPI_LONG", I64),
            dt::UNSIGNED_LONG => b("MPI_UNSIGNED_LONG", U64),
            dt::LONG_LONG => b("MPI_LONG_LONG", I64),
            dt::UNSIGNED_LONG_LONG => b("MPI_UNSIGNED_LONG_LONG", U64),
            dt::FLOAT => b("MPI_FLOAT", F32),
            dt::DOUBLE => b("MPI_DOUBLE", F64),
            dt::LONG_DOUBLE => b("MPI_LONG_DOUBLE", LongDouble),
            dt::WCHAR => b("MPI_WCHAR", I32),
            dt::C_BOOL => b("MPI_C_BOOL", Bool),
            dt::CXX_BOOL => b("MPI_CXX_BOOL", Bool),
            dt::INT8_T => b("MPI_INT8_T", I8),
            dt::INT16_T => b("MPI_INT16_T", I16),
            dt::INT32_T => b("MPI_INT32_T", I32),
            dt::INT64_T => b("MPI_INT64_T", I64),
            dt::UINT8_T => b("MPI_UINT8_T", U8),
            dt::UINT16_T => b("MPI_UINT16_T", U16),
            dt::UINT32_T => b("MPI_UINT32_T", U32),
            dt::UINT64_T => b("MPI_UINT64_T", U64),
            dt::AINT => b("MPI_AINT", I64),
            dt::COUNT => b("MPI_COUNT", I64),
            dt::OFFSET => b("MPI_OFFSET", I64),
            dt::C_FLOAT_COMPLEX => b("MPI_C_FLOAT_COMPLEX", CF32),
            dt::C_DOUBLE_COMPLEX => b("MPI_C_DOUBLE_COMPLEX", CF64),
            dt::C_LONG_DOUBLE_COMPLEX => b("MPI_C_LONG_DOUBLE_COMPLEX", CLongDouble),
            dt::PACKED => b("MPI_PACKED", Packed),
            dt::FLOAT_INT => Some(Datatype::pair("MPI_FLOAT_INT", F32, I32)),
            dt::DOUBLE_INT => Some(Datatype::pair("MPI_DOUBLE_INT", F64, I32)),
            dt::LONG_INT => Some(Datatype::pair("MPI_LONG_INT", I64, I32)),
            dt::TWO_INT => Some(Datatype::pair("MPI_2INT", I32, I32)),
            dt::SHORT_INT => Some(Datatype::pair("MPI_SHORT_INT", I16, I32)),
            dt::LONG_DOUBLE_INT => Some(Datatype::pair("MPI_LONG_DOUBLE_INT", LongDouble, I32)),
            dt::INTEGER => b("MPI_INTEGER", I32),
            dt::REAL => b("MPI_REAL", F32),
            dt::DOUBLE_PRECISION => b("MPI_DOUBLE_PRECISION", F64),
            dt::COMPLEX => b("MPI_COMPLEX", CF32),
            dt::DOUBLE_COMPLEX => b("MPI_DOUBLE_COMPLEX", CF64),
            dt::LOGICAL => b("MPI_LOGICAL", Logical4),
            dt::CHARACTER => b("MPI_CHARACTER", Character),
            dt::TWO_REAL => Some(Datatype::pair("MPI_2REAL", F32, F32)),
            dt::TWO_DOUBLE_PRECISION => Some(Datatype::pair("MPI_2DOUBLE_PRECISION", F64, F64)),
            dt::TWO_INTEGER => Some(Datatype::pair("MPI_2INTEGER", I32, I32)),
            dt::INTEGER1 => b("MPI_INTEGER1", I8),
            dt::INTEGER2 => b("MPI_INTEGER2", I16),
            dt::INTEGER4 => b("MPI_INTEGER4", I32),
            dt::INTEGER8 => b("MPI_INTEGER8", I64),
            dt::REAL4 => b("MPI_REAL4", F32),
            dt::REAL8 => b("MPI_REAL8", F64),
            dt::COMPLEX8 => b("MPI_COMPLEX8", CF32),
            dt::COMPLEX16 => b("MPI_COMPLEX16", CF64),
            dt::LOGICAL1 => b("MPI_LOGICAL1", Logical1),
            dt::LOGICAL4 => b("MPI_LOGICAL4", Logical4),
            dt::CXX_FLOAT_COMPLEX => b("MPI_CXX_FLOAT_COMPLEX", CF32),
            dt::CXX_DOUBLE_COMPLEX => b("MPI_CXX_DOUBLE_COMPLEX", CF64),
            dt::CXX_LONG_DOUBLE_COMPLEX => b("MPI_CXX_LONG_DOUBLE_COMPLEX", CLongDouble),
            _ => None,
        }
    }

    /// Builds a type from copies of other types placed at byte displacements.
    /// `is_struct` applies the alignment padding MPI gives struct types.
    /// Builds a type from blocks: (displacement, count, old type), each
    /// `count` copies of the old type one extent apart.
    fn from_parts<'a>(
        name: &str,
        parts: impl Iterator<Item = (isize, usize, &'a Datatype)>,
        is_struct: bool,
    ) -> MpiResult<Datatype> {
        let mut runs: Vec<Run> = Vec::new();
        let mut size: usize = 0;
        let mut bounds: Option<(isize, isize)> = None;
        let mut align = 1;
        for (disp, count, t) in parts {
            if count == 0 {
                continue;
            }
            let total = t.size.checked_mul(count).map_or_else(overflow, Ok)?;
            size = size.checked_add(total).map_or_else(overflow, Ok)?;
            // Each copy brings its lower and upper bound markers: the new
            // type's lower bound is the lowest lower marker and its upper
            // bound the highest upper one, so an old type of negative
            // extent makes one too (MPI 3.1 4.1.6).
            let last = (count as isize - 1)
                .checked_mul(t.extent)
                .map_or_else(overflow, Ok)?;
            let lo = disp.checked_add(t.lb).map_or_else(overflow, Ok)?;
            let (first_lo, last_lo) = (lo, lo.checked_add(last).map_or_else(overflow, Ok)?);
            let block_lo = first_lo.min(last_lo);
            let block_hi = first_lo
                .max(last_lo)
                .checked_add(t.extent)
                .map_or_else(overflow, Ok)?;
            bounds = Some(match bounds {
                None => (block_lo, block_hi),
                Some((l, h)) => (l.min(block_lo), h.max(block_hi)),
            });
            // A dense type (one run filling its extent) makes one run of all
            // its copies: a 4 GiB contiguous type costs no 4 G iterations.
            let dense = matches!(t.runs.as_slice(), [r] if r.off == 0 && r.len as isize == t.extent && t.extent > 0);
            let merged = t.runs.first().map(|r| Run { len: total, ..*r });
            let (copies, unit): (usize, &[Run]) = match (&merged, dense) {
                (Some(m), true) => (1, std::slice::from_ref(m)),
                _ => (count, &t.runs),
            };
            for k in 0..copies {
                let base = disp + k as isize * t.extent;
                for r in unit {
                    let off = base.checked_add(r.off).map_or_else(overflow, Ok)?;
                    align = align.max(r.basic.align());
                    match runs.last_mut() {
                        Some(last)
                            if last.basic == r.basic && last.off + last.len as isize == off =>
                        {
                            last.len += r.len
                        }
                        _ => {
                            if runs.len() >= MAX_RUNS {
                                return fail(err::ARG, "datatype has too many pieces");
                            }
                            runs.push(Run { off, ..*r })
                        }
                    }
                }
            }
        }
        let (lb, mut ub) = bounds.unwrap_or((0, 0));
        if is_struct && !runs.is_empty() {
            let a = align as isize;
            let ext = ub - lb;
            ub = lb + (ext + a - 1).div_euclid(a) * a;
        }
        let (true_lb, true_ub) = runs
            .iter()
            .fold(None, |acc: Option<(isize, isize)>, r| {
                let (l, h) = (r.off, r.off + r.len as isize);
                Some(acc.map_or((l, h), |(a, b)| (a.min(l), b.max(h))))
            })
            .unwrap_or((0, 0));
        Ok(Datatype {
            name: name.into(),
            size,
            lb,
            extent: ub - lb,
            true_lb,
            true_extent: true_ub - true_lb,
            runs,
            pair: None,
            predefined: false,
            committed: false,
            envelope: None,
            name_given: false,
        })
    }

    fn check_count(n: i64, what: &str) -> MpiResult<usize> {
        if n < 0 {
            return fail(err::COUNT, format!("negative {what} {n}"));
        }
        Ok(n as usize)
    }

    pub fn contiguous(count: i64, old: &Datatype) -> MpiResult<Datatype> {
        let n = Self::check_count(count, "count")?;
        Self::from_parts("contiguous", std::iter::once((0, n, old)), false)
    }

    /// Blocks of `blocklen` elements, `stride` apart (in bytes when
    /// `stride_in_bytes`, else in multiples of the old type's extent).
    pub fn vector(
        count: i64,
        blocklen: i64,
        stride: i64,
        stride_in_bytes: bool,
        old: &Datatype,
    ) -> MpiResult<Datatype> {
        let n = Self::check_count(count, "count")?;
        let b = Self::check_count(blocklen, "block length")?;
        let ext = old.extent;
        let step = if stride_in_bytes {
            stride as isize
        } else {
            (stride as isize)
                .checked_mul(ext)
                .map_or_else(overflow, Ok)?
        };
        let parts = (0..n).map(move |i| (i as isize * step, b, old));
        Self::from_parts(
            if stride_in_bytes { "hvector" } else { "vector" },
            parts,
            false,
        )
    }

    /// Blocks at displacements (in bytes when `in_bytes`, else in extents).
    pub fn indexed(
        blocklens: &[i64],
        displs: &[i64],
        in_bytes: bool,
        old: &Datatype,
    ) -> MpiResult<Datatype> {
        for &b in blocklens {
            Self::check_count(b, "block length")?;
        }
        let ext = old.extent;
        let parts = blocklens.iter().zip(displs).map(move |(&b, &d)| {
            let base = if in_bytes {
                d as isize
            } else {
                d as isize * ext
            };
            (base, b as usize, old)
        });
        Self::from_parts(if in_bytes { "hindexed" } else { "indexed" }, parts, false)
    }

    pub fn create_struct(
        blocklens: &[i64],
        displs: &[i64],
        types: &[&Datatype],
    ) -> MpiResult<Datatype> {
        for &b in blocklens {
            Self::check_count(b, "block length")?;
        }
        let parts = blocklens
            .iter()
            .zip(displs)
            .zip(types)
            .map(|((&b, &d), t)| (d as isize, b as usize, *t));
        Self::from_parts("struct", parts, true)
    }

    pub fn resized(old: &Datatype, lb: isize, extent: isize) -> Datatype {
        Datatype {
            name: "resized".into(),
            lb,
            extent,
            predefined: false,
            committed: false,
            pair: None,
            envelope: None,
            name_given: false,
            ..old.clone()
        }
    }

    /// `MPI_Type_create_subarray`: `subsizes` elements from `starts` of an
    /// array of `sizes` (C order: the last dimension varies fastest;
    /// Fortran order: the first). Its extent is the whole array's.
    pub fn subarray(
        sizes: &[i64],
        subsizes: &[i64],
        starts: &[i64],
        fortran: bool,
        old: &Datatype,
    ) -> MpiResult<Datatype> {
        let n = sizes.len();
        for i in 0..n {
            if sizes[i] <= 0
                || subsizes[i] <= 0
                || starts[i] < 0
                || starts[i] + subsizes[i] > sizes[i]
            {
                return fail(
                    err::ARG,
                    format!(
                        "subarray dimension {i}: {} elements from {} do not fit {}",
                        subsizes[i], starts[i], sizes[i]
                    ),
                );
            }
        }
        let blocks: Vec<Vec<(i64, i64)>> = (0..n).map(|i| vec![(starts[i], subsizes[i])]).collect();
        Self::grid_blocks(sizes, &blocks, fortran, old)
    }

    /// `MPI_Type_create_darray`: this process's part of an array of
    /// `gsizes` distributed over a grid of `psizes` processes (the grid in
    /// C order whatever the array's), block, cyclic or not distributed in
    /// each dimension.
    #[allow(clippy::too_many_arguments)]
    pub fn darray(
        size: i64,
        rank: i64,
        gsizes: &[i64],
        distribs: &[i32],
        dargs: &[i64],
        psizes: &[i64],
        fortran: bool,
        old: &Datatype,
    ) -> MpiResult<Datatype> {
        let n = gsizes.len();
        if psizes.iter().product::<i64>() != size || rank < 0 || rank >= size {
            return fail(
                err::ARG,
                format!(
                    "the process grid {psizes:?} does not hold {size} processes with rank {rank}"
                ),
            );
        }
        // Row-major coordinates of `rank` in the process grid.
        let mut coords = vec![0i64; n];
        let mut r = rank;
        for i in (0..n).rev() {
            coords[i] = r % psizes[i].max(1);
            r /= psizes[i].max(1);
        }
        let mut blocks = Vec::with_capacity(n);
        for i in 0..n {
            let (g, p, c) = (gsizes[i], psizes[i], coords[i]);
            if g <= 0 || p <= 0 {
                return fail(
                    err::ARG,
                    format!("darray dimension {i}: size {g} over {p} processes"),
                );
            }
            let b = match distribs[i] {
                DISTRIBUTE_NONE => {
                    if p != 1 {
                        return fail(
                            err::ARG,
                            format!(
                                "darray dimension {i} is not distributed but has {p} processes"
                            ),
                        );
                    }
                    vec![(0, g)]
                }
                DISTRIBUTE_BLOCK => {
                    let k = if dargs[i] == DISTRIBUTE_DFLT_DARG {
                        (g + p - 1) / p
                    } else {
                        dargs[i]
                    };
                    if k <= 0 || k * p < g {
                        return fail(
                            err::ARG,
                            format!(
                                "darray dimension {i}: blocks of {k} do not cover {g} over {p}"
                            ),
                        );
                    }
                    let start = (k * c).min(g);
                    vec![(start, (g - start).min(k))]
                }
                DISTRIBUTE_CYCLIC => {
                    let k = if dargs[i] == DISTRIBUTE_DFLT_DARG {
                        1
                    } else {
                        dargs[i]
                    };
                    if k <= 0 {
                        return fail(
                            err::ARG,
                            format!("darray dimension {i}: cyclic blocks of {k}"),
                        );
                    }
                    (0..)
                        .map(|j| (c + j * p) * k)
                        .take_while(|&s| s < g)
                        .map(|s| (s, (g - s).min(k)))
                        .collect()
                }
                d => return fail(err::ARG, format!("darray distribution {d} is not known")),
            };
            blocks.push(b);
        }
        Self::grid_blocks(gsizes, &blocks, fortran, old)
    }

    /// The elements of an array of `sizes` whose index in dimension i lies
    /// in one of `blocks[i]` ((start, length) runs), as one type spanning
    /// the whole array.
    fn grid_blocks(
        sizes: &[i64],
        blocks: &[Vec<(i64, i64)>],
        fortran: bool,
        old: &Datatype,
    ) -> MpiResult<Datatype> {
        let n = sizes.len();
        // Dimensions from the fastest varying to the slowest.
        let order: Vec<usize> = if fortran {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        let mut t = old.clone();
        let mut stride = old.extent as i64;
        for &i in &order {
            let (lens, displs): (Vec<i64>, Vec<i64>) = blocks[i]
                .iter()
                .filter(|b| b.1 > 0)
                .map(|&(s, l)| (l, s * stride))
                .unzip();
            let row = Self::indexed(&lens, &displs, true, &t)?;
            stride = stride
                .checked_mul(sizes[i])
                .ok_or_else(|| super::error::MpiError::new(err::ARG, "the array is too large"))?;
            t = Self::resized(&row, 0, stride as isize);
        }
        Ok(t)
    }

    /// The type `MPI_Type_match_size` gives for a type class and size.
    pub fn match_size(class: i32, size: i32) -> MpiResult<i32> {
        let h = match (class, size) {
            (TYPECLASS_REAL, 4) => dt::REAL4,
            (TYPECLASS_REAL, 8) => dt::REAL8,
            (TYPECLASS_REAL, 16) => dt::LONG_DOUBLE,
            (TYPECLASS_INTEGER, 1) => dt::INTEGER1,
            (TYPECLASS_INTEGER, 2) => dt::INTEGER2,
            (TYPECLASS_INTEGER, 4) => dt::INTEGER4,
            (TYPECLASS_INTEGER, 8) => dt::INTEGER8,
            (TYPECLASS_COMPLEX, 8) => dt::COMPLEX8,
            (TYPECLASS_COMPLEX, 16) => dt::COMPLEX16,
            (TYPECLASS_COMPLEX, 32) => dt::C_LONG_DOUBLE_COMPLEX,
            _ => {
                return fail(
                    err::ARG,
                    format!("no type of class {class} has {size} bytes"),
                )
            }
        };
        Ok(h)
    }

    /// Packed bytes of `count` elements to or from `external32`: each
    /// basic value (each half of a complex) reversed, big-endian.
    pub fn swap_external32(&self, count: usize, bytes: &mut [u8]) {
        let mut at = 0;
        for _ in 0..count {
            for r in &self.runs {
                let unit = match r.basic {
                    Basic::CF32 | Basic::CF64 | Basic::CLongDouble => r.basic.size() / 2,
                    b => b.size(),
                };
                let end = (at + r.len).min(bytes.len());
                for v in bytes[at..end].chunks_exact_mut(unit) {
                    v.reverse();
                }
                at = end;
            }
        }
    }

    /// This type, recorded as made by `combiner` from these arguments.
    pub fn made_by(
        mut self,
        combiner: i32,
        ints: Vec<i32>,
        aints: Vec<i64>,
        types: Vec<(i32, Arc<Datatype>)>,
    ) -> Datatype {
        self.envelope = Some(Arc::new(Envelope {
            combiner,
            ints,
            aints,
            larges: Vec::new(),
            types,
            as_large: None,
        }));
        self
    }

    /// This type, described to the large-count interface as made by
    /// `combiner` from `larges` (counts) and `types`.
    pub fn made_large_by(
        mut self,
        combiner: i32,
        larges: Vec<i64>,
        types: Vec<(i32, Arc<Datatype>)>,
    ) -> Datatype {
        let large = Arc::new(Envelope {
            combiner,
            ints: Vec::new(),
            aints: Vec::new(),
            larges,
            types,
            as_large: None,
        });
        if let Some(e) = self.envelope.as_mut() {
            Arc::make_mut(e).as_large = Some(large);
        }
        self
    }

    /// When `count` elements form one run of memory: its offset and length.
    pub fn contiguous_span(&self, count: usize) -> Option<(isize, usize)> {
        if count == 0 || self.size == 0 {
            return Some((0, 0));
        }
        match self.runs.as_slice() {
            [r] if count == 1 || r.len as isize == self.extent => {
                Some((r.off, self.size.checked_mul(count)?))
            }
            _ => None,
        }
    }

    /// The memory `count` elements touch: (first byte offset, length).
    pub fn span(&self, count: usize) -> (isize, usize) {
        if count == 0 || self.size == 0 {
            return (0, 0);
        }
        let len = (count as isize - 1) * self.extent + self.true_extent;
        (self.true_lb, len.max(0) as usize)
    }

    /// Runs of `count` elements in packing order, adjacent runs joined.
    pub fn segments(&self, count: usize) -> impl Iterator<Item = (isize, usize)> + '_ {
        // Dense elements make one run: no walk over them.
        let dense = self.contiguous_span(count);
        let walked = if dense.is_some() { 0 } else { count };
        let mut pending = dense.filter(|d| d.1 > 0);
        let mut iter = (0..walked).flat_map(move |i| {
            self.runs
                .iter()
                .map(move |r| (i as isize * self.extent + r.off, r.len))
        });
        std::iter::from_fn(move || loop {
            match iter.next() {
                Some((off, len)) => match pending {
                    Some((po, pl)) if po + pl as isize == off => pending = Some((po, pl + len)),
                    Some(p) => {
                        pending = Some((off, len));
                        return Some(p);
                    }
                    None => pending = Some((off, len)),
                },
                None => return pending.take(),
            }
        })
    }

    /// Basic elements in `bytes` bytes of this type (`MPI_Get_elements`), or
    /// `MPI_UNDEFINED` when `bytes` ends inside a basic element.
    pub fn elements_in(&self, bytes: usize) -> i64 {
        if self.size == 0 {
            return 0;
        }
        let per: usize = self.runs.iter().map(|r| r.len / r.basic.size()).sum();
        let mut n = (bytes / self.size * per) as i64;
        let mut rem = bytes % self.size;
        for r in &self.runs {
            if rem == 0 {
                break;
            }
            let take = rem.min(r.len);
            if take % r.basic.size() != 0 {
                return UNDEFINED as i64;
            }
            n += (take / r.basic.size()) as i64;
            rem -= take;
        }
        n
    }

    /// The predefined type of a basic type's elements (accumulates
    /// combine elements of one).
    pub fn of_basic(b: Basic) -> Option<Datatype> {
        Datatype::predefined(b.handle())
    }

    /// The single basic type every element is made of, if there is one.
    pub fn uniform_basic(&self) -> Option<Basic> {
        let first = self.runs.first()?.basic;
        self.runs.iter().all(|r| r.basic == first).then_some(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(h: i32) -> Datatype {
        Datatype::predefined(h).unwrap()
    }

    #[test]
    fn pair_layouts_match_c() {
        let t = d(dt::DOUBLE_INT);
        assert_eq!((t.size, t.extent), (12, 16));
        let t = d(dt::SHORT_INT);
        assert_eq!((t.size, t.extent, t.pair.unwrap().index_off), (6, 8, 4));
        let t = d(dt::LONG_DOUBLE_INT);
        assert_eq!((t.size, t.extent), (20, 32));
        assert_eq!(d(dt::TWO_INT).extent, 8);
    }

    #[test]
    fn vector_layout() {
        let v = Datatype::vector(3, 2, 4, false, &d(dt::INT)).unwrap();
        assert_eq!(v.size, 24);
        assert_eq!(v.extent, (2 * 4 + 2) * 4);
        let segs: Vec<_> = v.segments(2).collect();
        assert_eq!(segs, vec![(0, 8), (16, 8), (32, 16), (56, 8), (72, 8)]);
        assert!(v.contiguous_span(2).is_none());
        let c = Datatype::contiguous(5, &d(dt::DOUBLE)).unwrap();
        assert_eq!(c.contiguous_span(3), Some((0, 120)));
    }

    #[test]
    fn struct_padding_and_elements() {
        let s = Datatype::create_struct(&[1, 1], &[0, 8], &[&d(dt::DOUBLE), &d(dt::INT)]).unwrap();
        assert_eq!((s.size, s.extent), (12, 16));
        assert_eq!(s.elements_in(12 * 3), 6);
        assert_eq!(s.elements_in(12 + 8), 3);
        assert_eq!(s.elements_in(12 + 5), UNDEFINED as i64);
        let r = Datatype::resized(&d(dt::INT), -4, 12);
        assert_eq!((r.lb, r.extent, r.true_lb, r.true_extent), (-4, 12, 0, 4));
    }

    /// MPICH's datatype/lbub: a vector with a negative stride of a type
    /// of negative extent takes its bounds from the copies' markers.
    #[test]
    fn negative_extents_keep_their_markers() {
        let four = Datatype::contiguous(4, &d(dt::BYTE)).unwrap();
        let neg = Datatype::resized(&four, 6, -9);
        let v = Datatype::vector(3, 4, -5, false, &neg).unwrap();
        assert_eq!(v.size, 48);
        assert_eq!((v.lb, v.extent), (-21, 108));
        assert_eq!((v.true_lb, v.true_extent), (-27, 121));
    }

    /// A 2x2 block at (1, 2) of a 4x5 int array, in C order: rows 1 and 2,
    /// columns 2 and 3; the extent is the whole array's.
    #[test]
    fn subarray_and_darray() {
        let i = d(dt::INT);
        let s = Datatype::subarray(&[4, 5], &[2, 2], &[1, 2], false, &i).unwrap();
        assert_eq!((s.size, s.lb, s.extent), (16, 0, 80));
        let segs: Vec<_> = s.segments(1).collect();
        assert_eq!(segs, vec![(28, 8), (48, 8)]);
        let f = Datatype::subarray(&[4, 5], &[2, 2], &[1, 2], true, &i).unwrap();
        let fsegs: Vec<_> = f.segments(1).collect();
        assert_eq!(fsegs, vec![(36, 8), (52, 8)]);
        // 10 ints cyclic(2) over 3 processes: process 1 has 2,3 and 8,9.
        let c = Datatype::darray(3, 1, &[10], &[DISTRIBUTE_CYCLIC], &[2], &[3], false, &i).unwrap();
        assert_eq!((c.size, c.extent), (16, 40));
        assert_eq!(c.segments(1).collect::<Vec<_>>(), vec![(8, 8), (32, 8)]);
        // Block over 2x2: process 3 has the bottom-right quarter of 4x4.
        let b = Datatype::darray(
            4,
            3,
            &[4, 4],
            &[DISTRIBUTE_BLOCK; 2],
            &[DISTRIBUTE_DFLT_DARG; 2],
            &[2, 2],
            false,
            &i,
        )
        .unwrap();
        assert_eq!(b.segments(1).collect::<Vec<_>>(), vec![(40, 8), (56, 8)]);
        assert!(Datatype::subarray(&[4], &[3], &[2], false, &i).is_err());
    }

    #[test]
    fn external32_is_big_endian() {
        let t = Datatype::contiguous(2, &d(dt::INT)).unwrap();
        let mut b = [1, 0, 0, 0, 2, 0, 0, 0];
        t.swap_external32(1, &mut b);
        assert_eq!(b, [0, 0, 0, 1, 0, 0, 0, 2]);
        assert_eq!(
            Datatype::match_size(TYPECLASS_INTEGER, 8).unwrap(),
            dt::INTEGER8
        );
        assert!(Datatype::match_size(TYPECLASS_REAL, 3).is_err());
    }

    #[test]
    fn negative_counts_are_errors() {
        assert_eq!(
            Datatype::contiguous(-1, &d(dt::INT)).unwrap_err().class,
            err::COUNT
        );
        assert_eq!(
            Datatype::indexed(&[1, -2], &[0, 4], false, &d(dt::INT))
                .unwrap_err()
                .class,
            err::COUNT
        );
    }

    #[test]
    fn indexed_keeps_typemap_order() {
        let t = Datatype::indexed(&[1, 2], &[4, 0], false, &d(dt::INT)).unwrap();
        let segs: Vec<_> = t.segments(1).collect();
        assert_eq!(segs, vec![(16, 4), (0, 8)]);
        assert_eq!((t.lb, t.extent), (0, 20));
    }
}
