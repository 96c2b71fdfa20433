"""Background jobs: the job registry, RQ workers, the embedded Redis."""
