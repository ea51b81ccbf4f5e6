//! Scrolling content taller than the screen (a long question, many options, the review,
//! whatever a dialog draws): which lines are shown, the "▲ N more" / "▼ N more" markers, and
//! the keys that scroll by hand. The draw records what it laid out here (interior
//! mutability: drawing still takes the state by shared reference), so a key knows how far a
//! page is and whether anything is hidden.

use std::cell::Cell;

#[derive(Debug, Default)]
pub struct Scroll {
    /// The first content line shown at the last draw, or where a key moved it.
    top: Cell<usize>,
    /// Content lines shown at the last draw.
    shown: Cell<usize>,
    /// The largest `top` at the last draw (0: everything fits).
    max: Cell<usize>,
    /// Scrolled by hand: keep `top` even when the focus is off screen, until it moves.
    pinned: Cell<bool>,
}

/// A hand scroll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    LineUp,
    LineDown,
    PageUp,
    PageDown,
    Top,
    Bottom,
}

/// What the draw shows: content lines `top..top + shown`, and how many lie above and below
/// (each non-zero count takes one row for its marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub top: usize,
    pub shown: usize,
    pub above: usize,
    pub below: usize,
}

impl Scroll {
    pub fn hidden_above(&self) -> bool {
        self.top.get() > 0
    }

    pub fn hidden_below(&self) -> bool {
        self.top.get() < self.max.get()
    }

    /// Whether anything was hidden at the last draw.
    pub fn hidden(&self) -> bool {
        self.max.get() > 0
    }

    pub fn scroll(&self, m: Move) {
        let page = self.shown.get().saturating_sub(1).max(1);
        let top = self.top.get();
        let max = self.max.get();
        self.top.set(match m {
            Move::LineUp => top.saturating_sub(1),
            Move::LineDown => (top + 1).min(max),
            Move::PageUp => top.saturating_sub(page),
            Move::PageDown => (top + page).min(max),
            Move::Top => 0,
            Move::Bottom => max,
        });
        self.pinned.set(true);
    }

    /// The focus moved: show it again (scrolling as little as possible from here).
    pub fn follow(&self) {
        self.pinned.set(false);
    }

    /// Lays out `total` content lines in `height` rows so that lines `focus.0..focus.1` are
    /// visible (unless scrolled by hand), with `prefer_top` asking for the top of the content
    /// whenever the focus fits there (the first row of a list: show the header above it).
    pub fn view(
        &self,
        total: usize,
        height: usize,
        focus: (usize, usize),
        prefer_top: bool,
    ) -> View {
        let v = layout(
            total,
            height,
            self.top.get(),
            focus,
            prefer_top,
            self.pinned.get(),
        );
        self.top.set(v.top);
        self.shown.set(v.shown);
        self.max.set(max_top(total, height));
        v
    }
}

/// Content lines that fit from `top`: a row goes to each marker needed.
fn shown_from(total: usize, height: usize, top: usize) -> usize {
    if total <= height {
        return total;
    }
    let rows = height.saturating_sub(usize::from(top > 0));
    if top + rows >= total {
        total - top
    } else {
        rows.saturating_sub(1)
    }
}

fn max_top(total: usize, height: usize) -> usize {
    if total <= height || height < 2 {
        return 0;
    }
    total - (height - 1)
}

fn layout(
    total: usize,
    height: usize,
    top: usize,
    focus: (usize, usize),
    prefer_top: bool,
    pinned: bool,
) -> View {
    let max = max_top(total, height);
    let mut t = top.min(max);
    if !pinned {
        let (f0, f1) = (focus.0.min(total), focus.1.min(total).max(focus.0));
        if prefer_top && f1 <= shown_from(total, height, 0) {
            t = 0;
        }
        if f0 < t {
            t = f0;
        }
        while t < max && f1 > t + shown_from(total, height, t) {
            t += 1;
        }
        // A focus taller than the screen shows its start.
        if f0 < t {
            t = f0.min(max);
        }
    }
    let shown = shown_from(total, height, t);
    View {
        top: t,
        shown,
        above: t,
        below: total - t - shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_fits_without_markers() {
        let s = Scroll::default();
        assert_eq!(
            s.view(5, 10, (2, 3), false),
            View {
                top: 0,
                shown: 5,
                above: 0,
                below: 0
            }
        );
        assert!(!s.hidden_above() && !s.hidden_below());
    }

    #[test]
    fn markers_take_rows_and_every_line_is_reachable() {
        let s = Scroll::default();
        // 20 lines in 10 rows: from the top, 9 shown and a "▼ 11 more" row.
        assert_eq!(
            s.view(20, 10, (0, 1), true),
            View {
                top: 0,
                shown: 9,
                above: 0,
                below: 11
            }
        );
        assert!(s.hidden_below());
        s.scroll(Move::PageDown);
        let v = s.view(20, 10, (0, 1), true);
        assert_eq!((v.above, v.shown, v.below), (8, 8, 4), "{v:?}");
        s.scroll(Move::Bottom);
        let v = s.view(20, 10, (0, 1), true);
        assert_eq!((v.top, v.shown, v.below), (11, 9, 0), "{v:?}");
        assert_eq!(v.top + v.shown, 20);
        s.scroll(Move::LineUp);
        assert_eq!(s.view(20, 10, (0, 1), true).top, 10);
        s.scroll(Move::Top);
        assert_eq!(s.view(20, 10, (0, 1), true).top, 0);
        // Following the focus again scrolls as little as possible.
        s.follow();
        let v = s.view(20, 10, (14, 16), false);
        assert!(v.top <= 14 && v.top + v.shown >= 16, "{v:?}");
        let v2 = s.view(20, 10, (12, 13), false);
        assert_eq!(v2.top, v.top, "no jump while the focus stays on screen");
        // Back to the first row: the top (the header) comes back with it.
        let v = s.view(20, 10, (3, 4), true);
        assert_eq!(v.top, 0);
    }

    #[test]
    fn a_focus_taller_than_the_screen_shows_its_start() {
        let s = Scroll::default();
        let v = s.view(30, 6, (10, 25), false);
        assert_eq!(v.top, 10);
        let tiny = Scroll::default();
        let v = tiny.view(30, 1, (10, 12), false);
        assert!(v.shown <= 1, "{v:?}");
    }
}
