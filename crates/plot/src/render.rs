//! Drawing a figure onto a page of `SIZE` and encoding it: an SVG document, or PNG bytes with a
//! text chunk. Each figure's data implements `Draw`, so that one drawing serves both formats.

use anyhow::bail;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::style::{to_anyhow, SIZE};

/// A figure's data, drawn on any plotters backend (SVG and bitmap alike).
pub(crate) trait Draw {
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// DejaVu Sans (assets/fonts, its licence beside it), registered once as "sans-serif": the
/// only family the figures use, so that neither format needs a system font.
fn register_font() -> anyhow::Result<()> {
    static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
    static DONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if !ok {
        bail!("the embedded font cannot be read");
    }
    Ok(())
}

/// The figure as an SVG document.
pub(crate) fn render_svg<F: Draw + ?Sized>(fig: &F) -> anyhow::Result<String> {
    register_font()?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        fig.draw_on(&root)?;
        root.present().map_err(to_anyhow)?;
    }
    Ok(svg)
}

/// The figure as PNG bytes (RGB, `SIZE`), with `comment` in a `tEXt` chunk.
pub(crate) fn render_png<F: Draw + ?Sized>(fig: &F, comment: &str) -> anyhow::Result<Vec<u8>> {
    register_font()?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("figure.png");
    {
        let root = BitMapBackend::new(&path, SIZE).into_drawing_area();
        fig.draw_on(&root)?;
        root.present().map_err(to_anyhow)?;
    }
    let png = std::fs::read(&path)?;
    Ok(png_with_text(&png, "Comment", comment))
}

/// CRC-32 (ISO-HDLC, PNG's) of `bytes`.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// `png` with a `tEXt` chunk (`key`, Latin-1 `text`) after its IHDR (which ends at byte 33).
fn png_with_text(png: &[u8], key: &str, text: &str) -> Vec<u8> {
    const IHDR_END: usize = 8 + 4 + 4 + 13 + 4;
    if png.len() < IHDR_END || &png[12..16] != b"IHDR" {
        return png.to_vec();
    }
    let mut data = Vec::new();
    data.extend_from_slice(b"tEXt");
    data.extend_from_slice(key.as_bytes());
    data.push(0);
    data.extend(
        text.chars()
            .map(|c| if (c as u32) < 256 { c as u8 } else { b'?' }),
    );
    let mut out = Vec::with_capacity(png.len() + data.len() + 8);
    out.extend_from_slice(&png[..IHDR_END]);
    out.extend_from_slice(&((data.len() - 4) as u32).to_be_bytes());
    out.extend_from_slice(&data);
    out.extend_from_slice(&crc32(&data).to_be_bytes());
    out.extend_from_slice(&png[IHDR_END..]);
    out
}
