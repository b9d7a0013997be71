//! Redis's partial quicksort (`pqsort.c`, after NetBSD's qsort): it sorts enough of a slice
//! that the elements in a range of positions are the ones a full sort would put there, in
//! order. GEO searches with `COUNT` below the number of points found use it, and since it is
//! not stable, points at equal distances come out in the order its swaps leave them: this
//! follows its every comparison and swap so that the order is Redis's.

use std::cmp::Ordering;

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    use Ordering::{Greater, Less};
    if cmp(&v[a], &v[b]) == Less {
        if cmp(&v[b], &v[c]) == Less {
            b
        } else if cmp(&v[a], &v[c]) == Less {
            c
        } else {
            a
        }
    } else if cmp(&v[b], &v[c]) == Greater {
        b
    } else if cmp(&v[a], &v[c]) == Less {
        a
    } else {
        c
    }
}

/// Swaps `n` elements from `a` with `n` from `b`, pairwise and in order.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// Sorts `v` so that positions `lrange..=rrange` hold what a full sort puts there.
pub fn pqsort<T>(v: &mut [T], lrange: usize, rrange: usize, cmp: impl Fn(&T, &T) -> Ordering) {
    let (mut lo, mut n) = (0usize, v.len());
    // The stack of the C version's recursion (its tail call is the loop).
    let mut pending = Vec::new();
    loop {
        if n < 7 {
            for pm in lo + 1..lo + n {
                let mut pl = pm;
                while pl > lo && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
        } else {
            let mut pm = lo + n / 2;
            if n > 7 {
                let mut pl = lo;
                let mut pn = lo + n - 1;
                if n > 40 {
                    let d = n / 8;
                    pl = med3(v, pl, pl + d, pl + 2 * d, &cmp);
                    pm = med3(v, pm - d, pm, pm + d, &cmp);
                    pn = med3(v, pn - 2 * d, pn - d, pn, &cmp);
                }
                pm = med3(v, pl, pm, pn, &cmp);
            }
            v.swap(lo, pm);
            let (mut pa, mut pb) = (lo + 1, lo + 1);
            // pc and pd may step below lo + 1; kept signed as the C pointers are.
            let (mut pc, mut pd) = ((lo + n - 1) as isize, (lo + n - 1) as isize);
            loop {
                while pb as isize <= pc {
                    let r = cmp(&v[pb], &v[lo]);
                    if r == Ordering::Greater {
                        break;
                    }
                    if r == Ordering::Equal {
                        v.swap(pa, pb);
                        pa += 1;
                    }
                    pb += 1;
                }
                while pb as isize <= pc {
                    let r = cmp(&v[pc as usize], &v[lo]);
                    if r == Ordering::Less {
                        break;
                    }
                    if r == Ordering::Equal {
                        v.swap(pc as usize, pd as usize);
                        pd -= 1;
                    }
                    pc -= 1;
                }
                if pb as isize > pc {
                    break;
                }
                v.swap(pb, pc as usize);
                pb += 1;
                pc -= 1;
            }
            let pn = lo + n;
            let r = (pa - lo).min(pb - pa);
            vecswap(v, lo, pb - r, r);
            let r = ((pd - pc) as usize).min(pn - pd as usize - 1);
            vecswap(v, pb, pn - r, r);
            let outside = |a: usize, len: usize| {
                (lrange < a && rrange < a) || (lrange >= a + len && rrange >= a + len)
            };
            let left = pb - pa;
            let right = (pd - pc) as usize;
            if right > 1 && !outside(pn - right, right) {
                pending.push((pn - right, right));
            }
            if left > 1 && !outside(lo, left) {
                // C recurses into the left part first, then loops on the right one.
                pending.push((lo, left));
            }
        }
        match pending.pop() {
            Some((a, len)) => (lo, n) = (a, len),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requested_range_is_sorted() {
        let mut seed = 12345u64;
        for len in [0usize, 1, 5, 7, 8, 30, 41, 100, 300] {
            let mut v: Vec<u32> = (0..len)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                    (seed >> 40) as u32 % 50
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort();
            let k = len / 3;
            if len > 0 {
                pqsort(&mut v, 0, k, |a, b| a.cmp(b));
                assert_eq!(v[..=k], sorted[..=k], "len {len}");
            }
        }
    }
}
