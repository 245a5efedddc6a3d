"""Job use cases (contract §2.8, §3, §4, §7): validation, submission, the list, the Worker's
extraction, the reaper and the work messages. Uses connections and events, never the reverse."""
