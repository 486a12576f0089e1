"""The registry's SQL storage: tables and migrations, transactions, queries (SQLite, PostgreSQL)."""
