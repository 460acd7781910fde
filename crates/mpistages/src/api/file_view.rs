//! An MPI-IO file view (`MPI_File_set_view`): which bytes of the file a
//! process sees, as a stream. The stream is the filetype tiled from the
//! displacement on, each tile `extent` bytes further; only the filetype's
//! data bytes belong to the stream. Offsets and file pointers count etypes
//! of that stream. This module maps a range of the stream to the file's
//! byte runs and back; it knows nothing of files or communicators.

use super::consts::err;
use super::datatype::Datatype;
use super::error::{fail, MpiResult};

/// The data representations every view may name.
const PREDEFINED_DATAREPS: [&str; 3] = ["native", "internal", "external32"];

/// Representations the program registered (`MPI_Register_datarep`).
static REGISTERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// `MPI_Register_datarep`: views may name `name` from now on.
pub fn register_datarep(name: &str) -> MpiResult<()> {
    if name.is_empty() {
        return fail(err::ARG, "the representation's name is empty");
    }
    let mut r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    if PREDEFINED_DATAREPS.contains(&name) || r.iter().any(|n| n == name) {
        return fail(
            err::DUP_DATAREP,
            format!("the data representation '{name}' is defined already"),
        );
    }
    r.push(name.to_string());
    Ok(())
}

/// Whether the program registered representation `name`.
pub fn datarep_registered(name: &str) -> bool {
    let r = REGISTERED.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().any(|n| n == name)
}

/// A view, checked.
#[derive(Clone, Debug)]
pub struct View {
    /// Where the first tile starts, in bytes from the start of the file.
    pub disp: u64,
    /// Size of the etype, the unit of offsets, in bytes.
    pub etype_size: usize,
    /// The data runs of one tile: (offset from the tile's start, length),
    /// in stream order, adjacent runs joined.
    tile: Vec<(u64, usize)>,
    /// Bytes from one tile's start to the next's.
    extent: u64,
    /// Data bytes in one tile.
    size: usize,
}

impl View {
    /// The view every file starts with: bytes from offset 0.
    pub fn bytes() -> View {
        View {
            disp: 0,
            etype_size: 1,
            tile: vec![(0, 1)],
            extent: 1,
            size: 1,
        }
    }

    /// Checks a view as `MPI_File_set_view` must: the etype has data, the
    /// filetype is made of whole etypes, its displacements are not
    /// negative and do not go back (so the stream never revisits a byte
    /// before it), its extent covers its data.
    pub fn new(disp: u64, etype: &Datatype, filetype: &Datatype) -> MpiResult<View> {
        if etype.size == 0 {
            return fail(err::ARG, "the etype of a file view has no data");
        }
        if filetype.size == 0 || !filetype.size.is_multiple_of(etype.size) {
            return fail(
                err::ARG,
                format!(
                    "the filetype of a file view must be made of whole etypes: it has {} bytes of data, the etype {}",
                    filetype.size, etype.size
                ),
            );
        }
        let mut tile: Vec<(u64, usize)> = Vec::new();
        let mut end = 0u64;
        for (off, len) in filetype.segments(1) {
            if len == 0 {
                continue;
            }
            let Ok(off) = u64::try_from(off) else {
                return fail(
                    err::ARG,
                    "the filetype of a file view has a negative displacement",
                );
            };
            if off < end {
                return fail(
                    err::ARG,
                    "the displacements of a file view's filetype must not decrease or overlap",
                );
            }
            end = off + len as u64;
            match tile.last_mut() {
                Some((o, l)) if *o + *l as u64 == off => *l += len,
                _ => tile.push((off, len)),
            }
        }
        // Tiles follow each other every extent bytes: one tile's data
        // (from its first byte, which need not be at 0) must fit in it,
        // or tiles would overlap.
        let extent = u64::try_from(filetype.extent).unwrap_or(0);
        let first = tile.first().map_or(0, |t| t.0);
        if extent < end - first {
            return fail(
                err::ARG,
                format!(
                    "the extent of a file view's filetype ({}) is less than the span of its data (bytes {first} to {end})",
                    filetype.extent
                ),
            );
        }
        Ok(View {
            disp,
            etype_size: etype.size,
            tile,
            extent,
            size: filetype.size,
        })
    }

    /// Whether the stream is the file's bytes from `disp` on, one after
    /// the other.
    pub fn is_contiguous(&self) -> bool {
        self.tile.len() == 1 && self.tile[0] == (0, self.size) && self.extent == self.size as u64
    }

    /// The file's byte runs that hold `len` bytes of the stream from
    /// stream byte `start` on: (file offset, length), in stream order,
    /// adjacent runs joined.
    pub fn runs(&self, start: u64, len: usize) -> Vec<(u64, usize)> {
        let mut out: Vec<(u64, usize)> = Vec::new();
        if len == 0 {
            return out;
        }
        let size = self.size as u64;
        let mut tile_no = start / size;
        let mut skip = (start % size) as usize;
        let mut left = len;
        while left > 0 {
            let base = self.disp + tile_no * self.extent;
            for &(off, run) in &self.tile {
                if left == 0 {
                    break;
                }
                if skip >= run {
                    skip -= run;
                    continue;
                }
                let take = (run - skip).min(left);
                let at = base + off + skip as u64;
                skip = 0;
                left -= take;
                match out.last_mut() {
                    Some((o, l)) if *o + *l as u64 == at => *l += take,
                    _ => out.push((at, take)),
                }
            }
            tile_no += 1;
        }
        out
    }

    /// The file offset of stream byte `at` (`MPI_File_get_byte_offset`).
    pub fn file_offset(&self, at: u64) -> u64 {
        let size = self.size as u64;
        let mut within = at % size;
        let base = self.disp + (at / size) * self.extent;
        for &(off, run) in &self.tile {
            if within < run as u64 {
                return base + off + within;
            }
            within -= run as u64;
        }
        // Only the end of a tile: where the next one starts.
        base + self.extent
    }

    /// The stream bytes that lie before file offset `end` (for
    /// `MPI_SEEK_END` and the size a view sees).
    pub fn stream_before(&self, end: u64) -> u64 {
        let (first, last) = match (self.tile.first(), self.tile.last()) {
            (Some(f), Some(l)) => (f.0, l.0 + l.1 as u64),
            _ => return 0,
        };
        if end <= self.disp + first {
            return 0;
        }
        let rel = end - self.disp;
        // Tiles whose data all lies before `end`; then the one `end` may
        // cut (a tile's data spans at most an extent, so the next one
        // starts at or after `end`).
        let whole = if rel >= last {
            (rel - last) / self.extent + 1
        } else {
            0
        };
        let base = whole * self.extent;
        let partial: u64 = (self.tile.iter())
            .map(|&(off, run)| rel.saturating_sub(base + off).min(run as u64))
            .sum();
        whole * self.size as u64 + partial
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predefined(h: i32) -> Datatype {
        Datatype::predefined(h).expect("a predefined type")
    }

    fn int() -> Datatype {
        predefined(super::super::consts::dt::INT)
    }

    /// Two ints every four, as MPI_Type_vector(2, 2, 4, MPI_INT) resized
    /// to 16 ints' extent: a rank's share of a file striped over four.
    fn strided(first: isize) -> Datatype {
        let v = Datatype::vector(2, 2, 4, false, &int()).expect("vector");
        let shifted = Datatype::create_struct(&[1], &[first as i64 * 4], &[&v]).expect("struct");
        Datatype::resized(&shifted, 0, 64)
    }

    #[test]
    fn the_default_view_is_the_bytes_themselves() {
        let v = View::bytes();
        assert!(v.is_contiguous());
        assert_eq!(v.runs(10, 5), vec![(10, 5)]);
        assert_eq!(v.file_offset(7), 7);
        assert_eq!(v.stream_before(99), 99);
    }

    #[test]
    fn a_strided_view_maps_the_stream_onto_its_share_of_the_file() {
        // Ints 1-2 and 5-6 of every 16: bytes 4..12 and 20..28 of each 64.
        let v = View::new(100, &int(), &strided(1)).expect("view");
        assert!(!v.is_contiguous());
        assert_eq!(v.runs(0, 16), vec![(104, 8), (120, 8)]);
        // Stream bytes 4..36: the rest of the first run, a whole tile's
        // second run, then into the next tile.
        assert_eq!(
            v.runs(4, 32),
            vec![(108, 4), (120, 8), (168, 8), (184, 8), (232, 4)]
        );
        assert_eq!(v.file_offset(0), 104);
        assert_eq!(v.file_offset(8), 120);
        assert_eq!(v.file_offset(16), 168);
        assert_eq!(v.stream_before(100), 0);
        assert_eq!(v.stream_before(110), 6);
        assert_eq!(v.stream_before(164), 16);
        assert_eq!(v.stream_before(190), 30);
    }

    #[test]
    fn a_filetype_whose_data_starts_past_zero_tiles_by_its_extent() {
        // hindexed_block of 3 x 8 bytes at 4, 12, 20: lb 4, extent 24;
        // its data spans bytes 4..28 of each tile.
        let byte = predefined(super::super::consts::dt::BYTE);
        let t = Datatype::resized(
            &Datatype::indexed(&[24], &[4], true, &byte).expect("hindexed"),
            4,
            24,
        );
        let v = View::new(100, &byte, &t).expect("view");
        assert_eq!(v.runs(0, 30), vec![(104, 30)]);
        assert_eq!(v.file_offset(24), 128);
        assert_eq!(v.stream_before(104), 0);
        assert_eq!(v.stream_before(110), 6);
        assert_eq!(v.stream_before(128), 24);
        assert_eq!(v.stream_before(130), 26);
        assert_eq!(v.stream_before(152), 48);
    }

    #[test]
    fn views_that_the_standard_forbids_are_refused() {
        let byte = predefined(super::super::consts::dt::BYTE);
        // Not whole etypes: 3 bytes of filetype for 4-byte ints.
        let three = Datatype::contiguous(3, &byte).expect("contiguous");
        assert_eq!(View::new(0, &int(), &three).unwrap_err().class, err::ARG);
        // Going back: the second block before the first.
        let back = Datatype::indexed(&[1, 1], &[4, 0], false, &int()).expect("indexed");
        assert_eq!(View::new(0, &int(), &back).unwrap_err().class, err::ARG);
        // An etype without data.
        let empty = Datatype::contiguous(0, &byte).expect("contiguous");
        assert_eq!(View::new(0, &empty, &int()).unwrap_err().class, err::ARG);
    }
}
