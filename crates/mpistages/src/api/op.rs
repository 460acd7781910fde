//! Reduction operations: which (op, datatype) pairs are valid, and the
//! kernels that compute `inout[i] = in[i] op inout[i]`. Buffers hold
//! elements in memory layout (element i at `i * extent`, relative to the
//! type's true lower bound), so user functions see what they expect.

use super::consts::{err, op};
use super::datatype::{Basic, Datatype};
use super::error::{fail, MpiResult};
use std::os::raw::{c_int, c_void};

/// `MPI_User_function`.
pub type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);
/// `MPI_User_function_c` (MPI 4.0: the count as an `MPI_Count`).
pub type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut c_int);

/// A program's reduction function, of either form.
#[derive(Clone, Copy)]
pub enum UserFunc {
    Int(UserFn),
    Large(UserFnC),
}

#[derive(Clone, Copy)]
pub enum OpDef {
    Predefined(i32),
    User { func: UserFunc, commute: bool },
}

impl OpDef {
    pub fn commutative(&self) -> bool {
        match self {
            OpDef::Predefined(_) => true,
            OpDef::User { commute, .. } => *commute,
        }
    }
}

extern "C" {
    fn mpistages_reduce_ld(op: c_int, n: usize, inp: *const u8, inout: *mut u8) -> c_int;
    fn mpistages_reduce_cld(op: c_int, n: usize, inp: *const u8, inout: *mut u8) -> c_int;
    fn mpistages_reduce_ldint(
        op: c_int,
        n: usize,
        stride: usize,
        inp: *const u8,
        inout: *mut u8,
    ) -> c_int;
}

fn op_name(o: i32) -> &'static str {
    match o {
        op::MAX => "MPI_MAX",
        op::MIN => "MPI_MIN",
        op::SUM => "MPI_SUM",
        op::PROD => "MPI_PROD",
        op::LAND => "MPI_LAND",
        op::BAND => "MPI_BAND",
        op::LOR => "MPI_LOR",
        op::BOR => "MPI_BOR",
        op::LXOR => "MPI_LXOR",
        op::BXOR => "MPI_BXOR",
        op::MINLOC => "MPI_MINLOC",
        op::MAXLOC => "MPI_MAXLOC",
        op::REPLACE => "MPI_REPLACE",
        op::NO_OP => "MPI_NO_OP",
        _ => "user op",
    }
}

fn is_int(b: Basic) -> bool {
    use Basic::*;
    matches!(b, I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64)
}

/// Checks that a predefined op applies to the datatype (MPI-4 §6.9.2).
pub fn check(o: &OpDef, t: &Datatype) -> MpiResult<()> {
    let OpDef::Predefined(o) = *o else {
        return Ok(());
    };
    use Basic::*;
    let bad = || {
        fail(
            err::OP,
            format!("{} is not defined for datatype {}", op_name(o), t.name),
        )
    };
    if o == op::MINLOC || o == op::MAXLOC {
        return if t.pair.is_some() { Ok(()) } else { bad() };
    }
    let Some(b) = t.uniform_basic() else {
        return bad();
    };
    let ok = match o {
        op::MAX | op::MIN => is_int(b) || matches!(b, F32 | F64 | LongDouble),
        op::SUM | op::PROD => {
            is_int(b) || matches!(b, F32 | F64 | LongDouble | CF32 | CF64 | CLongDouble)
        }
        op::LAND | op::LOR | op::LXOR => is_int(b) || matches!(b, Bool | Logical4 | Logical1),
        op::BAND | op::BOR | op::BXOR => is_int(b) || b == Byte,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        bad()
    }
}

trait Elem: Copy {
    const N: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const N: usize = std::mem::size_of::<$t>();
            fn load(b: &[u8]) -> Self { <$t>::from_ne_bytes(b.try_into().expect("chunk size")) }
            fn store(self, b: &mut [u8]) { b.copy_from_slice(&self.to_ne_bytes()) }
        }
    )*};
}
elem!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

fn apply<T: Elem>(inp: &[u8], io: &mut [u8], f: impl Fn(T, T) -> T) {
    for (a, b) in inp.chunks_exact(T::N).zip(io.chunks_exact_mut(T::N)) {
        f(T::load(a), T::load(b)).store(b);
    }
}

macro_rules! int_kernel {
    ($t:ty, $o:expr, $inp:expr, $io:expr) => {{
        let z: $t = 0;
        match $o {
            op::MAX => apply::<$t>($inp, $io, |a, b| a.max(b)),
            op::MIN => apply::<$t>($inp, $io, |a, b| a.min(b)),
            op::SUM => apply::<$t>($inp, $io, |a, b| a.wrapping_add(b)),
            op::PROD => apply::<$t>($inp, $io, |a, b| a.wrapping_mul(b)),
            op::LAND => apply::<$t>($inp, $io, |a, b| ((a != z) && (b != z)) as $t),
            op::LOR => apply::<$t>($inp, $io, |a, b| ((a != z) || (b != z)) as $t),
            op::LXOR => apply::<$t>($inp, $io, |a, b| ((a != z) != (b != z)) as $t),
            op::BAND => apply::<$t>($inp, $io, |a, b| a & b),
            op::BOR => apply::<$t>($inp, $io, |a, b| a | b),
            op::BXOR => apply::<$t>($inp, $io, |a, b| a ^ b),
            _ => unreachable!("checked by op::check"),
        }
    }};
}

macro_rules! float_kernel {
    ($t:ty, $o:expr, $inp:expr, $io:expr) => {
        match $o {
            op::MAX => apply::<$t>($inp, $io, |a, b| if a > b { a } else { b }),
            op::MIN => apply::<$t>($inp, $io, |a, b| if a < b { a } else { b }),
            op::SUM => apply::<$t>($inp, $io, |a, b| a + b),
            op::PROD => apply::<$t>($inp, $io, |a, b| a * b),
            _ => unreachable!("checked by op::check"),
        }
    };
}

macro_rules! complex_kernel {
    ($t:ty, $o:expr, $inp:expr, $io:expr) => {{
        let n = std::mem::size_of::<$t>();
        for (a, b) in $inp.chunks_exact(2 * n).zip($io.chunks_exact_mut(2 * n)) {
            let (ar, ai) = (<$t>::load(&a[..n]), <$t>::load(&a[n..]));
            let (br, bi) = (<$t>::load(&b[..n]), <$t>::load(&b[n..]));
            let (r, i) = match $o {
                op::SUM => (ar + br, ai + bi),
                _ => (ar * br - ai * bi, ar * bi + ai * br),
            };
            r.store(&mut b[..n]);
            i.store(&mut b[n..]);
        }
    }};
}

/// Applies a predefined op to one run of elements of a single basic type.
fn basic_kernel(o: i32, b: Basic, inp: &[u8], io: &mut [u8]) {
    use Basic::*;
    match b {
        I8 => int_kernel!(i8, o, inp, io),
        U8 | Byte | Bool | Logical1 | Character | Packed => int_kernel!(u8, o, inp, io),
        I16 => int_kernel!(i16, o, inp, io),
        U16 => int_kernel!(u16, o, inp, io),
        I32 => int_kernel!(i32, o, inp, io),
        U32 | Logical4 => int_kernel!(u32, o, inp, io),
        I64 => int_kernel!(i64, o, inp, io),
        U64 => int_kernel!(u64, o, inp, io),
        F32 => float_kernel!(f32, o, inp, io),
        F64 => float_kernel!(f64, o, inp, io),
        CF32 => complex_kernel!(f32, o, inp, io),
        CF64 => complex_kernel!(f64, o, inp, io),
        LongDouble => {
            // SAFETY: both slices hold n whole 16-byte elements; the C
            // kernel reads and writes exactly that range, via memcpy.
            unsafe { mpistages_reduce_ld(o, inp.len() / 16, inp.as_ptr(), io.as_mut_ptr()) };
        }
        CLongDouble => {
            // SAFETY: as above with 32-byte elements.
            unsafe { mpistages_reduce_cld(o, inp.len() / 32, inp.as_ptr(), io.as_mut_ptr()) };
        }
    }
}

fn loc_kernel<V: Elem + PartialOrd, I: Elem + PartialOrd>(
    o: i32,
    ext: usize,
    off: usize,
    n: usize,
    inp: &[u8],
    io: &mut [u8],
) {
    for e in 0..n {
        let base = e * ext;
        let (av, ai) = (
            V::load(&inp[base..base + V::N]),
            I::load(&inp[base + off..base + off + I::N]),
        );
        let (bv, bi) = (
            V::load(&io[base..base + V::N]),
            I::load(&io[base + off..base + off + I::N]),
        );
        let better = if o == op::MINLOC { av < bv } else { av > bv };
        if better || (av == bv && ai < bi) {
            av.store(&mut io[base..base + V::N]);
            ai.store(&mut io[base + off..base + off + I::N]);
        }
    }
}

/// `inout = in op inout` for `count` elements of `t` in memory layout.
/// `handle` is the datatype handle passed on to user functions.
pub fn reduce(o: &OpDef, t: &Datatype, handle: i32, count: usize, inp: &[u8], inout: &mut [u8]) {
    if count == 0 {
        return;
    }
    match *o {
        OpDef::User { func, .. } => {
            let mut h = handle;
            let (a, b) = (
                inp.as_ptr().wrapping_offset(-t.true_lb) as *mut c_void,
                inout.as_mut_ptr().wrapping_offset(-t.true_lb) as *mut c_void,
            );
            // Both buffers hold `count` elements laid out as the datatype
            // describes (starting at its true lower bound), which is what
            // the user function was registered to accept.
            match func {
                UserFunc::Int(f) => {
                    let mut len = count as c_int;
                    // SAFETY: see above; the length and handle are locals.
                    unsafe { f(a, b, &mut len, &mut h) };
                }
                UserFunc::Large(f) => {
                    let mut len = count as i64;
                    // SAFETY: see above; the length and handle are locals.
                    unsafe { f(a, b, &mut len, &mut h) };
                }
            }
        }
        OpDef::Predefined(p) => {
            let ext = t.extent as usize;
            if let Some(pair) = t.pair {
                use Basic::*;
                let off = pair.index_off;
                // Fortran's MPI_2REAL and MPI_2DOUBLE_PRECISION carry the
                // index in the value's type; the C pairs in an int.
                match (pair.value, pair.index) {
                    (F32, F32) => loc_kernel::<f32, f32>(p, ext, off, count, inp, inout),
                    (F64, F64) => loc_kernel::<f64, f64>(p, ext, off, count, inp, inout),
                    (F32, _) => loc_kernel::<f32, i32>(p, ext, off, count, inp, inout),
                    (F64, _) => loc_kernel::<f64, i32>(p, ext, off, count, inp, inout),
                    (I64, _) => loc_kernel::<i64, i32>(p, ext, off, count, inp, inout),
                    (I32, _) => loc_kernel::<i32, i32>(p, ext, off, count, inp, inout),
                    (I16, _) => loc_kernel::<i16, i32>(p, ext, off, count, inp, inout),
                    (LongDouble, _) => {
                        // SAFETY: `count` elements of `ext` bytes are in both buffers.
                        unsafe {
                            mpistages_reduce_ldint(p, count, ext, inp.as_ptr(), inout.as_mut_ptr())
                        };
                    }
                    _ => {}
                }
                return;
            }
            let basic = t.uniform_basic().expect("checked by op::check");
            if let Some((_, len)) = t.contiguous_span(count) {
                basic_kernel(p, basic, &inp[..len], &mut inout[..len]);
                return;
            }
            for (off, len) in t.segments(count) {
                let s = (off - t.true_lb) as usize;
                basic_kernel(p, basic, &inp[s..s + len], &mut inout[s..s + len]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::consts::dt;

    fn bytes<T: Elem>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; v.len() * T::N];
        for (x, c) in v.iter().zip(out.chunks_exact_mut(T::N)) {
            x.store(c);
        }
        out
    }

    #[test]
    fn sums_and_maxes() {
        let t = Datatype::predefined(dt::DOUBLE).unwrap();
        let a = bytes(&[1.5f64, -2.0, 3.0]);
        let mut b = bytes(&[1.0f64, 5.0, -3.0]);
        reduce(&OpDef::Predefined(op::SUM), &t, dt::DOUBLE, 3, &a, &mut b);
        assert_eq!(b, bytes(&[2.5f64, 3.0, 0.0]));
        let t = Datatype::predefined(dt::INT).unwrap();
        let a = bytes(&[7i32, -1]);
        let mut b = bytes(&[3i32, 4]);
        reduce(&OpDef::Predefined(op::MAX), &t, dt::INT, 2, &a, &mut b);
        assert_eq!(b, bytes(&[7i32, 4]));
    }

    #[test]
    fn minloc_breaks_ties_by_lower_index() {
        let t = Datatype::predefined(dt::TWO_INT).unwrap();
        let a = bytes(&[5i32, 3, 9, 1]);
        let mut b = bytes(&[5i32, 2, 8, 0]);
        reduce(
            &OpDef::Predefined(op::MINLOC),
            &t,
            dt::TWO_INT,
            2,
            &a,
            &mut b,
        );
        assert_eq!(b, bytes(&[5i32, 2, 8, 0]));
        let a = bytes(&[5i32, 1, 7, 4]);
        reduce(
            &OpDef::Predefined(op::MAXLOC),
            &t,
            dt::TWO_INT,
            2,
            &a,
            &mut b,
        );
        assert_eq!(b, bytes(&[5i32, 1, 8, 0]));
    }

    #[test]
    fn fortran_pairs_keep_the_index_in_the_value_type() {
        let t = Datatype::predefined(dt::TWO_DOUBLE_PRECISION).unwrap();
        let a = bytes(&[2.0f64, 1.0, -1.0, 1.0]);
        let mut b = bytes(&[2.0f64, 0.0, 0.0, 0.0]);
        let maxloc = OpDef::Predefined(op::MAXLOC);
        reduce(&maxloc, &t, dt::TWO_DOUBLE_PRECISION, 2, &a, &mut b);
        assert_eq!(b, bytes(&[2.0f64, 0.0, 0.0, 0.0]));
        let t = Datatype::predefined(dt::TWO_REAL).unwrap();
        let a = bytes(&[1.0f32, 3.0]);
        let mut b = bytes(&[1.0f32, 4.0]);
        reduce(
            &OpDef::Predefined(op::MINLOC),
            &t,
            dt::TWO_REAL,
            1,
            &a,
            &mut b,
        );
        assert_eq!(b, bytes(&[1.0f32, 3.0]));
    }

    #[test]
    fn long_double_sum_via_c() {
        let t = Datatype::predefined(dt::LONG_DOUBLE).unwrap();
        // 1.0L in x87 extended format: mantissa 1<<63, exponent 0x3fff.
        let mut one = vec![0u8; 16];
        one[7] = 0x80;
        one[8] = 0xff;
        one[9] = 0x3f;
        let mut io = one.clone();
        reduce(
            &OpDef::Predefined(op::SUM),
            &t,
            dt::LONG_DOUBLE,
            1,
            &one,
            &mut io,
        );
        // 2.0L: exponent 0x4000.
        assert_eq!(&io[7..10], &[0x80, 0x00, 0x40]);
    }

    #[test]
    fn invalid_pairs_are_refused() {
        let f = Datatype::predefined(dt::DOUBLE).unwrap();
        assert_eq!(
            check(&OpDef::Predefined(op::BAND), &f).unwrap_err().class,
            err::OP
        );
        assert_eq!(
            check(&OpDef::Predefined(op::MINLOC), &f).unwrap_err().class,
            err::OP
        );
        let c = Datatype::predefined(dt::C_DOUBLE_COMPLEX).unwrap();
        assert!(check(&OpDef::Predefined(op::MAX), &c).is_err());
        assert!(check(&OpDef::Predefined(op::PROD), &c).is_ok());
    }
}
