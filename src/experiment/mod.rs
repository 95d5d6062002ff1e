//! Experiments: results files of sweeps, figures drawn from them, HTML reports, comparisons,
//! and the paper-figure presets that tie them together.
//!
//! A sweep (`txlab sweep`, in the command line) appends one [`results`] record per measured
//! run; everything here reads such files. [`figure`] turns records into lines of medians with
//! min–max bars, [`plot`] draws them (SVG, PNG), [`report`] writes one self-contained HTML
//! file, [`compare`] sets two files side by side, [`distinguish`] says which contenders the
//! noise leaves apart, [`preset`] holds the shipped experiments
//! that reproduce the papers' figures, with the check of each paper's claim, and [`advice`]
//! holds `txlab advise`'s rules: its contenders, its budget's halving and its verdicts.

pub mod advice;
pub mod compare;
pub mod distinguish;
pub mod figure;
pub mod plot;
pub mod preset;
pub mod report;
pub mod results;
