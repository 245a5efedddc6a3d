"""Terminal job events (contract §8, §2.12): their payloads and signing, the outbox relay and
repairer, and the event feed. Imports only the kernel."""
