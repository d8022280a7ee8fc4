"""Read-only access to Nsight Systems SQLite exports."""
