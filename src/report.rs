//! Rendering what the error log tells, for a person: `report --text` ([`text`]), the HTML
//! dashboard ([`html`], drawn with [`svg`] from what [`dashboard`] gathered) and `errors
//! --text` ([`listing`]). The aggregation itself is the core's ([`crate::core::summary`]).

pub mod admission;
pub mod dashboard;
pub mod groups;
pub mod html;
pub mod listing;
pub mod palette;
pub mod svg;
pub mod text;
