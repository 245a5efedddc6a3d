"""The operational routes (contract §2.10, §2.11) and the readiness report, for every host."""
