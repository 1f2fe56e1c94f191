//! The HTML report's colours: Okabe and Ito's palette ("Color Universal Design", 2008), made to
//! stay apart for readers with the common colour-vision deficiencies, in one set for a light
//! page and one for a dark one. A test simulates deuteranopia, protanopia and tritanopia
//! (Machado, Oliveira and Fernandes 2009, severity 1) and checks that every two colours of a
//! set stay at least [`MIN_DELTA_E`] apart (CIE 1976 ΔE in CIELAB), and apart from the page.

/// The kinds' colours, most frequent kind first; the last is for every other kind.
pub const KINDS_LIGHT: [&str; 8] = [
    "#0072B2", // blue
    "#D55E00", // vermillion
    "#E69F00", // orange
    "#56B4E9", // sky blue
    "#009E73", // bluish green
    "#CC79A7", // reddish purple
    "#F0E442", // yellow
    "#555555", // other kinds: grey
];
/// The same on a dark page: the grey of "other" turns light.
pub const KINDS_DARK: [&str; 8] = [
    "#0072B2", "#D55E00", "#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#F0E442", "#DDDDDD",
];

/// A breaker state's CSS variable and colour, light then dark.
pub const STATES: [(&str, &str, &str); 5] = [
    ("closed", "#009E73", "#009E73"),
    ("open", "#D55E00", "#D55E00"),
    ("half", "#F0E442", "#F0E442"),
    ("forced", "#CC79A7", "#CC79A7"),
    ("disabled", "#555555", "#DDDDDD"),
];

/// The pages' backgrounds, light and dark (the style sheet's `--bg`).
pub const BACKGROUND: (&str, &str) = ("#ffffff", "#0d1117");

/// The CSS custom properties of one scheme: `--k0`…`--k7`, the states, the bars and marker.
pub fn css_vars(dark: bool) -> String {
    let kinds = if dark { &KINDS_DARK } else { &KINDS_LIGHT };
    let mut out = format!("--bg:{};", if dark { BACKGROUND.1 } else { BACKGROUND.0 });
    for (i, c) in kinds.iter().enumerate() {
        out.push_str(&format!("--k{i}:{c};"));
    }
    for (name, light, night) in STATES {
        out.push_str(&format!("--{name}:{};", if dark { night } else { light }));
    }
    out.push_str(&format!("--bar:{};--marker:{};", kinds[0], kinds[1]));
    out
}

/// The colour simulation the tests check the palette with.
#[cfg(test)]
pub mod simulation {
    /// The smallest colour difference kept between two colours of a set under each simulation.
    pub const MIN_DELTA_E: f64 = 15.0;

    /// A `#rrggbb` colour as sRGB components 0..1.
    fn srgb(hex: &str) -> Option<[f64; 3]> {
        let h = hex.strip_prefix('#')?;
        if h.len() != 6 {
            return None;
        }
        let c = |i: usize| u8::from_str_radix(h.get(i..i + 2)?, 16).ok();
        Some([
            f64::from(c(0)?) / 255.0,
            f64::from(c(2)?) / 255.0,
            f64::from(c(4)?) / 255.0,
        ])
    }

    /// What a reader with a colour-vision deficiency sees.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Vision {
        /// Typical trichromacy.
        Typical,
        /// No M cones (green).
        Deuteranopia,
        /// No L cones (red).
        Protanopia,
        /// No S cones (blue).
        Tritanopia,
    }

    /// Machado et al.'s matrices at severity 1, applied to linear RGB.
    fn matrix(v: Vision) -> [[f64; 3]; 3] {
        match v {
            Vision::Typical => [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            Vision::Deuteranopia => [
                [0.367_322, 0.860_646, -0.227_968],
                [0.280_085, 0.672_501, 0.047_413],
                [-0.011_820, 0.042_940, 0.968_881],
            ],
            Vision::Protanopia => [
                [0.152_286, 1.052_583, -0.204_868],
                [0.114_503, 0.786_281, 0.099_216],
                [-0.003_882, -0.048_116, 1.051_998],
            ],
            Vision::Tritanopia => [
                [1.255_528, -0.076_749, -0.178_779],
                [-0.078_411, 0.930_809, 0.147_602],
                [0.004_733, 0.691_367, 0.303_900],
            ],
        }
    }

    /// A colour as seen under `v`, in CIELAB (D65).
    pub fn seen(hex: &str, v: Vision) -> Option<[f64; 3]> {
        let lin = |c: f64| {
            if c <= 0.040_45 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        let s = srgb(hex)?;
        let l = [lin(s[0]), lin(s[1]), lin(s[2])];
        let m = matrix(v);
        let o: Vec<f64> = m
            .iter()
            .map(|row| (row[0] * l[0] + row[1] * l[1] + row[2] * l[2]).clamp(0.0, 1.0))
            .collect();
        let x = 0.4124 * o[0] + 0.3576 * o[1] + 0.1805 * o[2];
        let y = 0.2126 * o[0] + 0.7152 * o[1] + 0.0722 * o[2];
        let z = 0.0193 * o[0] + 0.1192 * o[1] + 0.9505 * o[2];
        let f = |t: f64| {
            if t > 0.008_856 {
                t.cbrt()
            } else {
                7.787 * t + 16.0 / 116.0
            }
        };
        let (fx, fy, fz) = (f(x / 0.950_47), f(y), f(z / 1.088_83));
        Some([116.0 * fy - 16.0, 500.0 * (fx - fy), 200.0 * (fy - fz)])
    }

    /// CIE 1976 ΔE between two colours as seen under `v`.
    pub fn delta_e(a: &str, b: &str, v: Vision) -> Option<f64> {
        let (a, b) = (seen(a, v)?, seen(b, v)?);
        Some(
            a.iter()
                .zip(b.iter())
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f64>()
                .sqrt(),
        )
    }

    /// The closest two colours of a set under any of the visions: (ΔE, a, b, vision).
    pub fn closest<'a>(set: &[&'a str]) -> Option<(f64, &'a str, &'a str, Vision)> {
        let mut best: Option<(f64, &str, &str, Vision)> = None;
        for v in [
            Vision::Typical,
            Vision::Deuteranopia,
            Vision::Protanopia,
            Vision::Tritanopia,
        ] {
            for (i, a) in set.iter().enumerate() {
                for b in &set[i + 1..] {
                    let d = delta_e(a, b, v)?;
                    if best.is_none_or(|x| d < x.0) {
                        best = Some((d, a, b, v));
                    }
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::simulation::*;
    use super::*;

    fn check(name: &str, set: &[&str]) {
        let (d, a, b, v) = closest(set).expect("colours");
        assert!(
            d >= MIN_DELTA_E,
            "{name}: {a} and {b} are {d:.1} apart under {v:?} (at least {MIN_DELTA_E})"
        );
    }

    #[test]
    fn kinds_stay_apart_for_colour_blind_readers() {
        check("kinds, light", &KINDS_LIGHT);
        check("kinds, dark", &KINDS_DARK);
    }

    #[test]
    fn breaker_states_stay_apart_and_off_the_page() {
        let light: Vec<&str> = STATES.iter().map(|s| s.1).collect();
        let dark: Vec<&str> = STATES.iter().map(|s| s.2).collect();
        check("states, light", &light);
        check("states, dark", &dark);
        // Every state against its page: a band never melts into the background.
        for (set, bg) in [(&light, BACKGROUND.0), (&dark, BACKGROUND.1)] {
            for c in set.iter() {
                let d = closest(&[c, bg]).expect("colours").0;
                assert!(d >= MIN_DELTA_E, "{c} on {bg}: {d:.1}");
            }
        }
    }

    /// The check can fail: the palette this one replaced (GitHub's Primer colours) has a
    /// brown and an orange a deuteranope cannot tell apart, and red and green that come close.
    #[test]
    fn the_check_rejects_a_palette_that_is_not_safe() {
        let old = [
            "#0969da", "#cf222e", "#9a6700", "#8250df", "#1a7f37", "#bc4c00", "#bf3989", "#0550ae",
            "#57606a", "#8c959f",
        ];
        let (d, _, _, v) = closest(&old).expect("colours");
        assert!(d < MIN_DELTA_E, "{d} under {v:?}");
        let red_green = delta_e("#cf222e", "#2da44e", Vision::Deuteranopia).expect("colours");
        let typical = delta_e("#cf222e", "#2da44e", Vision::Typical).expect("colours");
        assert!(red_green < typical / 2.0, "{red_green} vs {typical}");
    }

    #[test]
    fn the_simulation_keeps_grey_grey_and_white_white() {
        for v in [Vision::Deuteranopia, Vision::Protanopia] {
            let w = seen("#ffffff", v).expect("white");
            assert!((w[0] - 100.0).abs() < 1.0 && w[1].abs() < 2.0 && w[2].abs() < 2.0);
            let g = seen("#777777", v).expect("grey");
            assert!(g[1].abs() < 2.0 && g[2].abs() < 2.0, "{g:?}");
        }
        assert_eq!(seen("nope", Vision::Typical), None);
    }

    #[test]
    fn css_names_every_colour() {
        let css = css_vars(false);
        for i in 0..8 {
            assert!(css.contains(&format!("--k{i}:")));
        }
        for (name, ..) in STATES {
            assert!(css.contains(&format!("--{name}:")));
        }
        assert!(css_vars(true).contains("--disabled:#DDDDDD"));
    }
}
