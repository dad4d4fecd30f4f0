//! Flow-size distributions given as a piecewise-linear CDF: the shipped ones (`data/*.csv`, compiled
//! in) and user CSV files.
//!
//! A CDF is a list of points (size, p) with both coordinates non-decreasing and the last p = 1. The
//! sizes between two points are uniform (the CDF is a straight line between them); a jump (two points
//! with one size) is a point mass. A sample is the continuous size rounded up to whole bytes (at least
//! 1), so P(sample <= k) = cdf(k) exactly for every whole k >= 1.

use std::fmt;

/// The shipped CDFs: scenario name, other accepted names, file (under `data/`) and its text.
pub const BUILTIN: &[(&str, &[&str], &str, &str)] = &[
    (
        "websearch",
        &[],
        "websearch.csv",
        include_str!("../../data/websearch.csv"),
    ),
    (
        "datamining",
        &["datamining_vl2", "vl2"],
        "datamining_vl2.csv",
        include_str!("../../data/datamining_vl2.csv"),
    ),
    (
        "fb_hadoop",
        &[],
        "fb_hadoop.csv",
        include_str!("../../data/fb_hadoop.csv"),
    ),
    (
        "alistorage",
        &["alistorage2019"],
        "alistorage2019.csv",
        include_str!("../../data/alistorage2019.csv"),
    ),
    (
        "google_rpc",
        &["google_rpc2008"],
        "google_rpc2008.csv",
        include_str!("../../data/google_rpc2008.csv"),
    ),
];

/// The names a scenario may give to `cdf` for a shipped distribution.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|b| b.0).collect()
}

/// A flow-size distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    /// (size in bytes, cumulative probability), both non-decreasing, the last probability 1.
    points: Vec<(f64, f64)>,
}

/// Why a CDF file is wrong: the 1-based line, the column if one is at fault, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdfError {
    pub line: usize,
    pub column: Option<&'static str>,
    pub message: String,
}

impl fmt::Display for CdfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}", self.line)?;
        if let Some(c) = self.column {
            write!(f, ", column {c}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for CdfError {}

/// The largest input file (CDF or replay CSV) read as text: a flow file of this size already holds
/// tens of millions of flows.
pub const MAX_TEXT_FILE_BYTES: u64 = 4 << 30;

/// Read a user's input file as text, without echoing any of it: only a regular file (not a device,
/// a pipe or a folder), at most [`MAX_TEXT_FILE_BYTES`], valid UTF-8 without NUL or other control
/// characters (what `/proc/self/environ` or a binary file hold). `what` names the expected format.
pub fn read_text_file(path: &std::path::Path, what: &str) -> Result<String, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read: {e}"))?;
    if !meta.is_file() {
        return Err(format!("not a regular file (expected {what})"));
    }
    if meta.len() > MAX_TEXT_FILE_BYTES {
        return Err(format!(
            "the file is {} bytes, more than the {} accepted for {what}",
            meta.len(),
            MAX_TEXT_FILE_BYTES
        ));
    }
    let mut bytes = Vec::new();
    use std::io::Read;
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TEXT_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_TEXT_FILE_BYTES {
        return Err(format!(
            "the file is larger than the {MAX_TEXT_FILE_BYTES} bytes accepted for {what}"
        ));
    }
    let binary = || format!("not a text file (it holds binary data; expected {what})");
    if bytes
        .iter()
        .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r'))
    {
        return Err(binary());
    }
    String::from_utf8(bytes).map_err(|_| binary())
}

/// A field of an input file for an error message: quoted, at most 40 characters.
pub fn quote_field(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{head:?}... ({} characters)", s.chars().count())
    }
}

impl Cdf {
    /// A shipped CDF by name (or one of its other names).
    pub fn builtin(name: &str) -> Option<Cdf> {
        BUILTIN
            .iter()
            .find(|b| b.0 == name || b.1.contains(&name))
            .map(|b| Cdf::parse(b.3).expect("the shipped CDFs are valid"))
    }

    /// Build from points (size, p); the same checks as a file.
    pub fn from_points(points: &[(f64, f64)]) -> Result<Cdf, CdfError> {
        let rows: Vec<(usize, f64, f64)> = points
            .iter()
            .enumerate()
            .map(|(i, &(s, p))| (i + 1, s, p))
            .collect();
        Self::check(rows, points.len())
    }

    /// Read and parse a CDF file (see [`read_text_file`] and [`Cdf::parse`]); the error quotes no
    /// more of the file than one offending field.
    pub fn read_file(path: &std::path::Path) -> Result<Cdf, String> {
        let text = read_text_file(path, "a CSV file of size_bytes,cdf lines")?;
        Cdf::parse(&text).map_err(|e| e.to_string())
    }

    /// Parse CSV text: one point per line, `size_bytes,cdf` (comma, tab or spaces between them), an
    /// optional header line, `#` comments and blank lines. The probabilities are fractions (0..1), or
    /// percentages when the last one is 100 (the HPCC traffic generator's files).
    pub fn parse(text: &str) -> Result<Cdf, CdfError> {
        let mut rows: Vec<(usize, f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            last_line = line_no;
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let fields: Vec<&str> = line
                .split(|c: char| c == ',' || c == ';' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            let is_header =
                |f: &&str| f.starts_with(char::is_alphabetic) && f.parse::<f64>().is_err();
            if rows.is_empty() && fields.first().is_some_and(is_header) {
                continue; // the header line
            }
            if fields.len() != 2 {
                return Err(CdfError {
                    line: line_no,
                    column: None,
                    message: format!(
                        "expected two values, size_bytes and cdf, found {}",
                        fields.len()
                    ),
                });
            }
            let number = |s: &str, column: &'static str| -> Result<f64, CdfError> {
                match s.parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(v),
                    _ => Err(CdfError {
                        line: line_no,
                        column: Some(column),
                        message: format!("expected a number, found {}", quote_field(s)),
                    }),
                }
            };
            rows.push((
                line_no,
                number(fields[0], "size_bytes")?,
                number(fields[1], "cdf")?,
            ));
        }
        Self::check(rows, last_line)
    }

    fn check(mut rows: Vec<(usize, f64, f64)>, last_line: usize) -> Result<Cdf, CdfError> {
        let Some(&(line, _, last_p)) = rows.last() else {
            return Err(CdfError {
                line: last_line.max(1),
                column: None,
                message: "no points: expected lines of size_bytes,cdf".into(),
            });
        };
        let scale = if (last_p - 100.0).abs() < 1e-6 {
            100.0
        } else {
            1.0
        };
        if (last_p / scale - 1.0).abs() > 1e-6 {
            return Err(CdfError {
                line,
                column: Some("cdf"),
                message: format!(
                    "the last point must have cdf 1 (or 100 in percent), found {last_p}"
                ),
            });
        }
        let mut prev: Option<(f64, f64)> = None;
        for row in rows.iter_mut() {
            let (line, size, p) = *row;
            let p = p / scale;
            if size < 0.0 {
                return Err(CdfError {
                    line,
                    column: Some("size_bytes"),
                    message: format!("expected a size >= 0, found {size}"),
                });
            }
            if !(-1e-9..=1.0 + 1e-9).contains(&p) {
                return Err(CdfError {
                    line,
                    column: Some("cdf"),
                    message: format!(
                        "expected a probability in 0..=1{}, found {}",
                        if scale == 100.0 {
                            " (0..=100 in percent)"
                        } else {
                            ""
                        },
                        row.2
                    ),
                });
            }
            if let Some((ps, pp)) = prev {
                if size < ps {
                    return Err(CdfError {
                        line,
                        column: Some("size_bytes"),
                        message: format!("sizes must not decrease: {size} after {ps}"),
                    });
                }
                if p < pp - 1e-12 {
                    return Err(CdfError {
                        line,
                        column: Some("cdf"),
                        message: format!(
                            "cdf values must not decrease: {} after {}",
                            p * scale,
                            pp * scale
                        ),
                    });
                }
            }
            let p = p.clamp(prev.map_or(0.0, |x| x.1), 1.0);
            prev = Some((size, p));
            row.2 = p;
        }
        let mut points: Vec<(f64, f64)> = rows.iter().map(|&(_, s, p)| (s, p)).collect();
        if let Some(last) = points.last_mut() {
            last.1 = 1.0;
        }
        Ok(Cdf { points })
    }

    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// The continuous size with cumulative probability `u` in [0, 1) (linear inside a segment).
    pub fn quantile(&self, u: f64) -> f64 {
        let pts = &self.points;
        let i = pts.partition_point(|&(_, p)| p <= u);
        if i == 0 {
            return pts[0].0;
        }
        if i >= pts.len() {
            return pts[pts.len() - 1].0;
        }
        let (s0, p0) = pts[i - 1];
        let (s1, p1) = pts[i];
        s0 + (u - p0) / (p1 - p0) * (s1 - s0)
    }

    /// A flow size for the uniform draw `u` in [0, 1): the quantile rounded up, at least 1 byte.
    pub fn sample(&self, u: f64) -> u64 {
        let x = self.quantile(u).ceil();
        if x < 1.0 {
            1
        } else if x >= u64::MAX as f64 {
            u64::MAX
        } else {
            x as u64
        }
    }

    /// P(size <= x) of the continuous distribution (before rounding).
    pub fn prob_le(&self, x: f64) -> f64 {
        let pts = &self.points;
        let i = pts.partition_point(|&(s, _)| s <= x);
        if i == 0 {
            return 0.0;
        }
        if i >= pts.len() {
            return 1.0;
        }
        let (s0, p0) = pts[i - 1];
        let (s1, p1) = pts[i];
        p0 + (x - s0) / (s1 - s0) * (p1 - p0)
    }

    /// P(sample <= k) for the sizes [`Cdf::sample`] draws (whole bytes, at least 1).
    pub fn sampled_prob_le(&self, k: u64) -> f64 {
        if k == 0 {
            0.0
        } else {
            self.prob_le(k as f64)
        }
    }

    /// The mean of the sampled sizes (rounded up to whole bytes, at least 1), exactly for the
    /// piecewise-uniform distribution.
    pub fn mean_bytes(&self) -> f64 {
        // G(x) = integral over [0, x] of ceil(t) dt, for x >= 0.
        fn g(x: f64) -> f64 {
            let n = x.floor();
            n * (n + 1.0) / 2.0 + (x - n) * (n + 1.0)
        }
        let pts = &self.points;
        let (s0, p0) = pts[0];
        let mut mean = p0 * s0.ceil().max(1.0);
        for w in pts.windows(2) {
            let ((a, pa), (b, pb)) = (w[0], w[1]);
            let mass = pb - pa;
            if mass <= 0.0 {
                continue;
            }
            let m = if b > a {
                ((g(b) - g(a)) / (b - a)).max(1.0)
            } else {
                a.ceil().max(1.0)
            };
            mean += mass * m;
        }
        mean
    }

    /// The largest size it can draw.
    pub fn max_bytes(&self) -> u64 {
        self.sample(1.0 - f64::EPSILON)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_cdfs_parse_and_have_the_documented_means() {
        // Means from shared/reference/cdf/README.md (piecewise linear), plus 0.5 B of rounding up.
        let expected = [
            ("websearch", 1_711_250.0),
            ("datamining", 12_658_199.0),
            ("fb_hadoop", 120_421.0),
            ("alistorage", 40_870.0),
            ("google_rpc", 2_892.0),
        ];
        for (name, mean) in expected {
            let c = Cdf::builtin(name).unwrap();
            let m = c.mean_bytes();
            assert!(
                (m - mean).abs() < 1.5,
                "{name}: mean {m}, documented {mean}"
            );
        }
        assert!(Cdf::builtin("vl2").is_some());
        assert!(Cdf::builtin("nope").is_none());
    }

    #[test]
    fn quantile_and_cdf_are_inverse() {
        let c = Cdf::builtin("websearch").unwrap();
        for i in 0..1000 {
            let u = i as f64 / 1000.0;
            let x = c.quantile(u);
            assert!((c.prob_le(x) - u).abs() < 1e-9, "u={u} x={x}");
        }
        assert_eq!(c.sample(0.0), 1);
        assert_eq!(c.max_bytes(), 30_000_000);
    }

    #[test]
    fn point_masses_and_percent_files() {
        let c = Cdf::parse("size,cdf\n100,50\n100,100\n").unwrap();
        assert_eq!(c.sample(0.2), 100);
        assert_eq!(c.sample(0.9), 100);
        assert!((c.mean_bytes() - 100.0).abs() < 1e-9);
        let c = Cdf::parse("# one size\n1000 1\n").unwrap();
        assert_eq!(c.sample(0.5), 1000);
    }

    #[test]
    fn bad_files_name_line_and_column() {
        let e = Cdf::parse("size_bytes,cdf\n0,0\n10,x\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, Some("cdf")));
        let e = Cdf::parse("0,0\n10,0.5\n5,1\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, Some("size_bytes")));
        let e = Cdf::parse("0,0\n10,0.5\n20,0.4\n30,1\n").unwrap_err();
        assert_eq!((e.line, e.column), (3, Some("cdf")));
        let e = Cdf::parse("0,0\n10,0.9\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, Some("cdf")));
        let e = Cdf::parse("0,0,1\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, None));
        let e = Cdf::parse("").unwrap_err();
        assert!(e.message.contains("no points"));
        let e = Cdf::parse("-5,0\n10,1\n").unwrap_err();
        assert_eq!(e.column, Some("size_bytes"));
    }

    #[test]
    fn errors_quote_no_more_than_one_short_field() {
        let secret = "SECRET_TOKEN=abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop";
        let e = Cdf::parse(&format!("0,0\n{secret} other words here\n")).unwrap_err();
        assert!(!e.message.contains("other words"), "{e}");
        let e = Cdf::parse(&format!("0,0\n1,{secret}\n")).unwrap_err();
        assert!(!e.to_string().contains("0123456789abcdefghijklmnop"), "{e}");
        assert!(e.to_string().contains("characters)"), "{e}");

        let dir = std::env::temp_dir().join(format!("fabricemu-cdf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("environ");
        std::fs::write(&bin, format!("HOME=/root\0{secret}\0")).unwrap();
        let e = Cdf::read_file(&bin).unwrap_err();
        assert!(e.contains("binary data") && !e.contains("SECRET"), "{e}");
        let e = Cdf::read_file(&dir).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        #[cfg(unix)]
        {
            let e = Cdf::read_file(std::path::Path::new("/dev/zero")).unwrap_err();
            assert!(e.contains("not a regular file"), "{e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
