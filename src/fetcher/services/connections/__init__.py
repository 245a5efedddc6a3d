"""Connection use cases (contract §2.5-§2.7, §2.9, §6.4, §9.4): reading, changing, testing,
schema inspection, and the rules and guards they share. Never imports jobs or events."""
