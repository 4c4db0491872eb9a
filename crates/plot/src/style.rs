//! The figures' common look and parts: page size, palette, bars with error bars and labels,
//! FTL markers, a titled page with a legend strip. Every text is in "sans-serif", which
//! `render` registers as the embedded DejaVu Sans.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width and height in pixels: readable at a paper's column width when scaled down.
pub(crate) const SIZE: (u32, u32) = (960, 540);

/// A palette that stays distinct in grey print: stores keep their colour across groups.
pub(crate) fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(0x1b, 0x9e, 0x77),
        RGBColor(0xd9, 0x5f, 0x02),
        RGBColor(0x75, 0x70, 0xb3),
        RGBColor(0xe7, 0x29, 0x8a),
        RGBColor(0x66, 0xa6, 0x1e),
        RGBColor(0xe6, 0xab, 0x02),
        RGBColor(0xa6, 0x76, 0x1d),
        RGBColor(0x66, 0x66, 0x66),
    ];
    C[i % C.len()]
}

pub(crate) fn to_anyhow<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing: {e}")
}

/// The largest magnitude an axis reaches (inputs are at most `input::MAX_VALUE`; ratios,
/// percentages and head room take the rest).
const MAX_AXIS: f64 = 1e15;

/// The range `lo..hi` of the axis `what`, or why it cannot be drawn. Why: plotters finds an
/// axis's key points by stepping through its range in floating point, and a range with an
/// end that is not finite or huge, reversed, or too narrow for its magnitude to be stepped
/// through never ends (a `stdev` of 1e200 hung `noftl plot` at 100 % CPU, and the dashboard
/// with it).
pub(crate) fn axis(what: &str, lo: f64, hi: f64) -> anyhow::Result<std::ops::Range<f64>> {
    let scale = lo.abs().max(hi.abs());
    let drawable = lo.is_finite() && hi.is_finite() && lo < hi && scale <= MAX_AXIS;
    if !drawable || hi - lo < scale * 1e-9 {
        anyhow::bail!(
            "the {what} axis cannot be drawn from {lo:e} to {hi:e}: the values must be finite, within {MAX_AXIS:e} of 0, and not all equal"
        );
    }
    Ok(lo..hi)
}

/// `axis` on a logarithmic scale: above zero too.
pub(crate) fn log_axis(what: &str, lo: f64, hi: f64) -> anyhow::Result<std::ops::Range<f64>> {
    if lo <= 0.0 {
        anyhow::bail!("the {what} axis is logarithmic: its values must be above 0, not {lo:e}");
    }
    axis(what, lo, hi)
}

/// The marker of the i-th FTL at `at`: filled circle, open triangle, cross.
pub(crate) fn marker<DB, C>(f: usize, at: C, c: RGBColor) -> DynElement<'static, DB, C>
where
    DB: DrawingBackend,
    C: Clone + 'static,
{
    match f % 3 {
        0 => Circle::new(at, 4, c.filled()).into_dyn(),
        1 => TriangleMarker::new(at, 6, c.stroke_width(2)).into_dyn(),
        _ => Cross::new(at, 5, c.stroke_width(2)).into_dyn(),
    }
}

/// The filled bar of slot `x` (0.1 to 0.9 of the slot) up to `y`.
pub(crate) fn bar_rect(x: f64, y: f64, c: RGBColor) -> Rectangle<(f64, f64)> {
    Rectangle::new([(x + 0.1, 0.0), (x + 0.9, y)], c.filled())
}

/// The error bar of slot `x`: `y` plus and minus `sd`.
pub(crate) fn error_bar(x: f64, y: f64, sd: f64) -> PathElement<(f64, f64)> {
    PathElement::new(vec![(x + 0.5, y - sd), (x + 0.5, y + sd)], BLACK)
}

/// Centred text whose bottom sits at `at`.
pub(crate) fn label_above<C>(text: String, at: C, size: u32) -> Text<'static, C, String> {
    Text::new(
        text,
        at,
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom)),
    )
}

/// A plot area and its legend strip.
pub(crate) type Split<DB> = (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>);

/// A white page with `title` on top, split into the plot area and a strip of `legend_px` at
/// the right for the legend: the lines keep the whole width of the plot area.
pub(crate) fn titled_with_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    size: u32,
    legend_px: u32,
) -> anyhow::Result<Split<DB>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(to_anyhow)?;
    let body = root
        .titled(title, ("sans-serif", size))
        .map_err(to_anyhow)?;
    Ok(body.split_horizontally(SIZE.0 - legend_px))
}

/// A legend in its own strip: a swatch in the i-th `colour` and the name per entry (the
/// order the series were drawn in), then notes below.
pub(crate) fn legend_strip<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    names: impl Iterator<Item = &'a str>,
    bar_swatch: bool,
    notes: &[String],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let font = TextStyle::from(("sans-serif", 14).into_font());
    let mut y = 20;
    for (i, name) in names.enumerate() {
        let c = colour(i);
        if bar_swatch {
            area.draw(&Rectangle::new([(6, y + 2), (24, y + 14)], c.filled()))
        } else {
            area.draw(&PathElement::new(
                vec![(6, y + 8), (30, y + 8)],
                c.stroke_width(3),
            ))
        }
        .map_err(to_anyhow)?;
        area.draw(&Text::new(name.to_string(), (38, y), font.clone()))
            .map_err(to_anyhow)?;
        y += 22;
    }
    y += 12;
    for line in notes {
        area.draw(&Text::new(line.clone(), (6, y), font.clone()))
            .map_err(to_anyhow)?;
        y += 18;
    }
    Ok(())
}
