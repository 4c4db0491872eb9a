//! Analytic write amplification of uniform random single-page writes on a page-mapped flash
//! space, the curves every WAF measurement here is checked against (`tests/waf.rs`) and plotted
//! beside (`noftl plot --kind waf`).
//!
//! T = physical pages outside the GC reserve, U = logical pages, T > U.
//! - FIFO victims: WA = a / (a + W0(-a e^-a)), a = T / U, W0 the principal branch of Lambert W
//!   (the circular-log model: Menon 1995; Desnoyers, "Analytic modeling of SSD write
//!   performance", SYSTOR 2012).
//! - Random victims: WA = 1 / (1 - U / T) (a victim's valid fraction is the mean, U / T).
//! - Greedy victims do at least as well as FIFO.

/// Principal branch of Lambert W on [-1/e, 0], by Halley's iteration.
pub fn lambert_w0(x: f64) -> f64 {
    assert!(
        (-1.0 / std::f64::consts::E..=0.0).contains(&x),
        "W0 argument {x} out of range"
    );
    // Start from the branch-point series near -1/e, else from x itself.
    let p = (2.0 * (std::f64::consts::E * x + 1.0)).sqrt();
    if p < 1e-9 {
        return -1.0; // the branch point, where Halley's step is 0/0
    }
    let mut w = if x < -0.25 { -1.0 + p - p * p / 3.0 } else { x };
    for _ in 0..100 {
        let e = w.exp();
        let f = w * e - x;
        let step = f / (e * (w + 1.0) - (w + 2.0) * f / (2.0 * w + 2.0));
        w -= step;
        if step.abs() < 1e-15 {
            break;
        }
    }
    w
}

/// WA of FIFO (circular log) victim selection with `t` physical and `u` logical pages.
pub fn fifo_waf(t: f64, u: f64) -> f64 {
    assert!(t > u && u > 0.0, "needs T > U > 0 (T {t}, U {u})");
    let a = t / u;
    a / (a + lambert_w0(-a * (-a).exp()))
}

/// WA of random victim selection with `t` physical and `u` logical pages.
pub fn random_waf(t: f64, u: f64) -> f64 {
    assert!(t > u && u > 0.0, "needs T > U > 0 (T {t}, U {u})");
    1.0 / (1.0 - u / t)
}

/// The same curves against a spare factor s = (T - U) / T, as the FTLs' `--op` gives it.
pub fn fifo_waf_at_spare(spare: f64) -> f64 {
    fifo_waf(1.0, 1.0 - spare)
}
pub fn random_waf_at_spare(spare: f64) -> f64 {
    random_waf(1.0, 1.0 - spare)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_is_right() {
        for &x in &[-1.0 / std::f64::consts::E, -0.3, -0.2, -0.05, -1e-6, 0.0] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-12, "W0({x}) = {w}");
            assert!(w.is_finite());
            assert!(w >= -1.0);
        }
        // a = 1.25: W0(-1.25 e^-1.25) = W0(-0.3581) = -0.7855 (by hand: -0.7855 e^-0.7855 =
        // -0.3581), so WA = 1.25 / (1.25 - 0.7855) = 2.691; FIFO beats random victims (5.0).
        assert!(
            (fifo_waf(1.25, 1.0) - 2.691).abs() < 0.002,
            "{}",
            fifo_waf(1.25, 1.0)
        );
        assert!(fifo_waf(1.25, 1.0) < random_waf(1.25, 1.0));
        assert!(
            (fifo_waf(100.0, 1.0) - 1.0).abs() < 1e-6,
            "no GC cost with nearly empty flash"
        );
        assert!((random_waf_at_spare(0.2) - 5.0).abs() < 1e-9);
    }
}
