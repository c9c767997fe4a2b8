//! The value types of a pod's `schedule = { … }`: its cron pattern and its time zone, each
//! parsed once at validation and carried as what it was written as.
//!
//! The pattern is parsed by `croner` (five fields, crontab(5) and Kubernetes `CronJob`
//! syntax: minute, hour, day of month, month, day of week, with the nicknames `@yearly` …
//! `@hourly`; day of month and day of week match either, as in Vixie cron). The zone is an
//! IANA name looked up in jiff's time-zone database (the system's `/usr/share/zoneinfo`, else
//! the copy built into vigil), or, unwritten, the host's local zone (`TZ`, else
//! `/etc/localtime`, else UTC). Both serialise as their text, for the handoff and the state
//! file, and are parsed again when read. Reading the zone database is the one read here
//! beyond the config file; the core only computes with the values.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A parsed cron pattern and its text.
#[derive(Clone)]
pub struct CronPattern {
    text: String,
    cron: croner::Cron,
}

impl CronPattern {
    /// Parses `text` (five fields or a nickname; no seconds, no year).
    pub fn parse(text: &str) -> Result<CronPattern, String> {
        let parser = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Disallowed)
            .year(croner::parser::Year::Disallowed)
            .build();
        let cron = parser.parse(text.trim()).map_err(|e| e.to_string())?;
        Ok(CronPattern {
            text: text.trim().to_string(),
            cron,
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed pattern (for the core's trigger computation).
    pub fn cron(&self) -> &croner::Cron {
        &self.cron
    }
}

impl fmt::Debug for CronPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronPattern({:?})", self.text)
    }
}

impl PartialEq for CronPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Serialize for CronPattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.text.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CronPattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CronPattern::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A time zone: its IANA name as written (`None`: the host's local zone) and the zone.
#[derive(Clone)]
pub struct Zone {
    name: Option<String>,
    tz: jiff::tz::TimeZone,
}

impl Zone {
    /// The zone named `name` (`None`: the host's local zone).
    pub fn get(name: Option<&str>) -> Result<Zone, String> {
        let tz = match name {
            Some(n) => jiff::tz::TimeZone::get(n).map_err(|e| {
                format!("unknown time zone {n:?} ({e}); use an IANA name such as \"Europe/Berlin\" or \"UTC\"")
            })?,
            None => jiff::tz::TimeZone::system(),
        };
        Ok(Zone {
            name: name.map(str::to_string),
            tz,
        })
    }

    /// A zone given as it is (tests).
    pub fn of(name: &str, tz: jiff::tz::TimeZone) -> Zone {
        Zone {
            name: Some(name.to_string()),
            tz,
        }
    }

    /// The name as written, `None` for the host's local zone.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    pub fn tz(&self) -> &jiff::tz::TimeZone {
        &self.tz
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({:?})", self.name)
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Serialize for Zone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.name.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = Option::<String>::deserialize(d)?;
        Zone::get(name.as_deref()).map_err(serde::de::Error::custom)
    }
}
