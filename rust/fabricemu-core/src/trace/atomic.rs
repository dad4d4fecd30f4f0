//! Outputs appear complete or not at all: written under a temporary name, then renamed.
