//! The two text expositions vigil writes: Prometheus text format 0.0.4 and OpenMetrics 1.0.
//!
//! Owns: label-value escaping, number formatting, the family headers (`# HELP`, `# TYPE`) and
//! the one difference in naming between the formats (an OpenMetrics counter family is named
//! without `_total`; its samples keep it), the closing `# EOF`, and the choice of format from a
//! scraper's `Accept` header. Pure: writes into a `String`.
//!
//! Must not: know what a metric means (`super::render` does), or write a family twice (both
//! formats require a family's samples to be contiguous).
//!
//! References: Prometheus "Exposition formats" (text format 0.0.4: escaping of `\`, `"` and
//! line feed in label values, `+Inf`/`-Inf`/`NaN`), OpenMetrics 1.0 specification
//! (`application/openmetrics-text; version=1.0.0`, counter `_total` suffix, `# EOF`).

use std::fmt::Write as _;

/// Which exposition to write (on the control socket: `"prometheus"`, `"openmetrics"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// `text/plain; version=0.0.4`.
    #[default]
    Prometheus,
    /// `application/openmetrics-text; version=1.0.0`.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of a reply in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The name used on the control socket and the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Prometheus => "prometheus",
            Format::OpenMetrics => "openmetrics",
        }
    }

    /// OpenMetrics when the `Accept` header ranks `application/openmetrics-text` (version
    /// 1.0.0 or unversioned) at least as high as anything this server could otherwise send,
    /// else the Prometheus text format (also for a missing or unreadable header).
    pub fn from_accept(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        let mut openmetrics = 0.0_f64;
        let mut text = 0.0_f64;
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let mut q = 1.0_f64;
            let mut version = None;
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(v.trim().trim_matches('"').to_string()),
                    _ => {}
                }
            }
            if !(0.0..=1.0).contains(&q) {
                continue;
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v == "1.0.0") =>
                {
                    openmetrics = openmetrics.max(q);
                }
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > 0.0 && openmetrics >= text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }
}

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One exposition being written.
pub struct Writer {
    format: Format,
    out: String,
}

impl Writer {
    pub fn new(format: Format, capacity: usize) -> Writer {
        Writer {
            format,
            out: String::with_capacity(capacity),
        }
    }

    /// The headers of a family. `name` is the sample name for gauges and histograms (the
    /// base of `_bucket`, `_sum`, `_count`) and the `…_total` sample name for counters.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        let name = match (self.format, kind) {
            (Format::OpenMetrics, Kind::Counter) => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        let _ = write!(self.out, "# HELP {name} ");
        escape_help(&mut self.out, help, self.format);
        let _ = writeln!(self.out, "\n# TYPE {name} {}", kind.as_str());
    }

    /// One sample: `name{labels} value`.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                self.out.push_str(k);
                self.out.push_str("=\"");
                escape_label_value(&mut self.out, v);
                self.out.push('"');
            }
            self.out.push('}');
        }
        self.out.push(' ');
        push_number(&mut self.out, value);
        self.out.push('\n');
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing is written yet.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Appends the text of a part of the same exposition built apart ([`Writer::finish_part`]).
    pub fn append(&mut self, text: &str) {
        self.out.push_str(text);
    }

    /// This part's text, without the closing `# EOF` (a part of an exposition).
    pub fn finish_part(self) -> String {
        self.out
    }

    /// The finished exposition (with `# EOF` in OpenMetrics).
    pub fn finish(mut self) -> String {
        if self.format == Format::OpenMetrics {
            self.out.push_str("# EOF\n");
        }
        self.out
    }
}

/// A label value as both formats want it: `\` → `\\`, `"` → `\"`, line feed → `\n`; nothing
/// else is escaped (UTF-8 is allowed as is).
pub fn escape_label_value(out: &mut String, v: &str) {
    // Nearly every value (pod and container names, fixed words) needs no escaping: one copy.
    if !v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(v);
        return;
    }
    for ch in v.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// HELP text: `\` and line feed escaped in both formats, `"` too in OpenMetrics.
fn escape_help(out: &mut String, help: &str, format: Format) {
    for ch in help.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// A sample value: integers without a fraction, `+Inf`, `-Inf`, `NaN` spelled as both formats
/// want (Rust's `inf` is not a valid value).
pub fn push_number(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        push_integer(out, v as i64);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// `v` in decimal, as `{}` writes an `i64`, without the formatting machinery (most samples
/// are integers: this is the exposition's most frequent call).
fn push_integer(out: &mut String, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    for &b in &buf[i..] {
        out.push(char::from(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_escape_backslash_quote_and_newline_only() {
        let mut s = String::new();
        escape_label_value(&mut s, "a\\b\"c\nd\té");
        assert_eq!(s, "a\\\\b\\\"c\\nd\té");
    }

    #[test]
    fn numbers_are_written_as_the_formats_spell_them() {
        let cases = [
            (3.0, "3"),
            (0.0, "0"),
            (-2.0, "-2"),
            (0.25, "0.25"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
            (1e20, "100000000000000000000"),
            (999_999_999_999_999.0, "999999999999999"),
            (-999_999_999_999_999.0, "-999999999999999"),
            (10.0, "10"),
            (1_048_576.0, "1048576"),
        ];
        for (v, want) in cases {
            let mut s = String::new();
            push_number(&mut s, v);
            assert_eq!(s, want, "{v}");
        }
    }

    #[test]
    fn openmetrics_counter_families_drop_total_and_the_exposition_ends_with_eof() {
        let mut w = Writer::new(Format::OpenMetrics, 0);
        w.family("x_restarts_total", Kind::Counter, "say \"hi\"");
        w.sample("x_restarts_total", &[("pod", "web")], 2.0);
        assert_eq!(
            w.finish(),
            "# HELP x_restarts say \\\"hi\\\"\n# TYPE x_restarts counter\n\
             x_restarts_total{pod=\"web\"} 2\n# EOF\n"
        );
        let mut w = Writer::new(Format::Prometheus, 0);
        w.family("x_restarts_total", Kind::Counter, "say \"hi\"");
        w.sample("x_restarts_total", &[], 2.0);
        assert_eq!(
            w.finish(),
            "# HELP x_restarts_total say \"hi\"\n# TYPE x_restarts_total counter\n\
             x_restarts_total 2\n"
        );
    }

    #[test]
    fn accept_headers_choose_openmetrics_only_when_ranked_first() {
        // Prometheus 2.x's scrape Accept header.
        let prom2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
                     version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prom2)), Format::OpenMetrics);
        // Prometheus 3.x's.
        let prom3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,\
                     application/openmetrics-text;version=0.0.1;q=0.4,\
                     text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,\
                     text/plain;version=0.0.4;q=0.2,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prom3)), Format::OpenMetrics);
        for prom in [
            None,
            Some(""),
            Some("*/*"),
            Some("text/plain;version=0.0.4"),
            Some("text/plain, application/openmetrics-text;q=0.5"),
            Some("application/openmetrics-text;version=0.0.1"),
            Some("application/openmetrics-text;q=0"),
            Some("application/openmetrics-text;q=nonsense"),
            Some(";;;,,,=\u{0}"),
        ] {
            assert_eq!(Format::from_accept(prom), Format::Prometheus, "{prom:?}");
        }
        assert_eq!(
            Format::from_accept(Some("Application/OpenMetrics-Text")),
            Format::OpenMetrics
        );
    }
}
