"""A training process's surroundings: ranks and their object exchanges, the console, atomic files,
the finished groups kept for a resume, the job's deadline, stop requests, the stall watchdog, the
end of a process, fault points for tests (docs/architecture.md)."""
