"""Benchmarks: packing speed (perf) and the RFC-0006 section 10 requirements (rfc)."""
