//! Geo commands (GEOADD, GEOPOS, GEOSEARCH, ...).

pub mod geo;
pub mod geosearch;
