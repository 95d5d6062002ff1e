//! Workloads
